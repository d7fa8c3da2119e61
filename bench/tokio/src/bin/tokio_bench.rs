//! Timing binary: `tokio_bench <yield|spawn> [warmup] [reps]` prints one
//! `ns <wall time>` line per timed iteration.
fn main() {
    let a = tokio_bench::args();
    let rt = tokio_bench::runtime();
    for _ in 0..a.warmup {
        tokio_bench::once(&rt, &a);
    }
    for _ in 0..a.reps {
        println!("ns {}", tokio_bench::once(&rt, &a));
    }
}
