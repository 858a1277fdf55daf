#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""stackprobe record against perf and gperftools on one workload.

Runs build/benchload (tests/workloads/benchload.c: worker threads under
>= 40 frames of recursion, with malloc and mutex traffic, a fixed amount of
work) unprofiled and under each profiler at each frequency, round-robin:
every round runs every configuration once, starting one configuration
later than the previous round, so slow drifts of the machine's load hit all
configurations alike. Each number in the table is the median over rounds.

Per configuration:
  cpu x      user+sys CPU of the whole process tree (the profiler's own
             processes included: perf is a separate process, stackprobe's
             probe thread is inside the target) / the unprofiled run's, both
             taken from wait4() on the top process, which includes every
             descendant it waited for.
  samples    stacks in the profile.
  complete   share of stacks whose outermost frame is a thread or process
             start: one of START_FUNCS below. Same rule for every profiler.
  depth      median frames per stack (perf's "(inlined)" pseudo-frames not
             counted: machine frames only, as the other tools report).
  samples/CPU-s  samples / the unprofiled run's CPU seconds (same round):
             about F for a CPU-time sampler at F Hz. Linux checks
             thread CPU timers and ITIMER_PROF at the scheduler tick
             (CONFIG_HZ, 250 here), so signal-based CPU samplers fall
             short at 999 Hz unless they count timer overruns.
  fixed ms   CPU of the profiled one-request run (same threads, nothing to
             sample) minus the unprofiled one: start-up and exit cost.
  rec us/s   (profiled CPU - unprofiled CPU of the same round) / samples:
             the recording cost per sample, unwinding included when the
             profiler unwinds at record time (stackprobe, gperftools).
  rec net    the same after subtracting the fixed cost.
  post us/s  post-processing CPU / samples: `perf script` (which does the
             DWARF unwinding of --call-graph dwarf and all symbolization),
             `google-pprof --collapsed`, `stackprobe report --format folded`.
  total us/s rec + post.
  post s     post-processing CPU seconds (and wall seconds).

Exits non-zero, loudly, when a profiler is missing or a run fails or
produces no samples: a row is never silently dropped.

Usage: record_vs.py [--build DIR] [--quick] [--rounds N] [--work N]
                    [--threads N] [--depth N] [--freqs 99,999] [--keep DIR]
                    [--self-test]
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import schedstat

# A stack is complete when its outermost frame is one of these: the thread
# start in libc (clone3/clone, or start_thread when the walker stops at its
# return address, as frame-pointer walks do) or the process start
# (_start, __libc_start_main/__libc_start_call_main, ld.so's _dl_start_user).
START_FUNCS = frozenset({
    "clone", "clone3", "start_thread", "__clone", "__clone3",
    "_start", "__libc_start_main", "__libc_start_call_main",
    "_dl_start_user", "_dl_start",
})

LIBPROFILER_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libprofiler.so.0",
    "/usr/lib/aarch64-linux-gnu/libprofiler.so.0",
    "/usr/lib/libprofiler.so.0",
    "/usr/local/lib/libprofiler.so.0",
)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- parsing

_PERF_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-f]+$")
_PPROF_ADDR = re.compile(r"<[0-9a-f]+>$")


def clean_name(name):
    """Function name without '+0x..' offsets or pprof's '<addr>' suffix."""
    name = _OFFSET.sub("", name.strip())
    return _PPROF_ADDR.sub("", name)


def parse_perf_script(text):
    """Stacks from `perf script` output: a list of (count, frames), frames
    innermost first. Samples are separated by blank lines; the first line
    of a sample is its header, the others its frames."""
    stacks = []
    for block in re.split(r"\n\s*\n", text):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        frames = []
        for l in lines[1:]:
            m = _PERF_FRAME.match(l)
            if m and m.group(2) == "inlined":
                # perf script adds inlined callees from debug info (same
                # pc as the real frame below): skip them, so that depth
                # counts machine frames as the other tools do.
                continue
            frames.append(clean_name(m.group(1)) if m else "[unparsed]")
        stacks.append((1, frames))
    return stacks


def parse_folded(text, skip_first):
    """Stacks from collapsed/folded lines 'f1;f2;...;fn COUNT' (outermost
    first). skip_first drops a leading thread field (stackprobe's folded
    output starts with 'name-tid'). Returns (count, frames innermost first)."""
    stacks = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        path, sep, count = line.rpartition(" ")
        if not sep or not count.isdigit():
            raise BenchError("folded line without a count: %r" % line[:120])
        frames = [clean_name(f) for f in path.split(";")]
        if skip_first:
            frames = frames[1:]
        stacks.append((int(count), frames[::-1]))
    return stacks


def summarize(stacks):
    """(samples, share complete, median depth) of a list of (count, frames)."""
    n = sum(c for c, _ in stacks)
    complete = sum(c for c, f in stacks if f and f[-1] in START_FUNCS)
    depths = []
    for c, f in stacks:
        depths.extend([len(f)] * min(c, 1000))
    return n, (complete / n if n else 0.0), (statistics.median(depths) if depths else 0)


def self_test():
    """Checks of the parsers and the completeness rule on fixed inputs in
    each tool's real format (taken from perf 6.1, google-pprof 2.10 and
    stackprobe on this machine). Run before every measurement: a parser
    that no longer matches its tool must stop the benchmark, not turn
    every stack incomplete."""
    perf = ("benchload 24787 10759.015923:    1001001 cpu-clock:ppp: \n"
            "\t            1474 lcg_work+0x24 (/w/build/benchload)\n"
            "\t            1693 descend_a+0x33 (/w/build/benchload)\n"
            "\t          129bd4 clone3+0x34 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
            "\n"
            "benchload 24787 10759.016923:    1001001 cpu-clock:ppp: \n"
            "\tffffffff8225fd19 pvm_irq_enable+0x19 ([kernel.kallsyms])\n"
            "\t           20ce7 malloc+0x55 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
            "\t               0 [unknown] ([unknown])\n"
            "\n"
            "benchload 24787 10759.017923:    1001001 cpu-clock:ppp: \n"
            "\t           153e0 update_active (inlined)\n"
            "\t           1bccb _dl_start (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n"
            "\n"
            "benchload 24785 10759.013937:    1001001 cpu-clock:ppp: \n"
            "\t           1ab78 _dl_start_user+0x0 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n")
    st = parse_perf_script(perf)
    assert [f for _, f in st] == [["lcg_work", "descend_a", "clone3"],
                                  ["pvm_irq_enable", "malloc", "[unknown]"],
                                  ["_dl_start"],
                                  ["_dl_start_user"]], st
    n, complete, depth = summarize(st)
    assert (n, round(complete, 3), depth) == (4, 0.75, 2), (n, complete, depth)

    pprof = ("clone3;start_thread;worker_main<00000000000017b0>;descend_a<0000000000001660> 3\n"
             "descend_b<00000000000015f0>;lcg_work<0000000000001450> 1\n")
    st = parse_folded(pprof, skip_first=False)
    assert st == [(3, ["descend_a", "worker_main", "start_thread", "clone3"]),
                  (1, ["lcg_work", "descend_b"])], st
    assert summarize(st)[:2] == (4, 0.75)

    sp = "benchload-25243;clone3;start_thread;worker_main 2\nbenchload-1;_start;main 5\nbenchload-2;leaf 1\n"
    st = parse_folded(sp, skip_first=True)
    assert st[1] == (5, ["main", "_start"]), st
    assert summarize(st)[:2] == (8, 0.875)
    st = parse_perf_script_threads(
        "stackprobe  5047/5051      500250 \n"
        "\t  20b30 sprobe_unwinder__unwind (/w/build/libstackprobe.so)\n"
        "\t  20b30 probe_main (/w/build/libstackprobe.so)\n"
        "\n"
        "benchload 5047/5497 250125 \n"
        "\t  8ea0 capture_handler (/w/build/libstackprobe.so)\n"
        "\t  1474 lcg_work+0x24 (/w/build/benchload)\n")
    assert [x[:4] for x in st] == [("stackprobe", 5047, 5051, 500250),
                                   ("benchload", 5047, 5497, 250125)], st
    assert classify(*st[0][:3], st[0][4], st[0][5], 5047, "benchload") == "probe: unwinding"
    assert classify(*st[1][:3], st[1][4], st[1][5], 5047, "benchload").startswith("capture window")
    assert classify("stackprobe", 5041, 5041, [], [], 5047, "benchload").startswith("stackprobe record CLI")
    try:
        parse_folded("a;b;c\n", skip_first=False)
    except BenchError:
        pass
    else:
        raise AssertionError("a folded line without a count was accepted")


# ------------------------------------------------------------- processes

def run(argv, env=None, stdout=None, stderr=None):
    """Run argv to completion. Returns (wall s, user+sys CPU s of it and every
    descendant it waited for, exit status)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode


def need(path, what):
    if not path or not os.path.exists(path):
        raise BenchError("%s not found%s; this benchmark never skips a profiler"
                         % (what, " at " + path if path else " in PATH"))
    return path


# --------------------------------------------------------- configurations

class Config:
    def __init__(self, name, freq, kind):
        self.name, self.freq, self.kind = name, freq, kind
        self.label = name if kind == "none" else "%s @%d" % (name, freq)
        self.rounds = []  # dicts per round


def build_configs(freqs):
    cfgs = [Config("unprofiled", 0, "none")]
    for f in freqs:
        cfgs += [Config("perf -g (fp)", f, "perf-fp"),
                 Config("perf dwarf", f, "perf-dwarf"),
                 Config("gperftools", f, "gperf"),
                 Config("stackprobe cpu", f, "sp-cpu"),
                 Config("stackprobe wall", f, "sp-wall")]
    return cfgs


class Bench:
    def __init__(self, args):
        self.a = args
        b = os.path.abspath(args.build)
        self.load = need(os.path.join(b, "benchload"), "workload (make build/benchload)")
        self.sp = need(os.path.join(b, "stackprobe"), "stackprobe CLI (make all)")
        need(os.path.join(b, "libstackprobe.so"), "stackprobe agent (make all)")
        self.perf = need(shutil.which("perf"), "perf (Debian package linux-perf: make deps)")
        self.pprof = need(shutil.which("google-pprof") or shutil.which("pprof"),
                          "google-pprof (Debian package google-perftools: make deps)")
        self.libprofiler = need(next((p for p in LIBPROFILER_CANDIDATES if os.path.exists(p)), None),
                                "libprofiler.so.0 (Debian package libgoogle-perftools4: make deps)")
        self.workload = [self.load, str(args.threads), str(args.work), str(args.depth)]
        # The same threads doing one request each: what a profiler costs
        # before and after the samples (start-up, symbol tables, exit).
        self.empty = [self.load, str(args.threads), "1", str(args.depth)]
        self.dir = args.keep or tempfile.mkdtemp(prefix="stackprobe-bench-record-")
        os.makedirs(self.dir, exist_ok=True)

    def path(self, cfg, rnd, ext):
        return os.path.join(self.dir, "%s-%d-r%d.%s" % (cfg.kind, cfg.freq, rnd, ext))

    def record(self, cfg, rnd, empty=False):
        """Record (or just run) once; returns (wall, cpu, data file). empty:
        the one-request workload, to measure the fixed cost."""
        env = dict(os.environ)
        out = self.path(cfg, rnd, "empty.data" if empty else "data")
        workload = self.empty if empty else self.workload
        if cfg.kind == "none":
            argv = workload
        elif cfg.kind == "perf-fp":
            argv = [self.perf, "record", "-F", str(cfg.freq), "-g", "-o", out, "--"] + workload
        elif cfg.kind == "perf-dwarf":
            argv = [self.perf, "record", "-F", str(cfg.freq), "--call-graph", "dwarf",
                    "-o", out, "--"] + workload
        elif cfg.kind == "gperf":
            # ITIMER_PROF (the default): per-thread timers would need every
            # thread to call ProfilerRegisterThread(), which an unmodified
            # program under LD_PRELOAD does not.
            env.update(LD_PRELOAD=self.libprofiler, CPUPROFILE=out,
                       CPUPROFILE_FREQUENCY=str(cfg.freq))
            argv = workload
        elif cfg.kind in ("sp-cpu", "sp-wall"):
            # --no-bpf: the eBPF companion (kernel timestamps of each capture
            # window) is an extra perf and gperftools do not have; its cost
            # lands machine-wide (a sys_enter program on every system call).
            argv = [self.sp, "record", "-F", str(cfg.freq), "--mode",
                    "cpu" if cfg.kind == "sp-cpu" else "wall", "--no-bpf",
                    "-q", "--no-report", "-o", out, "--"] + workload
        else:
            raise AssertionError(cfg.kind)
        if os.path.exists(out):
            os.unlink(out)
        errf = self.path(cfg, rnd, "empty.err" if empty else "err")
        with open(self.path(cfg, rnd, "out"), "w") as so, open(errf, "w") as se:
            wall, cpu, rc = run(argv, env=env, stdout=so, stderr=se)
        if rc != 0:
            raise BenchError("%s round %d: %s exited %d (see %s)"
                             % (cfg.label, rnd, " ".join(argv[:3]), rc, errf))
        if cfg.kind != "none" and (not os.path.exists(out) or os.path.getsize(out) == 0):
            raise BenchError("%s round %d: no profile written to %s" % (cfg.label, rnd, out))
        return wall, cpu, out

    def postprocess(self, cfg, rnd, data):
        """Turn the profile into stacks with the profiler's own tool; returns
        (wall, cpu, stacks)."""
        if cfg.kind in ("perf-fp", "perf-dwarf"):
            argv = [self.perf, "script", "-i", data, "-F", "comm,tid,time,event,ip,sym,dso"]
            parse = parse_perf_script
        elif cfg.kind == "gperf":
            argv = [self.pprof, "--collapsed", self.load, data]
            parse = lambda t: parse_folded(t, skip_first=False)
        else:
            argv = [self.sp, "report", "-i", data, "--format", "folded"]
            parse = lambda t: parse_folded(t, skip_first=True)
        txt = self.path(cfg, rnd, "stacks")
        with open(txt, "w") as so, open(self.path(cfg, rnd, "post.err"), "w") as se:
            wall, cpu, rc = run(argv, stdout=so, stderr=se)
        if rc != 0:
            raise BenchError("%s round %d: post-processing %s exited %d (see %s)"
                             % (cfg.label, rnd, argv[0], rc, self.path(cfg, rnd, "post.err")))
        with open(txt, errors="replace") as f:
            stacks = parse(f.read())
        if not self.a.keep:
            for ext in ("data", "stacks"):
                try:
                    os.unlink(self.path(cfg, rnd, ext))
                except FileNotFoundError:
                    pass
        return wall, cpu, stacks

    def one(self, cfg, rnd):
        wall, cpu, data = self.record(cfg, rnd)
        r = {"wall": wall, "cpu": cpu}
        if cfg.kind != "none":
            pwall, pcpu, stacks = self.postprocess(cfg, rnd, data)
            n, complete, depth = summarize(stacks)
            if n == 0:
                raise BenchError("%s round %d: the profile holds no samples" % (cfg.label, rnd))
            r.update(post_wall=pwall, post_cpu=pcpu, samples=n, complete=complete, depth=depth)
        _, r["fixed"], fixed_out = self.record(cfg, rnd, empty=True)
        if cfg.kind != "none" and not self.a.keep:
            os.unlink(fixed_out)
        cfg.rounds.append(r)
        return r


# ------------------------------------------------------------- breakdown

# Where stackprobe's own CPU goes: `stackprobe record` runs under
# `perf record --call-graph dwarf` and every perf sample is put in one
# bucket, from its thread and the functions on its stack (innermost first,
# first match wins). The probe thread's functions (round_once, push_symbols)
# are static and may be inlined: the buckets key on the library's exported
# entry points they call.
PROBE_BUCKETS = (
    ("capture (probe side: thread list, signals, wait, copy-out)",
     ("sprobe_capturer__capture", "sprobe_capturer__cpu_collect", "sprobe_backend__capture")),
    ("unwinding", ("sprobe_unwinder__unwind",)),
    ("module list refresh", ("sprobe_modules__refresh",)),
    ("queueing records for the writer", ("sprobe_stream__push", "sprobe_stream__push_thread_sample")),
    ("symbolization (once per new pc; first use loads a symbol table)",
     ("sprobe_modules__symbolize", "push_symbols", "load_symtab", "cmp_sym")),
    ("live table update", ("publish", "sprobe_table__update", "sprobe_table__insert")),
    ("thread bookkeeping (sweep, keep-alive)",
     ("threads_sweep", "threads_keep_alive", "exclude_own_threads", "thread_get")),
    ("sleep and wake-up between rounds (futex, scheduler)", ("pthread_cond_timedwait",)),
)
# When perf's DWARF unwinder could not walk the probe's user stack past a
# libc leaf (it happens: libc's syscall() and qsort), the kernel half of the
# chain still names the system call. Used only when no frame above matched.
PROBE_KERNEL_BUCKETS = (
    ("capture (probe side: thread list, signals, wait, copy-out)",
     ("__x64_sys_rt_tgsigqueueinfo", "__x64_sys_tgkill", "__x64_sys_getdents64",
      "proc_task_readdir")),
    ("capture: /proc/self/maps re-read (stack ranges)", ("proc_get_vma", "show_map")),
    ("sleep and wake-up between rounds (futex, scheduler)",
     ("__futex_wait", "futex_wait", "schedule")),
)
# Last resort for those cut chains: the libc function the probe was in.
PROBE_LIBC_BUCKETS = (
    ("sleep and wake-up between rounds (futex, scheduler)",
     ("__futex_abstimed_wait_common64", "__futex_abstimed_wait_common", "__condvar_dec_grefs",
      "__pthread_cond_wait_common")),
    ("system calls through syscall(3), unwound no further (tgkill, getdents64, sigqueue)",
     ("syscall",)),
    ("per-round checks: getpid, lseek, sigaction, clock_gettime",
     ("__GI_getpid", "getpid", "__lseek64", "lseek64", "__GI___libc_sigaction",
      "__libc_sigaction", "__GI___clock_gettime", "clock_gettime", "__vdso_clock_gettime")),
    ("lock hand-off (mutex lock/wake)",
     ("__GI___lll_lock_wake", "__lll_lock_wake", "___pthread_mutex_lock", "__lll_lock_wait",
      "__pthread_mutex_unlock_usercnt")),
)
# Kernel and libc frames of delivering a signal to a thread and returning
# from its handler: with capture_handler itself, the target's capture window.
SIGNAL_FRAMES = frozenset({
    "capture_handler", "arch_do_signal_or_restart", "get_signal", "handle_signal",
    "x64_setup_rt_frame", "setup_rt_frame", "__x64_sys_rt_sigreturn",
    "restore_sigcontext", "__restore_rt", "do_signal",
})


def classify(comm, pid, tid, frames, dsos, wpid, wcomm):
    """Bucket of one perf sample of a profiled `stackprobe record` run."""
    if pid != wpid:
        return "stackprobe record CLI process (fork, wait, exit)"
    if comm == "sprobe-writer":
        return "writing (writer thread: encode + write(2))"
    if comm == wcomm:
        if any(f in SIGNAL_FRAMES for f in frames):
            return "capture window in the target threads (signal delivery, handler, sigreturn)"
        if any("libstackprobe" in d for d in dsos):
            return "agent in the target threads (start-up, exit flush)"
        return "the workload itself"
    if tid == pid:
        return "the workload itself (exec, before its name changes)"
    for table in (PROBE_BUCKETS, PROBE_KERNEL_BUCKETS, PROBE_LIBC_BUCKETS):
        for f in frames:
            for bucket, keys in table:
                if f in keys:
                    return "probe: " + bucket
    return "probe: other (perf's unwind stopped in libc: qsort, memcpy, file I/O)"


def parse_perf_script_threads(text):
    """(comm, pid, tid, period, frames, dsos) per sample of `perf script -F
    comm,pid,tid,period,ip,sym,dso`."""
    out = []
    head = re.compile(r"^(.*?)\s+(\d+)/(\d+)\s+(\d+)\s*$")
    for block in re.split(r"\n\s*\n", text):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        m = head.match(lines[0])
        if not m:
            raise BenchError("perf script header not understood: %r" % lines[0][:120])
        frames, dsos = [], []
        for l in lines[1:]:
            fm = _PERF_FRAME.match(l)
            if fm:
                frames.append(clean_name(fm.group(1)))
                dsos.append(fm.group(2))
        out.append((m.group(1).strip(), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                    frames, dsos))
    return out


def breakdown(b, mode, freq):
    """Profile one `stackprobe record -F freq --mode mode` run with perf;
    print CPU per bucket and per stackprobe sample."""
    pdata = os.path.join(b.dir, "breakdown-%s-%d.perf" % (mode, freq))
    spdata = os.path.join(b.dir, "breakdown-%s-%d.data" % (mode, freq))
    argv = [b.perf, "record", "-q", "-F", "1999", "--call-graph", "dwarf,16384", "-o", pdata,
            "--", b.sp, "record", "-F", str(freq), "--mode", mode, "--no-bpf", "-q",
            "--no-report", "-o", spdata, "--"] + b.workload
    with open(os.devnull, "w") as dn, open(pdata + ".err", "w") as se:
        wall, cpu, rc = run(argv, stdout=dn, stderr=se)
        if rc != 0:
            raise BenchError("breakdown: %s exited %d (see %s.err)" % (argv[0], rc, pdata))
        p = subprocess.run([b.perf, "script", "-i", pdata, "-F", "comm,pid,tid,period,ip,sym,dso"],
                           stdout=subprocess.PIPE, stderr=se, text=True, errors="replace")
        if p.returncode != 0:
            raise BenchError("breakdown: perf script exited %d" % p.returncode)
        f = subprocess.run([b.sp, "report", "-i", spdata, "--format", "folded"],
                           stdout=subprocess.PIPE, stderr=se, text=True, errors="replace")
        if f.returncode != 0:
            raise BenchError("breakdown: stackprobe report exited %d" % f.returncode)
    nsp = sum(c for c, _ in parse_folded(f.stdout, skip_first=True))
    samples = parse_perf_script_threads(p.stdout)
    wcomm = os.path.basename(b.load)[:15]
    wpids = {pid for comm, pid, *_ in samples if comm == wcomm}
    if len(wpids) != 1 or nsp == 0:
        raise BenchError("breakdown: workload process not found once in perf's samples "
                         "(%s) or no stackprobe samples (%d)" % (sorted(wpids), nsp))
    wpid = wpids.pop()
    buckets = {}
    for comm, pid, tid, period, frames, dsos in samples:
        k = classify(comm, pid, tid, frames, dsos, wpid, wcomm)
        n, ns = buckets.get(k, (0, 0))
        buckets[k] = (n + 1, ns + period)
    total_ns = sum(ns for _, ns in buckets.values())
    own = {k: v for k, v in buckets.items() if not k.startswith("the workload")}
    own_ns = sum(ns for _, ns in own.values())
    print("breakdown: stackprobe record -F %d --mode %s (%d stackprobe samples) under "
          "perf record -F 1999 --call-graph dwarf: %d perf samples, %.0f ms CPU in all, "
          "%.1f ms of it stackprobe's (%.1f us per stackprobe sample)"
          % (freq, mode, nsp, len(samples), total_ns / 1e6, own_ns / 1e6, own_ns / 1e3 / nsp))
    print("| where (%s mode, %d Hz) | perf samples | CPU ms | share of stackprobe's CPU | us per stackprobe sample |" % (mode, freq))
    print("| --- | ---: | ---: | ---: | ---: |")
    for k, (n, ns) in sorted(buckets.items(), key=lambda kv: -kv[1][1]):
        share = "%.1f %%" % (100.0 * ns / own_ns) if k in own and own_ns else "-"
        per = "%.1f" % (ns / 1e3 / nsp) if k in own else "-"
        print("| %s | %d | %.1f | %s | %s |" % (k, n, ns / 1e6, share, per))
    lost = ""
    try:
        with open(pdata + ".err") as e:
            lost = " ".join(l.strip() for l in e if l.startswith("Processed"))
    except OSError:
        pass
    if lost:
        print("breakdown: perf says: %s (losses spread over all threads alike)" % lost)
    print()


def own_threads(b, mode, freq):
    """The probe and writer threads' own CPU, read from
    /proc/PID/task/TID/schedstat (ns on CPU) while `stackprobe record` runs,
    without perf in the way. Returns a table row."""
    spdata = os.path.join(b.dir, "ownthreads-%s-%d.data" % (mode, freq))
    argv = [b.sp, "record", "-F", str(freq), "--mode", mode, "--no-bpf", "-q",
            "--no-report", "-o", spdata, "--"] + b.workload
    wcomm = os.path.basename(b.load)[:15]
    with open(os.devnull, "w") as dn:
        p = subprocess.Popen(argv, stdout=dn, stderr=dn)
        # the workload is the record process's child
        last = schedstat.poll_children(p, 0.05)
        if p.returncode != 0:
            raise BenchError("own-threads: stackprobe record exited %d" % p.returncode)
    rep = subprocess.run([b.sp, "report", "-i", spdata, "--format", "text"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"samples:\s+(\d+) in (\d+) captures", rep.stdout)
    if rep.returncode != 0 or not m:
        raise BenchError("own-threads: no sample count in stackprobe's report")
    nsamp, ncap = int(m.group(1)), int(m.group(2))
    probe = sum(ns for (c, _), ns in last.items() if c == "stackprobe")
    writer = sum(ns for (c, _), ns in last.items() if c == "sprobe-writer")
    work = sum(ns for (c, _), ns in last.items() if c == wcomm)
    if not probe or not work or not nsamp:
        raise BenchError("own-threads: probe thread or workload threads not seen")
    return (mode, freq, ncap, nsamp, probe / 1e6, writer / 1e6, probe / 1e3 / ncap,
            (probe + writer) / 1e3 / nsamp, 100.0 * (probe + writer) / work)


OWN_HEADER = ("| mode | Hz | captures | samples | probe CPU ms | writer CPU ms "
              "| probe us per capture | probe+writer us per sample | share of the workload's CPU |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def own_row(r, prefix=""):
    return ("| %s%s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.2f %% |" % ((prefix,) + tuple(r)))


def overhead(b, specs, rounds):
    """own_threads() for every spec, `rounds` times, the order rotated each
    round; prints each run, then the medians (each column on its own)."""
    runs = {s: [] for s in specs}
    for rnd in range(rounds):
        order = specs[rnd % len(specs):] + specs[:rnd % len(specs)]
        for mode, hz in order:
            r = own_threads(b, mode, hz)
            runs[(mode, hz)].append(r)
            print("  round %d  %s @%d  share %.2f %%  probe %.1f us/capture"
                  % (rnd + 1, mode, hz, r[8], r[6]), flush=True)
    print(OWN_HEADER)
    for mode, hz in specs:
        rs = runs[(mode, hz)]
        cols = [med([r[k] for r in rs]) for k in range(2, 9)]
        print(own_row([mode, hz] + cols))
        print("| (min-max share) | | | | | | | | %.2f-%.2f %% |"
              % (min(r[8] for r in rs), max(r[8] for r in rs)))


def machine():
    """One line naming the machine: CPU model, CPU count, kernel."""
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


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def table(cfgs):
    base = cfgs[0]
    rows = []
    hdr = ("| profiler | Hz | CPU s | cpu x (min-max) | samples | complete | depth "
           "| samples/CPU-s | fixed ms | rec us/sample | rec net us/sample | post us/sample | total us/sample | post CPU s (wall) |")
    rows.append(hdr)
    rows.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    bcpu = [r["cpu"] for r in base.rounds]
    rows.append("| unprofiled | - | %.2f | 1.000 (%.3f-%.3f) | - | - | - | - | %.0f (abs) | - | - | - | - | - |"
                % (med(bcpu), min(bcpu) / med(bcpu), max(bcpu) / med(bcpu),
                   1e3 * med([r["fixed"] for r in base.rounds])))
    for c in cfgs[1:]:
        ratios, recs, nets, posts, fixeds = [], [], [], [], []
        for i, r in enumerate(c.rounds):
            b = base.rounds[i]["cpu"]
            fixed = r["fixed"] - base.rounds[i]["fixed"]
            ratios.append(r["cpu"] / b)
            fixeds.append(fixed)
            recs.append((r["cpu"] - b) / r["samples"] * 1e6)
            nets.append((r["cpu"] - b - fixed) / r["samples"] * 1e6)
            posts.append(r["post_cpu"] / r["samples"] * 1e6)
        totals = [x + y for x, y in zip(recs, posts)]
        # samples per second of the workload's own (unprofiled) CPU time:
        # a CPU-time sampler at F Hz should reach about F.
        rates = [r["samples"] / base.rounds[i]["cpu"] for i, r in enumerate(c.rounds)]
        rows.append("| %s | %d | %.2f | %.3f (%.3f-%.3f) | %d | %.1f %% | %d | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f (%.2f) |"
                    % (c.name, c.freq, med([r["cpu"] for r in c.rounds]), med(ratios),
                       min(ratios), max(ratios), med([r["samples"] for r in c.rounds]),
                       100 * med([r["complete"] for r in c.rounds]),
                       med([r["depth"] for r in c.rounds]), med(rates), 1e3 * med(fixeds),
                       med(recs), med(nets), med(posts), med(totals),
                       med([r["post_cpu"] for r in c.rounds]),
                       med([r["post_wall"] for r in c.rounds])))
    return "\n".join(rows)


def slope_table(cfgs, freqs):
    """Per-sample cost from the difference between the lowest and the highest
    frequency of each profiler: fixed costs (start-up, symbol loading, the
    build-id pass at perf's exit) cancel, what is left is the marginal cost
    of one more sample."""
    if len(freqs) < 2:
        return ""
    lo, hi = min(freqs), max(freqs)
    rows = ["| profiler | samples %d -> %d Hz | marginal rec us/sample | marginal post us/sample | marginal total |" % (lo, hi),
            "| --- | ---: | ---: | ---: | ---: |"]
    by = {(c.name, c.freq): c for c in cfgs}
    for c in cfgs[1:]:
        if c.freq != lo:
            continue
        h = by[(c.name, hi)]
        ns_lo = med([r["samples"] for r in c.rounds])
        ns_hi = med([r["samples"] for r in h.rounds])
        dn = ns_hi - ns_lo
        if dn < 0.2 * max(ns_lo, 1):
            rows.append("| %s | %d -> %d | n/a (too few extra samples) | | |" % (c.name, ns_lo, ns_hi))
            continue
        drec = (med([r["cpu"] for r in h.rounds]) - med([r["cpu"] for r in c.rounds])) / dn * 1e6
        dpost = (med([r["post_cpu"] for r in h.rounds]) - med([r["post_cpu"] for r in c.rounds])) / dn * 1e6
        rows.append("| %s | %d -> %d | %.1f | %.1f | %.1f |" % (c.name, ns_lo, ns_hi, drec, dpost, drec + dpost))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="small run: 3 rounds, 1/8 of the work")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--work", type=int, help="requests per worker thread")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--freqs", default="99,999")
    ap.add_argument("--keep", help="keep every profile and stack file in this directory")
    ap.add_argument("--self-test", action="store_true", help="only check the parsers, then exit")
    ap.add_argument("--overhead", metavar="MODE@HZ,...",
                    help="instead of the comparison: the probe and writer threads' CPU as a "
                         "share of the workload's (schedstat, no perf), --rounds runs each, "
                         "medians")
    ap.add_argument("--breakdown", metavar="MODE@HZ,...",
                    help="instead of the comparison: where stackprobe's CPU goes, from perf "
                         "profiles of `stackprobe record` (e.g. wall@999,cpu@999)")
    a = ap.parse_args()
    if a.rounds is None:
        a.rounds = 3 if a.quick else 7
    if a.work is None:
        a.work = 40000 if a.quick else 320000
    try:
        freqs = [int(x) for x in a.freqs.split(",")]
    except ValueError:
        ap.error("--freqs: comma-separated integers")
    if a.rounds < 1 or a.work < 1 or any(f < 1 or f > 10000 for f in freqs):
        ap.error("bad --rounds, --work or --freqs")

    try:
        self_test()
    except AssertionError as e:
        print("bench-record: FAILED: parser self-test: %r" % (e,), file=sys.stderr)
        return 1
    if a.self_test:
        print("bench-record: parser self-test passed")
        return 0
    try:
        b = Bench(a)
    except BenchError as e:
        print("bench-record: FAILED: %s" % e, file=sys.stderr)
        return 1
    if a.overhead:
        print("bench-record: machine: %s, load average %.2f %.2f %.2f, workload: %s"
              % (machine(), *os.getloadavg(), " ".join(b.workload)))
        specs = []
        for spec in a.overhead.split(","):
            mode, _, hz = spec.partition("@")
            if mode not in ("wall", "cpu") or not hz.isdigit():
                ap.error("--overhead: MODE@HZ with MODE wall or cpu")
            specs.append((mode, int(hz)))
        try:
            overhead(b, specs, a.rounds)
        except BenchError as e:
            print("bench-record: FAILED: %s" % e, file=sys.stderr)
            return 1
        print("bench-record: load average at the end %.2f %.2f %.2f" % os.getloadavg())
        return 0
    if a.breakdown:
        print("bench-record: machine: %s, load average %.2f %.2f %.2f, workload: %s"
              % (machine(), *os.getloadavg(), " ".join(b.workload)))
        try:
            specs = []
            for spec in a.breakdown.split(","):
                mode, _, hz = spec.partition("@")
                if mode not in ("wall", "cpu") or not hz.isdigit():
                    ap.error("--breakdown: MODE@HZ with MODE wall or cpu")
                specs.append((mode, int(hz)))
            for mode, hz in specs:
                breakdown(b, mode, hz)
            print("The probe and writer threads' CPU without perf (schedstat of each thread, "
                  "last value before exit):")
            print(OWN_HEADER)
            for mode, hz in specs:
                print(own_row(own_threads(b, mode, hz)), flush=True)
        except BenchError as e:
            print("bench-record: FAILED: %s" % e, file=sys.stderr)
            return 1
        finally:
            if not a.keep:
                shutil.rmtree(b.dir, ignore_errors=True)
        return 0
    cfgs = build_configs(freqs)
    load0 = os.getloadavg()
    t0 = time.monotonic()
    print("bench-record: %s, %d rounds x %d configurations, workload: %s"
          % ("quick" if a.quick else "full", a.rounds, len(cfgs), " ".join(b.workload)))
    print("bench-record: machine: %s" % machine())
    print("bench-record: started %s UTC, load average %.2f %.2f %.2f, files in %s"
          % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
             *load0, b.dir))
    try:
        for rnd in range(a.rounds):
            order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
            for c in order:
                r = b.one(c, rnd)
                extra = "" if c.kind == "none" else \
                    "  %6d samples %5.1f %% complete  post %.2f s" % (r["samples"], 100 * r["complete"], r["post_cpu"])
                print("  round %d  %-22s cpu %6.2f s  wall %5.2f s%s"
                      % (rnd + 1, c.label, r["cpu"], r["wall"], extra), flush=True)
            # every configuration of this round ran: pair each with the baseline
            # of the same round
            base = cfgs[0].rounds
            for c in cfgs[1:]:
                assert len(c.rounds) == len(base)
    except BenchError as e:
        print("bench-record: FAILED: %s" % e, file=sys.stderr)
        return 1
    load1 = os.getloadavg()
    print()
    print("bench-record: done in %.0f s, load average at the end %.2f %.2f %.2f"
          % (time.monotonic() - t0, *load1))
    print("complete = outermost frame in {%s}" % ", ".join(sorted(START_FUNCS)))
    print(table(cfgs))
    print()
    print(slope_table(cfgs, freqs))
    if not a.keep:
        shutil.rmtree(b.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
