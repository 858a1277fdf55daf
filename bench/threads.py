#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Many threads: what the profiler achieves and costs at 10 to 10 000 idle
threads (docs/PERFORMANCE.md "Many threads").

Workload: tests/workloads/idlethreads.c, N threads blocked in a condition
variable plus 2 threads spinning in busy_spin(), for S seconds after it
says it is ready. Configurations, each round running every one once in an
order rotated by one per round (interleaved; medians over rounds):
  base    the program alone
  sp      `stackprobe record --no-bpf -q --mode M -F F`
  perf    `perf record -g -F F` (cpu mode only)
Measured between ready + 0.5 s and ready + S - 0.5 s (the steady state,
thread creation left out):
  rate    wall mode: captures per second in the steady window against F
          (rate_run: the report's, over the whole run);
          cpu mode: samples per second of each busy thread against F
  drops   thread-captures dropped (the report's count, all reasons)
  share   wall mode: % of the idle threads whose weight is within 5 % of
          the captures they lived through
  cpu     the profiler's own CPU per second of run, in % of one core:
          stackprobe's probe and writer threads and the record process
          (schedstat); perf's process (its work inside the target's
          threads, the NMI and the call-chain walk, is not counted)
  mem     the target's anonymous memory and RSS less the unprofiled
          run's (smaps_rollup at ready + S/2); perf: its process's RSS
  busy    cpu mode: each busy thread's share of the samples
          (stackprobe against perf, sorted)

Usage: threads.py [--build DIR] [--rounds N] [--seconds S]
                  [--threads 10,100,1000,10000] [--freqs 99,999]
                  [--modes wall,cpu] [--no-perf]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROFILER_THREADS = ("stackprobe", "sprobe-writer")


def die(msg):
    print("threads.py: " + msg, file=sys.stderr)
    sys.exit(1)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def task_ns(pid, names=None):
    """ns on CPU of pid's threads (those named in names, or all)."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0
    for tid in tids:
        try:
            if names is not None:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    if f.read().strip() not in names:
                        continue
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def rollup(pid):
    """(Rss, Anonymous) kB of pid, or (0, 0)."""
    vals = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                m = re.match(r"(\w+):\s+(\d+) kB", line)
                if m:
                    vals[m.group(1)] = int(m.group(2))
    except OSError:
        pass
    return vals.get("Rss", 0), vals.get("Anonymous", 0)


def run(cfg, n, secs, build, tmp):
    """One run of configuration cfg = (kind, mode, freq). Returns a dict."""
    kind, mode, freq = cfg
    work = [os.path.join(build, "idlethreads"), str(n), str(secs), "2"]
    data = os.path.join(tmp, "out.data")
    if kind == "sp":
        cmd = [os.path.join(build, "stackprobe"), "record", "--no-bpf", "-q", "--no-report",
               "--mode", mode, "-F", str(freq), "-o", data, "--"] + work
    elif kind == "perf":
        cmd = ["perf", "record", "-q", "-g", "-F", str(freq), "-o", data, "--"] + work
    else:
        cmd = work
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    m = re.match(r"ready (\d+)", line)
    if not m:
        p.kill()
        die("%s: no 'ready' line (%r)" % (" ".join(cmd), line))
    target = int(m.group(1))
    t_ready = time.monotonic()

    def prof_ns():
        if kind == "sp":
            return task_ns(target, PROFILER_THREADS) + task_ns(p.pid)
        if kind == "perf":
            return task_ns(p.pid)
        return 0

    # Polled at fixed points of a process we do not synchronise with.
    time.sleep(0.5)
    a_ns, a_t = prof_ns(), time.monotonic()
    time.sleep(max(0.0, secs / 2.0 - 0.5))
    rss, anon = rollup(target)
    perf_rss = rollup(p.pid)[0] if kind == "perf" else 0
    time.sleep(max(0.0, t_ready + secs - 0.5 - time.monotonic()))
    b_ns, b_t = prof_ns(), time.monotonic()
    p.stdout.read()
    if p.wait() != 0:
        die("%s exited %d" % (" ".join(cmd), p.returncode))
    r = {"cpu": 100.0 * (b_ns - a_ns) / 1e9 / (b_t - a_t), "rss": rss, "anon": anon,
         "perf_rss": perf_rss}
    if kind == "sp":
        rep = subprocess.run([os.path.join(build, "stackprobe"), "report", "-i", data],
                             capture_output=True, text=True).stdout
        m = re.search(r"samples:\s+(\d+) in (\d+) captures.*?(\d+) thread-captures dropped", rep)
        if not m:
            die("no samples line in the report of " + " ".join(cmd))
        r["drops"] = int(m.group(3))
        m = re.search(r"rate:\s+([\d.]+) captures/s", rep)
        r["rate_run"] = float(m.group(1)) if m else float("nan")
        # The steady window's captures (thread creation and exit left
        # out, as for the CPU): times are CLOCK_MONOTONIC, as
        # time.monotonic() on Linux.
        ct = [ln.split() for ln in subprocess.run(
            [os.path.join(build, "bench", "capture_times"), data],
            capture_output=True, text=True).stdout.splitlines() if ln[:1].isdigit()]
        lo, hi = (t_ready + 0.5) * 1e9, (t_ready + secs - 0.5) * 1e9
        n_in = sum(1 for t, _ in ct if lo <= int(t) < hi)
        r["rate"] = n_in / (secs - 1.0)
        # Idle threads' wall shares: each lived through every capture
        # that listed all threads (and a few around them): its weight
        # should be that count, within 5 %.
        full = sum(1 for _, tot in ct if int(tot) >= n + 3)
        js = subprocess.run([os.path.join(build, "stackprobe"), "report", "-i", data,
                             "--format", "json"], capture_output=True, text=True).stdout
        try:
            ths = json.loads(js)["threads"]
        except (ValueError, KeyError):
            ths = []
        idle = sorted(t["samples"] for t in ths)[:n] if len(ths) >= n else []
        r["share_ok"] = (100.0 * sum(1 for w in idle if 0.95 * full <= w <= 1.05 * len(ct))
                         / len(idle) if idle and full else float("nan"))
        threads = [(int(t.group(3)), int(t.group(1))) for t in
                   re.finditer(r"^\s+(\d+)\s+(\S+)\s+(\d+)\s+[\d.]+%", rep.split("Threads (by samples)")[-1],
                               re.M)]
        total = sum(s for s, _ in threads)
        top = sorted(threads, reverse=True)[:2]
        r["busy"] = sorted(s / total for s, _ in top) if total else []
        if mode == "cpu":
            r["rate"] = statistics.mean(s for s, _ in top) / secs if top else float("nan")
    elif kind == "perf":
        out = subprocess.run(["perf", "script", "-i", data, "-F", "tid"], capture_output=True,
                             text=True).stdout
        counts = {}
        for tok in out.split():
            if tok.isdigit():
                counts[tok] = counts.get(tok, 0) + 1
        total = sum(counts.values())
        top = sorted(counts.values(), reverse=True)[:2]
        r["busy"] = sorted(c / total for c in top) if total else []
        r["rate"] = statistics.mean(top) / secs if top else float("nan")
        r["drops"] = 0
    return r


def med(rs, key):
    v = [r[key] for r in rs if key in r]
    return statistics.median(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--threads", default="10,100,1000,10000")
    ap.add_argument("--freqs", default="99,999")
    ap.add_argument("--modes", default="wall,cpu")
    ap.add_argument("--no-perf", action="store_true")
    a = ap.parse_args()
    if not a.no_perf and not shutil.which("perf"):
        die("perf not found (--no-perf to leave it out)")
    print("load at start: %s; %d CPUs; %d rounds of %d s" % (load(), os.cpu_count(), a.rounds,
                                                             a.seconds))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in a.threads.split(",")]:
            cfgs = [("base", "-", 0)]
            for mode in a.modes.split(","):
                for f in [int(x) for x in a.freqs.split(",")]:
                    cfgs.append(("sp", mode, f))
                    if mode == "cpu" and not a.no_perf:
                        cfgs.append(("perf", mode, f))
            res = {c: [] for c in cfgs}
            for k in range(a.rounds):
                order = cfgs[k % len(cfgs):] + cfgs[:k % len(cfgs)]
                for c in order:
                    res[c].append(run(c, n, a.seconds, a.build, tmp))
            base_rss = med(res[cfgs[0]], "rss")
            base_anon = med(res[cfgs[0]], "anon")
            for c in cfgs[1:]:
                rs = res[c]
                busy = [statistics.median(r["busy"][i] for r in rs if len(r["busy"]) == 2)
                        for i in range(2)] if all(len(r["busy"]) == 2 for r in rs) else []
                rows.append((n, c, med(rs, "rate"), med(rs, "rate_run"), med(rs, "share_ok"),
                             med(rs, "drops"), med(rs, "cpu"),
                             med(rs, "anon") - base_anon, med(rs, "rss") - base_rss,
                             med(rs, "perf_rss"), busy))
                print("N=%-5d %-4s %-4s %4d Hz: rate %7.1f/s (run %7.1f/s)  share ok %5.1f %%  "
                      "drops %8.0f  cpu %6.2f %%  anon +%6.0f kB  rss +%6.0f kB  "
                      "perf rss %6.0f kB  busy %s" %
                      (n, c[0], c[1], c[2], rows[-1][2], rows[-1][3], rows[-1][4], rows[-1][5],
                       rows[-1][6], rows[-1][7], rows[-1][8], rows[-1][9],
                       " ".join("%.3f" % b for b in busy)), flush=True)
    print("load at end: %s" % load())
    print("\n| idle threads | profiler | mode | Hz | rate /s | whole run | idle shares ok | "
          "drops | CPU % of a core | anon kB added | RSS kB added | busy shares |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for n, c, rate, rate_run, share_ok, drops, cpu, anon, rss, prss, busy in rows:
        print("| %d | %s | %s | %d | %.1f | %.1f | %.1f %% | %.0f | %.2f | %s | %s | %s |" %
              (n, "stackprobe" if c[0] == "sp" else "perf", c[1], c[2], rate, rate_run, share_ok,
               drops, cpu,
               "%.0f" % anon if c[0] == "sp" else "-",
               "%.0f" % rss if c[0] == "sp" else "(perf: %.0f)" % prss,
               " / ".join("%.3f" % b for b in busy)))


if __name__ == "__main__":
    main()
