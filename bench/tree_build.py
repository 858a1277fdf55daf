#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The process-tree benchmark: a `make -j2` build of many
small C files, unprofiled, under `stackprobe record` (wall 99 Hz, cpu 999
Hz) and under `perf record -g` (which follows children too), interleaved
round by round so that the machine's drift hits every variant alike.

Prints, per variant, the build's wall time (median, p90, max over the
rounds) and its overhead against the unprofiled median; the agent's
start-up cost per process (a loop of /bin/true with and without the agent
in record's directory mode); and, from the last round, each program's share
of the CPU samples (cpu mode) next to perf's, which says whether the
recording holds the processes that did the work.

    python3 bench/tree_build.py --build build [--files 120] [--rounds 5]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def make_tree(d, nfiles):
    os.makedirs(d, exist_ok=True)
    for i in range(nfiles):
        with open(os.path.join(d, f"f{i}.c"), "w") as f:
            for j in range(12):
                f.write(f"static int g{j}(int x){{int a[32];for(int k=0;k<32;k++)a[k]=x*k+{j};"
                        f"int s=0;for(int k=0;k<32;k++)s+=a[k]%7;return s;}}\n")
            f.write(f"int f{i}(int x){{return " + "+".join(f"g{j}(x)" for j in range(12)) + ";}\n")
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write("OBJS=$(patsubst %.c,%.o,$(wildcard f*.c))\nall: $(OBJS)\n"
                "%.o: %.c\n\tgcc -O2 -c $< -o $@\nclean:\n\trm -f *.o\n")


def run(cmd, cwd):
    t = time.monotonic()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t


def summary(v):
    v = sorted(v)
    p90 = v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]
    return statistics.median(v), p90, v[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--files", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cli = os.path.join(build, "stackprobe")
    work = tempfile.mkdtemp(prefix="sprobe-tree-", dir=build)
    src = os.path.join(work, "src")
    make_tree(src, a.files)
    perf = shutil.which("perf")
    variants = [
        ("plain", ["make", "-s", "-j2"]),
        ("stackprobe wall 99", [cli, "record", "-q", "--no-bpf", "-o", f"{work}/w.data", "--",
                                "make", "-s", "-j2"]),
        ("stackprobe cpu 999", [cli, "record", "-q", "--no-bpf", "-F", "999", "--mode", "cpu",
                                "-o", f"{work}/c.data", "--", "make", "-s", "-j2"]),
    ]
    if perf:
        variants.append(("perf record -g 999", [perf, "record", "-q", "-g", "-F", "999", "-o",
                                                f"{work}/perf.data", "--", "make", "-s", "-j2"]))
    times = {n: [] for n, _ in variants}
    for r in range(a.rounds):
        for name, cmd in variants:
            run(["make", "-s", "clean"], src)
            times[name].append(run(cmd, src))
    print(f"make -j2 of {a.files} C files, {a.rounds} interleaved rounds "
          f"({os.cpu_count()} CPUs, {os.uname().release})")
    base = statistics.median(times["plain"])
    print(f"  {'variant':22} {'median':>8} {'p90':>8} {'max':>8}  overhead")
    for name, _ in variants:
        med, p90, mx = summary(times[name])
        print(f"  {name:22} {med:7.2f}s {p90:7.2f}s {mx:7.2f}s  {100 * (med / base - 1):+6.1f}%")

    # Start-up cost of the agent per process: /bin/true, 200 times.
    n = 200
    pdir = os.path.join(work, "parts")
    os.makedirs(pdir, exist_ok=True)
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libstackprobe.so"),
               STACKPROBE_OUTPUT_DIR=pdir, STACKPROBE_QUIET="1")
    t0 = time.monotonic()
    for _ in range(n):
        subprocess.run(["/bin/true"], check=True)
    plain = (time.monotonic() - t0) / n
    t0 = time.monotonic()
    for _ in range(n):
        subprocess.run(["/bin/true"], check=True, env=env)
    agent = (time.monotonic() - t0) / n
    print(f"  per process (/bin/true x{n}): {plain * 1e3:.2f} ms plain, {agent * 1e3:.2f} ms with "
          f"the agent: +{(agent - plain) * 1e3:.2f} ms (start, first part, exit)")

    # Who did the work: CPU share per program, last round (cpu mode).
    out = subprocess.run([cli, "report", "-i", f"{work}/c.data", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    by = {}
    for p in d["processes"]:
        by[p["name"]] = by.get(p["name"], 0) + p["samples"]
    tot = sum(by.values()) or 1
    print(f"  stackprobe cpu 999: {len(d['processes'])} process images; CPU share by program:")
    for k, v in sorted(by.items(), key=lambda x: -x[1])[:5]:
        print(f"    {k:16} {100 * v / tot:6.2f}%")
    if perf:
        rep = subprocess.run([perf, "report", "-i", f"{work}/perf.data", "--stdio", "--sort", "comm",
                              "-F", "overhead,comm", "-g", "none"], capture_output=True, text=True).stdout
        print("  perf record -g 999: CPU share by program:")
        shown = 0
        for line in rep.splitlines():
            if line.strip() and not line.startswith("#") and shown < 5:
                print("    " + line.strip())
                shown += 1
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
