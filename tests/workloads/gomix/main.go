// SPDX-License-Identifier: BSD-2-Clause
//
// A cgo program with one hot Go function and one hot C function, each on its
// own goroutine (the C one locked to its thread), for tests/test_go.c and
// bench/go_vs_perf.py: under stackprobe, both must be sampled in the shares
// perf sees.
//
//	gomix [SECONDS]
//	gomix preempt
//
// Runs for SECONDS (default 2) of wall time, then prints on stdout
//
//	gospin N   cspin N   (iterations each did, so the work is not dead code)
//
// `preempt` needs Go's asynchronous preemption (SIGURG): on one P, a
// goroutine spins in a loop without calls (no cooperative preemption
// point) until main, which sleeps 50 ms first, tells it to stop; main
// only runs again if the spinner is preempted by signal. Prints
//
//	preempted by signal after N ms   (at a call: asynchronous preemption
//	                                  failed; "not preempted" after 20 s)
//
// The Go runtime installs its own handler on every real-time signal at
// start, with raw rt_sigaction system calls: the capture signal included.
package main

/*
#include <stdint.h>
#include <time.h>

// A hot C function: never inlined, so it has its own frame and symbol.
__attribute__((noinline)) uint64_t cspin(double seconds)
{
	struct timespec t0, t;
	volatile uint64_t x = 1, n = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		n++;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 >= seconds)
			return n + (x & 1);
	}
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

//go:noinline
func gospin(d time.Duration) uint64 {
	var x, n uint64 = 1, 0
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		n++
	}
	return n + (x & 1)
}

// Spins without calls until *stop is set; returns the iteration it saw
// it at. Every 2^33 iterations (seconds apart) it calls time.Since, a
// cooperative preemption point, and gives up after 20 s: a stop seen
// before iteration 2^33 means main ran while this loop made no call, so
// it was preempted by signal.
//
//go:noinline
func callfree(stop *int32, start time.Time) uint64 {
	var x uint64 = 1
	for i := uint64(0); ; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		if atomic.LoadInt32(stop) != 0 {
			return i | (x & 1)
		}
		if i != 0 && i&((1<<33)-1) == 0 && time.Since(start) > 20*time.Second {
			return 1 << 63
		}
	}
}

func preempt() {
	runtime.GOMAXPROCS(1)
	var stop int32
	done := make(chan uint64)
	start := time.Now()
	go func() { done <- callfree(&stop, start) }()
	time.Sleep(50 * time.Millisecond)
	atomic.StoreInt32(&stop, 1)
	i := <-done
	switch {
	case i == 1<<63:
		fmt.Println("not preempted")
		os.Exit(1)
	case i < 1<<33:
		fmt.Printf("preempted by signal after %d ms\n", time.Since(start).Milliseconds())
	default:
		fmt.Printf("preempted at a call after %d ms\n", time.Since(start).Milliseconds())
	}
}

func main() {
	secs := 2.0
	if len(os.Args) > 1 && os.Args[1] == "preempt" {
		preempt()
		return
	}
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil && v > 0 {
			secs = v
		} else {
			fmt.Fprintln(os.Stderr, "usage: gomix [SECONDS]")
			os.Exit(2)
		}
	}
	var wg sync.WaitGroup
	var g, c uint64
	wg.Add(2)
	go func() {
		defer wg.Done()
		g = gospin(time.Duration(secs * float64(time.Second)))
	}()
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		c = uint64(C.cspin(C.double(secs)))
	}()
	wg.Wait()
	fmt.Printf("gospin %d\ncspin %d\n", g, c)
}
