#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What the perf-event fallback for threads that block the capture signal
costs, end to end, against the signal path on the same work.

tests/workloads/blockzip.c: 2 zlib workers, fixed work. Blocked: each
worker blocks every signal once running (the fallback samples it);
open (BLOCKZIP_OPEN=1): the same work, signals open (the signal path).
Each under `stackprobe record --mode cpu` (perf-event engine) and
`--mode wall`, round-robin, ROUNDS rounds; per configuration, medians of:
samples, the agent's probe + writer threads' CPU per sample (schedstat,
polled while it runs: bench/cpuclock.py own_cpu()), and the whole
process tree's CPU over the unprofiled run of the same round, per sample
(noisy on a shared machine).

Usage: blocked_perf.py [--build DIR] [--rounds N] [--hz F] [--work R]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpuclock  # noqa: E402  (run(), own_cpu(), die(), machine())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hz", type=int, default=499)
    ap.add_argument("--work", type=int, default=8, help="blockzip rounds per worker")
    a = ap.parse_args()
    sp = os.path.join(a.build, "stackprobe")
    bz = os.path.join(a.build, "blockzip")
    for p in (sp, bz):
        if not os.access(p, os.X_OK):
            cpuclock.die("%s is missing: make all" % p)
    d = tempfile.mkdtemp(prefix="blocked-perf-")
    load = [bz, "2", str(a.work)]
    cfgs = [(m, w) for m in ("cpu", "wall") for w in ("blocked", "open")]
    per = {}
    print("machine: %s" % cpuclock.machine())
    for rnd in range(a.rounds):
        os.environ.pop("BLOCKZIP_OPEN", None)
        _, base = cpuclock.run(load)
        order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
        for mode, how in order:
            if how == "open":
                os.environ["BLOCKZIP_OPEN"] = "1"
            else:
                os.environ.pop("BLOCKZIP_OPEN", None)
            data = os.path.join(d, "%s-%s.data" % (mode, how))
            rec = [sp, "record", "-q", "--no-bpf", "--no-report", "-F", str(a.hz), "--mode", mode,
                   "-o", data, "--"]
            own, cpu = cpuclock.own_cpu(rec + load)
            os.environ.pop("BLOCKZIP_OPEN", None)
            text, _ = cpuclock.run([sp, "report", "-i", data])
            m = re.search(r"samples:\s+(\d+) in", text)
            pe = re.search(r"perf-event (\d+)", text)
            n = int(m.group(1)) if m else 0
            if n == 0:
                cpuclock.die("%s %s: no samples" % (mode, how))
            per.setdefault((mode, how), []).append(
                (n, int(pe.group(1)) if pe else 0, own / 1e3 / n, (cpu - base) * 1e6 / n))
            print("round %d %s %s: %d samples (%s perf-event), own threads %.1f us/sample, "
                  "whole process +%.1f us/sample" % (rnd + 1, mode, how, n,
                                                     pe.group(1) if pe else 0, own / 1e3 / n,
                                                     (cpu - base) * 1e6 / n), flush=True)
    print("\n| mode | workers | samples | of which perf-event | probe + writer per sample (us) "
          "| whole process per sample (us) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for mode, how in cfgs:
        c = per[(mode, how)]
        print("| %s | %s | %d | %d | %.1f | %.1f |" % (
            mode, "block every signal (fallback)" if how == "blocked" else "signals open (signal path)",
            statistics.median(x[0] for x in c), statistics.median(x[1] for x in c),
            statistics.median(x[2] for x in c), statistics.median(x[3] for x in c)))


if __name__ == "__main__":
    main()
