// SPDX-License-Identifier: BSD-2-Clause
//
// A Java program that leans on the JVM's own signal handling, for
// tests/test_jvm.c: under stackprobe it must end normally with its output.
//
//     java JvmMix [SECONDS]
//
// For SECONDS (default 1.5) of wall time, two threads spin and allocate
// (so the JIT compiles and the GC runs); one of them also reads a field
// through a null reference in a hot loop (once compiled, an implicit null
// check: the JVM's SIGSEGV handler turns the fault into a
// NullPointerException) and recurses until StackOverflowError (the guard
// pages: SIGSEGV again). Then prints
//
//     spin N       (iterations of both threads)
//     npe N        (NullPointerExceptions caught)
//     soe N        (StackOverflowErrors caught)
//     done
public class JvmMix {
    static final class Box {
        long v;
    }

    static volatile Box maybe; // null most of the time
    static int depth;

    static long read(Box b) {
        return b.v; // implicit null check once compiled
    }

    static void recurse() {
        depth++;
        recurse();
    }

    static long spin(long end, boolean faults, long[] counts) {
        long x = 1, n = 0;
        java.util.ArrayList<byte[]> keep = new java.util.ArrayList<>();
        while (System.nanoTime() < end) {
            for (int i = 0; i < 20000; i++)
                x = x * 6364136223846793005L + 1442695040888963407L;
            keep.add(new byte[8192]);
            if (keep.size() > 512)
                keep.clear();
            if (faults) {
                for (int i = 0; i < 100; i++) {
                    try {
                        x += read(maybe);
                    } catch (NullPointerException e) {
                        counts[0]++;
                    }
                }
                if ((n & 255) == 0) {
                    try {
                        depth = 0;
                        recurse();
                    } catch (StackOverflowError e) {
                        counts[1]++;
                    }
                }
            }
            n++;
        }
        return n + (x & 1);
    }

    public static void main(String[] args) throws Exception {
        double secs = args.length > 0 ? Double.parseDouble(args[0]) : 1.5;
        long end = System.nanoTime() + (long) (secs * 1e9);
        long[] counts = new long[2];
        long[] other = new long[1];
        Thread t = new Thread(() -> other[0] = spin(end, false, new long[2]), "spinner");
        t.start();
        long n = spin(end, true, counts);
        t.join();
        System.out.println("spin " + (n + other[0]));
        System.out.println("npe " + counts[0]);
        System.out.println("soe " + counts[1]);
        System.out.println("done");
    }
}
