#!/bin/sh
# The idle agent's cost (docs/PERFORMANCE.md "On demand"): what a service
# pays between `stackprobe record -p` recordings, and what one recording
# costs it to start and stop.
#
#   bench/ondemand_idle.sh [IDLE_SECONDS] [RUNS]     (defaults 30, 5)
#
# 1. A sleeping process (sleep IDLE_SECONDS) with the agent idle, and with
#    STACKPROBE_AGENT=1 (the table sampler at 99 Hz) for contrast: its CPU
#    ticks (utime+stime, /proc/PID/stat), the control thread's voluntary
#    context switches (each wake-up counts one) and threads.
# 2. The CPU time of a fixed job (build/benchload 2 60000 40) with no agent
#    and with the agent idle: median of RUNS each.
# 3. `record -p PID -d 1` against the idle sleeper: wall time beyond the
#    second asked for (connect, sampler start, stop, merge).
# 4. Continuous mode (STACKPROBE_PPROF_DIR, STACKPROBE_PERIOD=1) on
#    build/odservice (3 threads) at 99 Hz for 10 periods: the CPU ticks of
#    the agent's sprobe-period thread (loading each part, writing each
#    profile) and the profiles' sizes.
# Run from the top of the tree after `make all`; needs no privileges.
set -eu
IDLE=${1:-30}
RUNS=${2:-5}
LIB=$(realpath build/libstackprobe.so)

stat_of() { # pid -> "ticks threads"
	awk '{ print $14 + $15, $20 }' "/proc/$1/stat"
}
ctl_switches() { # pid -> voluntary switches of sprobe-ctl
	for t in /proc/$1/task/*; do
		if [ "$(cat "$t/comm")" = sprobe-ctl ]; then
			awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status"
			return
		fi
	done
	echo -
}

for mode in idle 1; do
	env LD_PRELOAD=$LIB STACKPROBE_AGENT=$mode STACKPROBE_CONTROL=1 sleep $((IDLE + 30)) &
	pid=$!
	sleep 1
	s0=$(ctl_switches $pid)
	t0=$(stat_of $pid | cut -d' ' -f1)
	sleep "$IDLE"
	set -- $(stat_of $pid)
	s1=$(ctl_switches $pid)
	echo "STACKPROBE_AGENT=$mode: ${IDLE}s asleep: $(( $1 - t0 )) CPU ticks ($(getconf CLK_TCK)/s)," \
		"$2 threads, control thread woke $(( s1 - s0 )) times"
	if [ "$mode" = idle ]; then
		start=$(date +%s.%N)
		build/stackprobe record -p $pid -d 1 -o /tmp/ondemand_idle.$$.data --quiet
		end=$(date +%s.%N)
		echo "record -p $pid -d 1: $(echo "$end - $start - 1" | bc -l | cut -c1-5) s beyond the second"
		rm -f /tmp/ondemand_idle.$$.data
	fi
	kill $pid
	wait $pid 2>/dev/null || true
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
cpu_of() { # command... -> user+sys seconds
	/usr/bin/time -o /tmp/ondemand_idle.$$.t -f "%U %S" "$@" >/dev/null 2>&1
	awk '{ print $1 + $2 }' /tmp/ondemand_idle.$$.t
}
for i in $(seq "$RUNS"); do
	cpu_of build/benchload 2 60000 40 >> /tmp/ondemand_idle.$$.none
	cpu_of env LD_PRELOAD=$LIB STACKPROBE_AGENT=idle build/benchload 2 60000 40 >> /tmp/ondemand_idle.$$.idle
done
echo "benchload 2 60000 40, CPU s (median of $RUNS): no agent $(median < /tmp/ondemand_idle.$$.none)," \
	"agent idle $(median < /tmp/ondemand_idle.$$.idle)"
rm -f /tmp/ondemand_idle.$$.none /tmp/ondemand_idle.$$.idle /tmp/ondemand_idle.$$.t

fifo=/tmp/ondemand_idle.$$.fifo
pdir=/tmp/ondemand_idle.$$.pprof
mkfifo $fifo
env LD_PRELOAD=$LIB STACKPROBE_PPROF_DIR=$pdir STACKPROBE_PERIOD=1 STACKPROBE_PPROF_KEEP=100 \
	build/odservice < $fifo > /dev/null &
pid=$!
exec 9> $fifo
sleep 10.5
for t in /proc/$pid/task/*; do
	if [ "$(cat "$t/comm")" = sprobe-period ]; then
		ticks=$(awk '{ print $14 + $15 }' "$t/stat")
	fi
done
exec 9>&-
wait $pid
n=$(ls $pdir/*.pb.gz | wc -l)
echo "continuous, 1 s periods, odservice at 99 Hz: $n profiles, sprobe-period used $ticks CPU ticks" \
	"($(getconf CLK_TCK)/s) in 10 s, profiles $(du -cb $pdir/*.pb.gz | tail -1 | cut -f1) bytes in all"
rm -rf $fifo $pdir
