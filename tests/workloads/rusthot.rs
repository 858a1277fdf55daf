// SPDX-License-Identifier: BSD-2-Clause
// A Rust program for tests/test_demangle.c: two hot generic instances
// (spin::<u64> under a method of a struct with a lifetime, spin::<u32>
// under main), a closure and a trait object, so its symbols carry generic
// arguments, impl paths, closures and escapes in both manglings. Runs
// argv[1] iterations (default 1000000).
use std::collections::HashMap;

#[inline(never)]
fn spin<T: std::ops::Add<Output = T> + Copy>(x: T, n: u64) -> T {
    let mut a = x;
    for _ in 0..n {
        a = std::hint::black_box(a + x);
    }
    a
}

struct Worker<'a> {
    name: &'a str,
}

impl<'a> Worker<'a> {
    #[inline(never)]
    fn run(&self, n: u64) -> u64 {
        let f = |k: u64| spin(k, n);
        let mut m = HashMap::new();
        m.insert(self.name, f(3));
        m[self.name]
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1000000);
    let w = Worker { name: "w" };
    let b: Box<dyn Fn(u64) -> u64> = Box::new(move |k| w.run(k));
    println!("{}", b(n) + spin(1u32, n) as u64);
}
