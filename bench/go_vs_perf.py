#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A cgo Go program under stackprobe and under perf (issue 25): the shares of
its hot Go function (main.gospin) and hot C function (cspin), by self
samples, in the same kind of run.

    bench/go_vs_perf.py [--build DIR] [--seconds S] [--freq HZ] [--rounds N]

For each round: `perf record -g` (frame pointers, cpu-clock), then
`stackprobe record` in cpu mode and in wall mode, each on a fresh run of
build/gomix S. A share is the function's self samples over the samples of
both functions (perf counts on-CPU samples only; wall mode also has the Go
runtime's idle threads, which this leaves out). Also: the wall time of the
program alone and under each, and the samples stackprobe puts in
runtime.asyncPreempt (a goroutine stopped by Go's SIGURG preemption:
see docs/AGENT.md), and each run's own split (the two loops' iteration
counts: on a loaded machine the runs differ, and this says by how much).
Prints one line per run and the worst |difference|.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

FUNCS = ("main.gospin", "cspin")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          check=True, **kw)


def work_share(stdout):
    """The program's own split: gospin's iterations over both (the two
    loops cost the same per iteration, so this is its CPU share)."""
    it = dict(re.findall(r"^(gospin|cspin) (\d+)$", stdout, re.M))
    g, c = int(it.get("gospin", 0)), int(it.get("cspin", 0))
    return g / (g + c) if g + c else float("nan")


def perf_counts(gomix, secs, freq, tmp):
    data = os.path.join(tmp, "perf.data")
    t0 = time.monotonic()
    r = run(["perf", "record", "-q", "-F", str(freq), "-g", "-e", "cpu-clock", "-o", data,
             "--", gomix, str(secs)])
    wall = time.monotonic() - t0
    work = work_share(r.stdout)
    out = run(["perf", "report", "-i", data, "--no-children", "--sort", "sym", "--stdio",
               "-F", "sample,sym"]).stdout
    counts = {f: 0 for f in FUNCS}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\[\.\]\s+(\S+)", line)
        if m and m.group(2) in counts:
            counts[m.group(2)] += int(m.group(1))
    return counts, wall, 0, work


def stackprobe_counts(build, gomix, secs, freq, mode, tmp):
    data = os.path.join(tmp, mode + ".data")
    t0 = time.monotonic()
    r = run([os.path.join(build, "stackprobe"), "record", "-q", "--no-bpf", "-F", str(freq),
             "-m", mode, "-o", data, "--", gomix, str(secs)])
    wall = time.monotonic() - t0
    work = work_share(r.stdout)
    out = run([os.path.join(build, "stackprobe"), "report", "-i", data, "--format",
               "folded"]).stdout
    counts = {f: 0 for f in FUNCS}
    preempt = 0
    for line in out.splitlines():
        stack, _, n = line.rpartition(" ")
        leaf = stack.rsplit(";", 1)[-1]
        if leaf in counts:
            counts[leaf] += int(n)
        elif leaf.startswith("runtime.asyncPreempt"):
            preempt += int(n)
    return counts, wall, preempt, work


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    gomix = os.path.join(a.build, "gomix")
    worst = {"cpu": 0.0, "wall": 0.0}
    with tempfile.TemporaryDirectory(dir=a.build) as tmp:
        t0 = time.monotonic()
        run([gomix, str(a.seconds)])
        print(f"gomix {a.seconds:g} s alone: {time.monotonic() - t0:.2f} s wall")
        for r in range(a.rounds):
            perf, pwall, _, pwork = perf_counts(gomix, a.seconds, a.freq, tmp)
            ptot = sum(perf.values()) or 1
            pshare = {f: perf[f] / ptot for f in FUNCS}
            print(f"round {r + 1}: perf   {pwall:5.2f} s  " +
                  "  ".join(f"{f} {perf[f]:5d} ({pshare[f]:.3f})" for f in FUNCS) +
                  f"  [run's own split {pwork:.3f}]")
            for mode in ("cpu", "wall"):
                c, wall, pre, work = stackprobe_counts(a.build, gomix, a.seconds, a.freq, mode,
                                                       tmp)
                tot = sum(c.values()) or 1
                share = {f: c[f] / tot for f in FUNCS}
                diff = max(abs(share[f] - pshare[f]) for f in FUNCS)
                worst[mode] = max(worst[mode], diff)
                # The goroutine's samples at asyncPreempt's entry are its
                # time too (the unwinder misses gospin there: see above).
                gshare = (c["main.gospin"] + pre) / ((tot + pre) or 1)
                gdiff = abs(gshare - pshare["main.gospin"])
                worst[mode + "+preempt"] = max(worst.get(mode + "+preempt", 0.0), gdiff)
                print(f"         {mode:5s}  {wall:5.2f} s  " +
                      "  ".join(f"{f} {c[f]:5d} ({share[f]:.3f})" for f in FUNCS) +
                      f"  asyncPreempt {pre}  |diff| {diff:.3f}"
                      f"  (gospin+asyncPreempt {gshare:.3f}, |diff| {gdiff:.3f})"
                      f"  [run's own split {work:.3f}, |gospin - it| "
                      f"{abs(share['main.gospin'] - work):.3f}]")
    print("worst |share - perf's|: " + ", ".join(f"{m} {worst[m]:.3f}" for m in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
