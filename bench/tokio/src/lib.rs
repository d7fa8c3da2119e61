//! The two workloads on Tokio's current_thread runtime, shaped as in the
//! article the lab's benchmark follows (seed 004): everything runs inside one
//! `block_on`, tasks are made with `tokio::spawn`, and every JoinHandle is
//! awaited.

use std::time::Instant;
use tokio::runtime::{Builder, Runtime};

/// A current_thread runtime with nothing enabled: no timer, no I/O driver
/// (the "rt" feature alone has neither). Built once per process, outside the
/// timed region, as in the article.
pub fn runtime() -> Runtime {
    Builder::new_current_thread().build().expect("tokio runtime")
}

/// `rounds` times: spawn `tasks` tasks that each yield twice, then await all
/// their handles. 3 polls per task.
pub fn yield_rounds(rt: &Runtime, rounds: usize, tasks: usize) {
    rt.block_on(async {
        for _ in 0..rounds {
            let mut hs = Vec::with_capacity(tasks);
            for _ in 0..tasks {
                hs.push(tokio::spawn(async {
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        }
    });
}

/// Spawn `n` tasks that return at once (their index), then await every
/// handle in spawn order and sum the results. 1 poll per task.
pub fn spawn_join(rt: &Runtime, n: u64) -> u64 {
    rt.block_on(async {
        let mut hs = Vec::with_capacity(n as usize);
        for i in 0..n {
            hs.push(tokio::spawn(async move { i }));
        }
        let mut sum = 0u64;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    })
}

pub struct Args {
    pub workload: String,
    pub warmup: usize,
    pub reps: usize,
    pub rounds: usize,
    pub tasks: usize,
    pub spawn_n: u64,
}

/// `<yield|spawn> [warmup] [reps]`, the same command line as the C
/// binaries (bench/harness.c). Sizes come from the environment so every
/// runtime reads the same ones: BENCH_ROUNDS, BENCH_TASKS, BENCH_SPAWN_N.
pub fn args() -> Args {
    let a: Vec<String> = std::env::args().collect();
    let env = |k: &str, d: usize| -> usize {
        std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
    };
    Args {
        workload: a.get(1).cloned().unwrap_or_else(|| "yield".into()),
        warmup: a.get(2).and_then(|v| v.parse().ok()).unwrap_or(1),
        reps: a.get(3).and_then(|v| v.parse().ok()).unwrap_or(1),
        rounds: env("BENCH_ROUNDS", 200),
        tasks: env("BENCH_TASKS", 500),
        spawn_n: env("BENCH_SPAWN_N", 10_000) as u64,
    }
}

/// Runs one iteration of the chosen workload; returns its wall time in ns.
pub fn once(rt: &Runtime, a: &Args) -> u128 {
    let t = Instant::now();
    match a.workload.as_str() {
        "yield" => yield_rounds(rt, a.rounds, a.tasks),
        "spawn" => {
            let sum = spawn_join(rt, a.spawn_n);
            let n = a.spawn_n;
            assert_eq!(sum, n * (n - 1) / 2, "spawn/join lost a result");
        }
        w => {
            eprintln!("unknown workload {w} (yield|spawn)");
            std::process::exit(2);
        }
    }
    t.elapsed().as_nanos()
}

/// Tasks one iteration creates (the denominator of allocations per task).
pub fn tasks_per_iteration(a: &Args) -> usize {
    match a.workload.as_str() {
        "yield" => a.rounds * a.tasks,
        _ => a.spawn_n as usize,
    }
}
