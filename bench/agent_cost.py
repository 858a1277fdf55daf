#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What the agent costs the program it is in.

CPU: tests/workloads/benchload.c (4 threads, 35-frame stacks, a fixed
amount of work) unprofiled, under `perf record -F F --call-graph dwarf`
and under `stackprobe record -F F --mode cpu --no-bpf --no-report`, at
99 and 999 Hz. Every round runs every configuration once, the order
rotated by one per round; the numbers are medians over rounds. Per sample:
  rec   (CPU of the recorded process tree - CPU of the unprofiled run of
        the same round) / samples: the profiler's cost while recording,
        wherever it lands (the target's threads, the kernel's work in
        them, perf's or stackprobe's own process)
  post  CPU of `perf report --stdio` (perf unwinds and names here) or
        `stackprobe report` (text) / samples
  own   stackprobe only: its probe and writer threads' CPU (schedstat,
        polled) / samples, the part of rec that is measured directly
and the ratios stackprobe rec / perf rec (target <= 0.7) and stackprobe
(rec + post) / perf (rec + post) (target <= 0.4).

Memory: tests/workloads/idlethreads.c with 10 and 200 threads blocked in a
condition variable, alone and under `stackprobe record` (wall and cpu
mode, 99 Hz; and wall mode with STACKPROBE_LINES=0: the agent then names
pcs in the program as it did before `record` took names and lines over,
without lines), and with the agent alone (LD_PRELOAD, STACKPROBE_OUTPUT:
no record; agent-cpu, agent-wall); /proc/PID/smaps_rollup read SETTLE seconds after the program
says it is ready. Deltas against the run alone of the same round: RSS,
anonymous memory, and the target of <= 1 MiB + 2 KiB per thread.
--smaps prints the mappings that grew most, for the breakdown.

The machine's load (/proc/loadavg) is printed at the start and the end:
on a shared VM read the numbers with it. Exits non-zero, loudly, when a
run fails or gives no samples.

Usage: agent_cost.py [--build DIR] [--rounds N] [--quick] [--skip-cpu]
                     [--skip-mem] [--smaps] [--work N] [--settle S]
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import schedstat


def die(msg):
    print("agent_cost.py: " + msg, file=sys.stderr)
    sys.exit(1)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(argv, out=subprocess.DEVNULL):
    """Run argv; (stdout text or None, user+sys CPU of its tree in s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        die("%s failed (%d):\n%s" % (" ".join(argv), p.returncode, (p.stderr or "")[-2000:]))
    return p.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def own_threads(argv):
    """Run `stackprobe record ... -- workload`: (probe + writer CPU in s,
    from /proc/PID/task/TID/schedstat polled while it runs, tree CPU)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    last = schedstat.poll_children(p, 0.02)
    err = p.stderr.read().decode(errors="replace")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        die("%s exited %d:\n%s" % (" ".join(argv), p.returncode, err[-2000:]))
    own = schedstat.agent_ns(last)
    return own / 1e9, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu_bench(b):
    freqs = [99, 999]
    work = [b.benchload, "4", str(b.work), "35"]
    cfgs = [("perf", f) for f in freqs] + [("sp", f) for f in freqs]
    if b.compare:
        cfgs += [("cmp", f) for f in freqs]
    per = {}
    for rnd in range(b.rounds):
        _, base = run(work)
        order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
        for tool, f in order:
            data = os.path.join(b.dir, "%s-%d.data" % (tool, f))
            if tool == "perf":
                _, rec = run([b.perf, "record", "-q", "-F", str(f), "--call-graph", "dwarf",
                              "-o", data, "--"] + work)
                _, post = run([b.perf, "report", "-i", data, "--stdio"])
                tids, _ = run([b.perf, "script", "-i", data, "-F", "tid"], out=subprocess.PIPE)
                n = sum(1 for line in tids.splitlines() if line.strip())
                own = None
            else:
                sp = b.sp if tool == "sp" else b.compare_sp
                own, rec = own_threads([sp, "record", "-q", "--no-bpf", "--no-report", "-F",
                                        str(f), "--mode", "cpu", "-o", data, "--"] + work)
                text, post = run([sp, "report", "-i", data], out=subprocess.PIPE)
                m = re.search(r"samples:\s+(\d+) in (\d+) captures", text)
                n = int(m.group(1)) if m else 0
            if n == 0:
                die("%s at %d Hz: no samples" % (tool, f))
            row = ((rec - base) * 1e6 / n, post * 1e6 / n, n, None if own is None else own * 1e6 / n)
            per.setdefault((tool, f), []).append(row)
            print("round %d %s %d Hz: %d samples, rec %.1f us/sample, post %.1f us/sample%s "
                  "(unprofiled %.2f s, load %s)" %
                  (rnd + 1, tool, f, n, row[0], row[1],
                   "" if own is None else ", own threads %.1f us/sample" % row[3], base, load()),
                  flush=True)
    med = {k: [statistics.median(r[i] for r in v) if v[0][i] is not None else None
               for i in range(4)] for k, v in per.items()}
    print("\n| Hz | perf dwarf samples | perf rec us/sample | perf post us/sample | stackprobe samples "
          "| stackprobe rec us/sample | of which probe+writer | stackprobe post us/sample "
          "| rec ratio (target <= 0.7) | rec+post ratio (target <= 0.4) |")
    print("| ---: " * 10 + "|")
    for f in freqs:
        p, s = med[("perf", f)], med[("sp", f)]
        print("| %d | %d | %.1f | %.1f | %d | %.1f | %.1f | %.1f | %.2f | %.2f |" % (
            f, p[2], p[0], p[1], s[2], s[0], s[3], s[1], s[0] / p[0] if p[0] > 0 else float("nan"),
            (s[0] + s[1]) / (p[0] + p[1])))
    # Ratios per round too: the medians of the ratios are less sensitive to
    # a slow round than the ratio of the medians.
    for f in freqs:
        rr = [s[0] / p[0] for s, p in zip(per[("sp", f)], per[("perf", f)]) if p[0] > 0]
        tr = [(s[0] + s[1]) / (p[0] + p[1]) for s, p in zip(per[("sp", f)], per[("perf", f)])]
        print("%d Hz, per round: rec ratio %s (median %.2f); rec+post ratio %s (median %.2f)" % (
            f, " ".join("%.2f" % x for x in rr), statistics.median(rr) if rr else float("nan"),
            " ".join("%.2f" % x for x in tr), statistics.median(tr)))
    if b.compare:
        print("\n| Hz | build | samples | rec us/sample | probe+writer us/sample | post us/sample "
              "| rec ratio to perf (median of rounds) |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for f in freqs:
            for tool, label in (("cmp", b.compare), ("sp", b.build)):
                c = med[(tool, f)]
                rr = [s[0] / p[0] for s, p in zip(per[(tool, f)], per[("perf", f)]) if p[0] > 0]
                print("| %d | %s | %d | %.1f | %.1f | %.1f | %.2f |" % (
                    f, label, c[2], c[0], c[3], c[1], statistics.median(rr)))


def rollup(pid):
    d = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            m = re.match(r"(\w+):\s+(\d+) kB", line)
            if m:
                d[m.group(1)] = int(m.group(2))
    return d


def mappings(pid):
    """{description: (rss kB, anon kB)} per mapping; anonymous ones by size."""
    out, cur = {}, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if m:
                size = (int(m.group(2), 16) - int(m.group(1), 16)) >> 10
                name = m.group(4) or "[anon %d kB]" % size
                cur = "%s %s" % (m.group(3), name)
                out.setdefault(cur, [0, 0])
            elif line.startswith("Rss:") and cur:
                out[cur][0] += int(line.split()[1])
            elif line.startswith("Anonymous:") and cur:
                out[cur][1] += int(line.split()[1])
    return out


def mem_run(b, n, cfg):
    prog = [b.idle, str(n), str(int(b.settle) + 2)]
    env = dict(os.environ)
    if cfg.startswith("agent-"):
        # The agent alone (no record): LD_PRELOAD and STACKPROBE_OUTPUT by
        # hand, as in production without the CLI; it names pcs and reads
        # source lines in the program itself.
        env["LD_PRELOAD"] = os.path.abspath(os.path.join(b.build, "libstackprobe.so"))
        env["STACKPROBE_OUTPUT"] = os.path.join(b.dir, "agent.data")
        env["STACKPROBE_MODE"] = cfg.split("-")[1]
        env["STACKPROBE_FREQ"] = "99"
    elif cfg != "alone":
        data = os.path.join(b.dir, "mem.data")
        sp = b.compare_sp if cfg.startswith("before:") else b.sp
        cfg = cfg.split(":")[-1]
        prog = [sp, "record", "-q", "--no-bpf", "--no-report", "--mode", cfg.split("-")[0],
                "-o", data, "--"] + prog
        if cfg.endswith("-nolines"):
            env["STACKPROBE_LINES"] = "0"  # names in the target, no lines (as before record named them)
    p = subprocess.Popen(prog, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    line = p.stdout.readline()
    m = re.match(r"ready (\d+)", line)
    if not m:
        p.kill()
        die("%s: no ready line: %r %s" % (" ".join(prog), line, p.stderr.read()[-1000:]))
    pid = int(m.group(1))
    time.sleep(b.settle)  # what the agent holds after a few seconds of rounds
    r = rollup(pid)
    maps = mappings(pid) if b.smaps else None
    p.communicate()
    if p.returncode != 0:
        die("%s exited %d" % (" ".join(prog), p.returncode))
    return r, maps


def mem_bench(b):
    counts = [10, 200]
    cfgs = ["alone", "wall", "cpu", "wall-nolines", "agent-cpu", "agent-wall"]
    if b.compare:
        cfgs += ["before:wall", "before:cpu"]
    res = {}
    for rnd in range(b.rounds):
        for n in counts:
            order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
            got = {cfg: mem_run(b, n, cfg) for cfg in order}
            a = got["alone"][0]
            for cfg in cfgs[1:]:
                r = got[cfg][0]
                d = (r["Rss"] - a["Rss"], r["Anonymous"] - a["Anonymous"], r["Pss"] - a["Pss"])
                res.setdefault((n, cfg), []).append(d)
                print("round %d, %d threads, %s: +%d kB RSS (+%d kB anonymous, +%d kB PSS); "
                      "alone %d kB (load %s)" % (rnd + 1, n, cfg, d[0], d[1], d[2], a["Rss"],
                                                  load()), flush=True)
                if b.smaps and rnd == 0:
                    base = got["alone"][1]
                    grew = []
                    for k, (rss, anon) in got[cfg][1].items():
                        brss = base.get(k, [0, 0])[0]
                        if rss - brss >= 64:
                            grew.append((rss - brss, anon, k))
                    for g in sorted(grew, reverse=True)[:12]:
                        print("    +%6d kB (anon %6d) %s" % g)
    if b.compare:
        print("(before: %s; the others: %s)" % (b.compare, b.build))
    print("\n| threads | mode | RSS added (median, min-max) kB | anonymous added kB | PSS added kB "
          "| target (1 MiB + 2 KiB/thread) kB |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n in counts:
        for cfg in cfgs[1:]:
            v = res[(n, cfg)]
            rss = [x[0] for x in v]
            print("| %d | %s | %d (%d-%d) | %d | %d | %d |" % (
                n, cfg, statistics.median(rss), min(rss), max(rss),
                statistics.median(x[1] for x in v), statistics.median(x[2] for x in v),
                1024 + 2 * n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=int, default=100000, help="benchload requests per thread")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds before reading RSS")
    ap.add_argument("--quick", action="store_true", help="2 rounds, less work")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--skip-mem", action="store_true")
    ap.add_argument("--smaps", action="store_true", help="mappings that grew, first round")
    ap.add_argument("--compare", metavar="DIR",
                    help="another build's stackprobe in the same rounds (before/after)")
    b = ap.parse_args()
    if b.quick:
        b.rounds, b.work, b.settle = 2, 30000, 2.0
    b.sp = os.path.join(b.build, "stackprobe")
    b.benchload = os.path.join(b.build, "benchload")
    b.compare_sp = os.path.join(b.compare, "stackprobe") if b.compare else None
    b.idle = os.path.join(b.build, "idlethreads")
    for p in (b.sp, b.benchload, b.idle):
        if not os.access(p, os.X_OK):
            die("%s is missing: make bench-agent-cost builds it" % p)
    b.perf = shutil.which("perf")
    if not b.perf and not b.skip_cpu:
        die("perf is missing (apt-get install linux-perf)")
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except OSError:
        git = "?"
    print("agent_cost: %d CPUs, Linux %s, commit %s, %s UTC, load average %s" % (
        os.cpu_count() or 0, os.uname().release, git, time.strftime("%H:%M", time.gmtime()),
        load()), flush=True)
    with tempfile.TemporaryDirectory() as d:
        b.dir = d
        if not b.skip_mem:
            mem_bench(b)
        if not b.skip_cpu:
            cpu_bench(b)
    print("end: %s UTC, load average %s" % (time.strftime("%H:%M", time.gmtime()), load()))


if __name__ == "__main__":
    main()
