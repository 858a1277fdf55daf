#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""cpu mode's engines against the truth and against perf.

Accuracy: tests/workloads/cpusplit.c alternates phase_a() and phase_b() on
one thread in phases of its own CPU time that equal, divide and straddle
the 4 ms scheduler tick (HZ=250), and prints the split it measured; the
"threads" workload runs four threads with a 1:2:3:4 duty cycle. Each is
profiled at 199 Hz by
  perf-event  stackprobe record --mode cpu --cpu-engine perf
  cpu-timer   stackprobe record --mode cpu --cpu-engine timer
  cpu-poll    stackprobe record --mode cpu --cpu-engine poll
  perf        perf record -F 199 --call-graph dwarf (perf script counts)
round-robin (every round runs every configuration once, starting one
later than the previous round), and the table gives, per workload and
configuration, the median over rounds of phase_a's share (threads: the
largest error over the four threads' shares), of the error, and the
range of the error.

Cost: tests/workloads/benchload.c (fixed work: the same instructions
whatever the profiler) unprofiled and under each engine at 99 and 999 Hz,
round-robin. Per sample: (profiled CPU - unprofiled CPU of the same round)
/ samples, CPU from getrusage() of the whole process tree (on a shared VM
the unprofiled run's own variance is of the same order at 99 Hz); and,
measured directly, the agent's probe and writer threads' CPU (schedstat,
polled while it runs) and the capture handlers' time in the threads (the
report's total pause), which leave out the kernel's signal delivery.

Exits non-zero, loudly, when a run fails or gives no samples.

Usage: cpuclock.py [--build DIR] [--rounds N] [--quick] [--no-perf]
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

import schedstat

PHASES = [(3000, 1000), (2000, 2000), (7000, 1000), (1000, 3000), (1000, 1000)]


def die(msg):
    print("cpuclock.py: " + msg, file=sys.stderr)
    sys.exit(1)


def run(argv, env=None):
    """Run argv; (stdout+stderr text, user+sys CPU of the tree)."""
    # getrusage has microseconds; os.times() counts clock ticks (10 ms).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        die("%s failed (%d):\n%s" % (" ".join(argv), p.returncode, p.stdout[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p.stdout, cpu


def truths(out):
    t = {}
    m = re.search(r"truth phase_a (\d+) phase_b (\d+)", out)
    if m:
        t["phase_a"], t["phase_b"] = float(m.group(1)), float(m.group(2))
    for m in re.finditer(r"truth (work\d) (\d+)", out):
        t[m.group(1)] = float(m.group(2))
    return t


def folded_counts(text, names):
    """Weighted counts of folded lines whose stack holds each name."""
    n = dict.fromkeys(names, 0)
    for line in text.splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not cnt.isdigit():
            continue
        frames = set(stack.split(";"))
        for k in names:
            if k in frames:
                n[k] += int(cnt)
    return n


def perf_counts(script, names):
    """Samples of `perf script -F ip,sym` whose chain holds each name."""
    n = dict.fromkeys(names, 0)
    for block in script.split("\n\n"):
        syms = set(w.split()[-1] for w in block.splitlines() if w.strip())
        for k in names:
            if k in syms:
                n[k] += 1
    return n


def profile(b, cfg, args, tag):
    """Counts per name (and the truth) for one run of cpusplit ARGS."""
    data = os.path.join(b.dir, tag + ".data")
    names = ["phase_a", "phase_b"] if args[0] == "phases" else ["work%d" % k for k in range(1, 5)]
    if cfg == "perf":
        out, _ = run([b.perf, "record", "-q", "-F", "199", "--call-graph", "dwarf", "-o", data, "--",
                      b.cpusplit] + args)
        script, _ = run([b.perf, "script", "-i", data, "-F", "ip,sym"])
        counts = perf_counts(script, names)
    else:
        engine = {"perf-event": "perf", "cpu-timer": "timer", "cpu-poll": "poll"}[cfg]
        out, _ = run([b.sp, "record", "-q", "--no-bpf", "-F", "199", "--mode", "cpu",
                      "--cpu-engine", engine, "-o", data, "--", b.cpusplit] + args)
        folded, _ = run([b.sp, "report", "-i", data, "--format", "folded"])
        counts = folded_counts(folded, names)
    t = truths(out)
    if sum(counts.values()) == 0 or len(t) != len(names):
        die("%s on %s: no samples or no truth:\n%s" % (cfg, " ".join(args), out[-1000:]))
    return counts, t


def accuracy(b):
    cfgs = ["perf-event", "cpu-timer", "cpu-poll"] + ([] if b.no_perf else ["perf"])
    works = [["phases", str(a), str(c), str(b.ms)] for a, c in PHASES] + [["threads", str(b.ms)]]
    res = {}
    for rnd in range(b.rounds):
        for wi, w in enumerate(works):
            order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
            for cfg in order:
                counts, t = profile(b, cfg, w, "acc-%d-%d-%s" % (rnd, wi, cfg))
                tot, ttot = sum(counts.values()), sum(t.values())
                if w[0] == "phases":
                    share = counts["phase_a"] / tot
                    err = share - t["phase_a"] / ttot
                    cell = (share, err, tot)
                else:
                    errs = [counts[k] / tot - t[k] / ttot for k in sorted(counts)]
                    share = "/".join("%.3f" % (counts[k] / tot) for k in sorted(counts))
                    cell = (share, max(errs, key=abs), tot)
                res.setdefault((wi, cfg), []).append(cell)
                print("round %d %s %s: share %s err %+.3f (%d samples)" %
                      (rnd + 1, cfg, " ".join(w[:3]), cell[0] if isinstance(cell[0], str)
                       else "%.3f" % cell[0], cell[1], tot), flush=True)
    print("\n| workload (199 Hz) | truth | " + " | ".join(cfgs) + " |")
    print("| --- | --- |" + " --- |" * len(cfgs))
    for wi, w in enumerate(works):
        if w[0] == "phases":
            label = "%s:%s ms" % (int(w[1]) // 1000, int(w[2]) // 1000)
            truth = "%.3f" % (int(w[1]) / (int(w[1]) + int(w[2])))
        else:
            label, truth = "4 threads 1:2:3:4 (duty)", "measured"
        row = []
        for cfg in cfgs:
            cells = res[(wi, cfg)]
            err = statistics.median(c[1] for c in cells)
            lo, hi = min(c[1] for c in cells), max(c[1] for c in cells)
            if w[0] == "phases":
                row.append("%.3f (%+.3f; %+.3f..%+.3f)" %
                           (statistics.median(c[0] for c in cells), err, lo, hi))
            else:
                row.append("max err %+.3f (%+.3f..%+.3f)" % (err, lo, hi))
        print("| %s | %s | %s |" % (label, truth, " | ".join(row)))


def own_cpu(argv):
    """Run `stackprobe record ... -- workload`; the agent's own threads'
    CPU (probe + writer, ns, from /proc/PID/task/TID/schedstat polled
    while it runs) and the process tree's CPU (getrusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.devnull, "w") as dn:
        p = subprocess.Popen(argv, stdout=dn, stderr=dn)
        last = schedstat.poll_children(p, 0.02)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        die("%s exited %d" % (" ".join(argv), p.returncode))
    own = schedstat.agent_ns(last)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return own, cpu


def cost(b):
    engines = ["perf", "timer", "poll"]
    freqs = [99, 999]
    load = [b.benchload, "4", str(b.work), "35"]
    one = [b.benchload, "4", "1", "35"]
    per = {}
    for rnd in range(b.rounds):
        _, base = run(load)
        _, base1 = run(one)
        cfgs = [(e, f) for f in freqs for e in engines]
        cfgs = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
        for e, f in cfgs:
            data = os.path.join(b.dir, "cost-%s-%d.data" % (e, f))
            rec = [b.sp, "record", "-q", "--no-bpf", "--no-report", "-F", str(f), "--mode", "cpu",
                   "--cpu-engine", e, "-o", data, "--"]
            _, cpu1 = run(rec + one)  # start-up and exit: the fixed cost
            own, cpu = own_cpu(rec + load)
            text, _ = run([b.sp, "report", "-i", data])
            m = re.search(r"samples:\s+(\d+) in (\d+) captures", text)
            pm = re.search(r"total pause ([0-9.]+) ms", text)
            n = int(m.group(1)) if m else 0
            if n == 0:
                die("cost: %s at %d Hz: no samples" % (e, f))
            pause_ns = float(pm.group(1)) * 1e6 if pm else 0.0
            fixed = max(cpu1 - base1, 0)
            per.setdefault((e, f), []).append(((cpu - base) * 1e6 / n,
                                               (cpu - base - fixed) * 1e6 / n, n, fixed,
                                               own / 1e3 / n, pause_ns / 1e3 / n))
            print("round %d %s %d Hz: %d samples, %.1f us/sample, net of %.0f ms fixed %.1f; "
                  "own threads %.1f us/sample, handlers %.1f us/sample (base %.2f s)" %
                  (rnd + 1, e, f, n, (cpu - base) * 1e6 / n, fixed * 1e3,
                   (cpu - base - fixed) * 1e6 / n, own / 1e3 / n, pause_ns / 1e3 / n, base),
                  flush=True)
    print("\n| engine | Hz | samples | whole-process CPU per sample (us) | net of start-up (us) "
          "| probe + writer threads per sample (us) | capture handlers per sample (us) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for f in freqs:
        for e in engines:
            c = per[(e, f)]
            print("| %s | %d | %d | %.1f | %.1f | %.1f | %.1f |" % (
                {"perf": "perf-event", "timer": "cpu-timer", "poll": "cpu-poll"}[e], f,
                statistics.median(x[2] for x in c), statistics.median(x[0] for x in c),
                statistics.median(x[1] for x in c), statistics.median(x[4] for x in c),
                statistics.median(x[5] for x in c)))


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d CPUs, Linux %s" % (model, os.cpu_count() or 0, os.uname().release)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ms", type=int, default=4000, help="wall ms per accuracy run")
    ap.add_argument("--work", type=int, default=100000, help="benchload rounds per thread")
    ap.add_argument("--quick", action="store_true", help="1 round, 2 s runs")
    ap.add_argument("--no-perf", action="store_true", help="leave perf record out")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--skip-accuracy", action="store_true")
    b = ap.parse_args()
    if b.quick:
        b.rounds, b.ms, b.work = 1, 2000, 30000
    b.sp = os.path.join(b.build, "stackprobe")
    b.cpusplit = os.path.join(b.build, "cpusplit")
    b.benchload = os.path.join(b.build, "benchload")
    for p in (b.sp, b.cpusplit, b.benchload):
        if not os.access(p, os.X_OK):
            die("%s is missing: make all %s" % (p, os.path.join(b.build, "benchload")))
    b.perf = shutil.which("perf")
    if not b.perf and not b.no_perf:
        die("perf is missing (apt-get install linux-perf), or pass --no-perf")
    print("machine: %s; load average %s" % (machine(), open("/proc/loadavg").read().split()[:3]))
    with tempfile.TemporaryDirectory() as d:
        b.dir = d
        if not b.skip_accuracy:
            accuracy(b)
        if not b.skip_cost:
            cost(b)


if __name__ == "__main__":
    main()
