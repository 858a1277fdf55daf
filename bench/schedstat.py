# SPDX-License-Identifier: BSD-2-Clause
"""CPU of the threads of `stackprobe record`'s children, by thread name,
read from /proc/PID/task/TID/schedstat while record runs: the agent's own
threads (probe "stackprobe", writer "sprobe-writer") told apart from the
program's without perf in the way. Shared by bench/agent_cost.py,
bench/cpuclock.py and bench/record_vs.py."""
import os
import time

AGENT_THREADS = ("stackprobe", "sprobe-writer")


def poll_children(p, interval):
    """Until the process p (a subprocess.Popen) ends, read every thread of
    its children every interval seconds. Returns {(comm, tid): ns on CPU,
    the last value seen} (a thread's counter only grows; a thread that
    ends keeps its last reading)."""
    last = {}
    while p.poll() is None:
        try:
            with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        for pid in kids:
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                continue
            for tid in tids:
                try:
                    with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                        comm = f.read().strip()
                    with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                        ns = int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
                last[(comm, tid)] = ns
        time.sleep(interval)  # polling a process we do not synchronise with
    return last


def agent_ns(last):
    """The agent's own threads' ns of CPU in a poll_children() result."""
    return sum(ns for (c, _), ns in last.items() if c in AGENT_THREADS)
