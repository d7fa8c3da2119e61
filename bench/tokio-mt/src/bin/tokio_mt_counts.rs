//! The counting binary: allocations (a counting global allocator) and polls
//! (every future of the row wrapped in a counter) of one iteration after the
//! warm-up. Prints `polls <n>`, `allocs <n>`, `ops <n>`.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

struct Counting;
static ON: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let row = a.get(1).expect("row").clone();
    let warmup: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(1);
    let rt = tokio_mt_bench::runtime(2);
    for _ in 0..warmup {
        tokio_mt_bench::run(&rt, &row);
    }
    unsafe { tokio_mt_bench::COUNT = true };
    tokio_mt_bench::POLLS.store(0, Relaxed);
    ON.store(true, Relaxed);
    let ops = tokio_mt_bench::run(&rt, &row);
    ON.store(false, Relaxed);
    println!("polls {}\nallocs {}\nops {}", tokio_mt_bench::POLLS.load(Relaxed), ALLOCS.load(Relaxed), ops);
}
