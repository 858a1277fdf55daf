// SPDX-License-Identifier: BSD-2-Clause
//
// The external tier's Go workload (tests/test_external.c): a pure Go
// program (CGO_ENABLED=0: a static binary the agent cannot enter, whose
// unwind information is .debug_frame, not .eh_frame; Go on amd64 keeps
// frame pointers).
//
//	gosplit ROUNDS
//
// Two goroutines each run ROUNDS rounds of callerA -> hotA (4 units of
// work) then callerB -> hotB (12 units): the same loop body, so hotA has
// 1/4 of the CPU and hotB 3/4. Prints "units a=N b=M".
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

var sink uint64

//go:noinline
func hotA(n int) uint64 {
	x := sink | 1
	for i := 0; i < n*20000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

//go:noinline
func hotB(n int) uint64 {
	x := sink | 3
	for i := 0; i < n*20000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

//go:noinline
func callerA(n int) uint64 { return hotA(n) + 1 }

//go:noinline
func callerB(n int) uint64 { return hotB(n) + 2 }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gosplit ROUNDS")
		os.Exit(2)
	}
	rounds, err := strconv.Atoi(os.Args[1])
	if err != nil {
		os.Exit(2)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s uint64
			for r := 0; r < rounds; r++ {
				s += callerA(4)
				s += callerB(12)
			}
			mu.Lock()
			sink += s
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("units a=%d b=%d\n", rounds*4*2, rounds*12*2)
}
