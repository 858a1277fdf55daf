// SPDX-License-Identifier: BSD-2-Clause
//
// A cgo program with one hot Go function and one hot C function, each on its
// own goroutine (the C one locked to its thread), for tests/test_go.c and
// bench/go_vs_perf.sh: under stackprobe, both must be sampled in the shares
// perf sees.
//
//	gomix [SECONDS] [GO_WEIGHT C_WEIGHT]
//
// Runs for SECONDS (default 2) of wall time, then prints on stdout
//
//	gospin N   cspin N   (iterations each did, so the work is not dead code)
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

func main() {
	secs := 2.0
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
