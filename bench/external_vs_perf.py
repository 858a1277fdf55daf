#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The external tier against `perf record --call-graph dwarf`:
the same programs, the same frequency, task-clock (CPU time) sampling.

    bench/external_vs_perf.py [--build DIR] [--freq HZ] [--xz-mb N]
                              [--stack-sizes 8192,16384,32768]

Programs: build/extsplit split (static C, -O2, no frame pointers: hot_a and
hot_b do 1:3 of the same work), build/gosplit (static Go, hotA:hotB 1:3),
and xz -T2 -6 on N MB of this machine's shared libraries (stripped: both
tools name its functions by their .eh_frame FDE, "liblzma.so.5+0x15b10";
perf's per-address rows are grouped by FDE here with readelf).

For each: self-sample shares of the top functions under both tools, and
the largest difference; under stackprobe, for each stack copy size
(STACKPROBE_EXT_STACK_BYTES), the samples whose stack reaches the
thread's start (_start, clone, runtime.goexit), the samples the kernel
lost, and the wall time.
"""
import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOTS = ("_start", "__clone3", "clone", "clone3", "runtime.goexit.abi0", "runtime.goexit",
         "runtime.mstart", "runtime.rt0_go.abi0")


def run(cmd, env=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)


def sp_counts(build, cmd, freq, tmp, stack=None):
    env = dict(os.environ)
    if stack:
        env["STACKPROBE_EXT_STACK_BYTES"] = str(stack)
    out = os.path.join(tmp, "sp.data")
    t0 = time.monotonic()
    r = run([os.path.join(build, "stackprobe"), "record", "--external", "--mode", "cpu", "-F",
             str(freq), "--no-report", "-q", "-o", out, "--"] + cmd, env)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("stackprobe record failed: " + r.stderr)
    lost = sum(int(x) for x in re.findall(r"lost (\d+) samples", r.stderr))
    f = run([os.path.join(build, "stackprobe"), "report", "-i", out, "--format", "folded"]).stdout
    counts, total, rooted = {}, 0, 0
    for line in f.splitlines():
        stack, _, n = line.rpartition(" ")
        n = int(n)
        frames = stack.split(";")[1:]  # the first element is the thread
        if not frames:
            continue
        counts[frames[-1]] = counts.get(frames[-1], 0) + n
        total += n
        if frames[0] in ROOTS:
            rooted += n
    return counts, total, rooted, lost, wall


class Fdes:
    """FDE starts of a file (readelf), to name a stripped address."""

    def __init__(self):
        self.cache = {}

    def name(self, dso, addr):
        if dso not in self.cache:
            path = None
            for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/bin", "/bin"):
                if os.path.exists(os.path.join(d, dso)):
                    path = os.path.join(d, dso)
                    break
            spans = []
            if path:
                txt = run(["readelf", "--debug-dump=frames", path]).stdout
                for m in re.finditer(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", txt):
                    spans.append((int(m.group(1), 16), int(m.group(2), 16)))
            spans.sort()
            self.cache[dso] = spans
        spans = self.cache[dso]
        i = bisect.bisect_right(spans, (addr, float("inf"))) - 1
        if i >= 0 and spans[i][0] <= addr < spans[i][1]:
            return "%s+0x%x" % (dso, spans[i][0])
        return "%s+0x%x?" % (dso, addr)


def perf_counts(cmd, freq, tmp, fdes):
    data = os.path.join(tmp, "perf.data")
    t0 = time.monotonic()
    r = run(["perf", "record", "-q", "-e", "task-clock", "-F", str(freq), "--call-graph", "dwarf",
             "-o", data, "--"] + cmd)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("perf record failed: " + r.stderr)
    out = run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio",
               "-q", "-g", "none", "-F", "sample,dso,sym"]).stdout
    counts, total = {}, 0
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)\s+\[(.)\]\s+(\S+)", line)
        if not m or m.group(3) != ".":
            continue
        n, dso, sym = int(m.group(1)), m.group(2), m.group(4)
        if sym.startswith("0x"):
            sym = fdes.name(dso, int(sym, 16))
        counts[sym] = counts.get(sym, 0) + n
        total += n
    return counts, total, wall


def norm(name):
    # "liblzma.so.5.4.1+0x15b10": both tools; Go's ABI suffixes differ.
    return name.replace(".abi0", "")


def compare(title, sp, sp_total, pf, pf_total, top, only=None):
    keys = only or [k for k, _ in sorted(sp.items(), key=lambda kv: -kv[1])[:top]]
    pfn = {norm(k): v for k, v in pf.items()}
    base_sp = sum(sp.get(k, 0) for k in keys) if only else sp_total
    base_pf = sum(pfn.get(norm(k), 0) for k in keys) if only else pf_total
    worst = 0.0
    print("  %-34s %10s %10s %8s" % (title, "stackprobe", "perf", "diff"))
    for k in keys:
        a = sp.get(k, 0) / base_sp if base_sp else 0
        b = pfn.get(norm(k), 0) / base_pf if base_pf else 0
        worst = max(worst, abs(a - b))
        print("  %-34s %9.1f%% %9.1f%% %+7.1f%%" % (k[:34], 100 * a, 100 * b, 100 * (a - b)))
    print("  largest |difference|: %.1f%%" % (100 * worst))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--freq", type=int, default=499)
    ap.add_argument("--xz-mb", type=int, default=12)
    ap.add_argument("--stack-sizes", default="8192,16384,32768")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf is not installed (linux-perf)")
    tmp = tempfile.mkdtemp(prefix="sprobe-extbench-")
    src = os.path.join(tmp, "xzin")
    with open(src, "wb") as o:
        left = a.xz_mb << 20
        d = "/usr/lib/x86_64-linux-gnu"
        for n in sorted(os.listdir(d)):
            p = os.path.join(d, n)
            if left <= 0:
                break
            if os.path.isfile(p) and ".so" in n:
                with open(p, "rb") as f:
                    b = f.read(left)
                o.write(b)
                left -= len(b)
    fdes = Fdes()
    progs = [
        ("extsplit (static C -O2)", [os.path.join(a.build, "extsplit"), "split", "3000", "2"],
         ["hot_a", "hot_b"]),
        ("gosplit (static Go)", [os.path.join(a.build, "gosplit"), "3000"],
         ["main.hotA", "main.hotB"]),
        ("xz -T2 -6 (%d MB)" % a.xz_mb, ["xz", "-T2", "-6", "-k", "-f", src], None),
    ]
    sizes = [int(x) for x in a.stack_sizes.split(",") if x]
    print("machine: %s, %d CPUs; -F %d, task-clock" % (os.uname().release, os.cpu_count(), a.freq))
    for title, cmd, only in progs:
        print("\n" + title)
        pf, pf_total, pf_wall = perf_counts(cmd, a.freq, tmp, fdes)
        sp, sp_total, rooted, lost, wall = sp_counts(a.build, cmd, a.freq, tmp)
        compare("self share", sp, sp_total, pf, pf_total, a.top, only)
        print("  samples: stackprobe %d (lost %d, %.1f s), perf %d (%.1f s)" %
              (sp_total, lost, wall, pf_total, pf_wall))
        for s in sizes:
            _, t, r, l, w = sp_counts(a.build, cmd, a.freq, tmp, s)
            print("  stack copy %5d B: %5.1f%% of %d samples reach the thread's start, "
                  "%d lost, %.1f s" % (s, 100 * r / t if t else 0, t, l, w))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
