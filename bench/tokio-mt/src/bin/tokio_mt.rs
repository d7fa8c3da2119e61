//! `tokio_mt <row> <warmup>`: warm-up iterations, then one timed; prints `ns <wall>`.
use std::time::Instant;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let row = a.get(1).expect("row").clone();
    let warmup: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(1);
    let workers = std::env::var("BENCH_WORKERS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let rt = tokio_mt_bench::runtime(workers);
    for _ in 0..warmup {
        tokio_mt_bench::run(&rt, &row);
    }
    let t0 = Instant::now();
    tokio_mt_bench::run(&rt, &row);
    println!("ns {}", t0.elapsed().as_nanos());
}
