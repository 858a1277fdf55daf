#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A cgo Go program under stackprobe and perf IN THE SAME RUN:
the shares of its hot Go function (main.gospin) and hot C function (cspin).

    bench/go_vs_perf.py [--build DIR] [--seconds S] [--freq HZ] [--rounds N]

For each round and mode (cpu, wall): `perf record -g -e cpu-clock` (frame
pointers) runs `stackprobe record -m MODE -- build/gomix S`, so both sample
the same process over the same seconds (perf follows the program started by
stackprobe). A share is the function's samples over the samples of both
functions. stackprobe's gospin samples are those with main.gospin as leaf,
and those taken at runtime.asyncPreempt's first instruction with
main.gospin as its caller: the goroutine was preempted in gospin and had
not yet run an instruction of asyncPreempt (a capture that was pending
with Go's SIGURG, docs/LIMITATIONS.md "Go programs"). perf counts on-CPU
samples only; wall mode counts both threads whenever they are runnable,
which is the same split only while each has a CPU: the wall share is also
printed against 0.5 (both threads are busy all the time). A third run per
round, "wall pinned", runs the program on one CPU (taskset -c 0): its two
threads share that CPU evenly whatever else the machine runs, so perf's
CPU split is the wall split there (tests/test_go.c asserts it). Also printed:
each run's own split (the two loops' iteration counts, which cost the
same per iteration) and the samples in asyncPreempt, with the preempted
function's name recovered or not (before the unwinder knew asyncPreempt's
entry, they were `main.main.func1;runtime.asyncPreempt`).
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


def perf_counts(pdata):
    out = run(["perf", "report", "-i", pdata, "--no-children", "--sort", "sym", "--stdio",
               "-F", "sample,sym"]).stdout
    counts = {f: 0 for f in FUNCS}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\[\.\]\s+(\S+)", line)
        if m and m.group(2) in counts:
            counts[m.group(2)] += int(m.group(1))
    return counts


def stackprobe_counts(build, data):
    out = run([os.path.join(build, "stackprobe"), "report", "-i", data, "--format",
               "folded"]).stdout
    counts = {f: 0 for f in FUNCS}
    preempt = {"named": 0, "lost": 0}
    for line in out.splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        leaf = frames[-1]
        if leaf in counts:
            counts[leaf] += int(n)
        elif leaf.startswith("runtime.asyncPreempt"):
            if len(frames) > 1 and frames[-2] == "main.gospin":
                counts["main.gospin"] += int(n)
                preempt["named"] += int(n)
            else:
                preempt["lost"] += int(n)
    return counts, preempt


def same_run(build, gomix, secs, freq, mode, tmp, pin):
    """perf around stackprobe around gomix: both tools' counts of one run.
    pin: the program on CPU 0 only (taskset)."""
    pdata = os.path.join(tmp, mode + ".perf.data")
    sdata = os.path.join(tmp, mode + ".data")
    t0 = time.monotonic()
    r = run(["perf", "record", "-q", "-F", str(freq), "-g", "-e", "cpu-clock", "-o", pdata,
             "--", os.path.join(build, "stackprobe"), "record", "-q", "--no-bpf", "-F",
             str(freq), "-m", mode, "-o", sdata, "--"] + (["taskset", "-c", "0"] if pin else []) +
            [gomix, str(secs)])
    wall = time.monotonic() - t0
    c, pre = stackprobe_counts(build, sdata)
    return perf_counts(pdata), c, pre, wall, work_share(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    gomix = os.path.join(a.build, "gomix")
    worst = {"cpu": 0.0, "wall": 0.0, "wall vs 0.5": 0.0, "wall pinned": 0.0}
    share = lambda c: c["main.gospin"] / (sum(c.values()) or 1)
    with tempfile.TemporaryDirectory(dir=a.build) as tmp:
        t0 = time.monotonic()
        run([gomix, str(a.seconds)])
        print(f"gomix {a.seconds:g} s alone: {time.monotonic() - t0:.2f} s wall")
        for r in range(a.rounds):
            for mode, pin in (("cpu", False), ("wall", False), ("wall", True)):
                perf, c, pre, wall, work = same_run(a.build, gomix, a.seconds, a.freq, mode, tmp,
                                                    pin)
                ps, ss = share(perf), share(c)
                key = mode + (" pinned" if pin else "")
                worst[key] = max(worst[key], abs(ss - ps))
                if mode == "wall" and not pin:
                    worst["wall vs 0.5"] = max(worst["wall vs 0.5"], abs(ss - 0.5))
                print(f"round {r + 1} {key:11s} {wall:5.2f} s  perf gospin {perf['main.gospin']:5d}"
                      f" cspin {perf['cspin']:5d} ({ps:.3f})  stackprobe gospin "
                      f"{c['main.gospin']:5d} cspin {c['cspin']:5d} ({ss:.3f})  |diff| "
                      f"{abs(ss - ps):.3f}  asyncPreempt {pre['named']} under gospin, "
                      f"{pre['lost']} without  [run's own split {work:.3f}]")
    print("worst |gospin share - perf's, same run|: " +
          ", ".join(f"{m} {worst[m]:.3f}" for m in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
