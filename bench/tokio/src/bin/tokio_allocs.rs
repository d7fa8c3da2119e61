//! Allocation-count binary: the same workload under a counting global
//! allocator (a separate binary so the timing binary runs on the plain system
//! allocator). Prints `allocs <n> frees <n> tasks <n>` for one iteration after
//! the warm-up ones.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

struct Counting;
static ON: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if ON.load(Relaxed) {
            FREES.fetch_add(1, Relaxed);
        }
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        // a grow or shrink in place or by move: counted as neither (the C
        // counter counts realloc only from NULL or to 0, which Rust never does)
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let a = tokio_bench::args();
    let rt = tokio_bench::runtime();
    for _ in 0..a.warmup {
        tokio_bench::once(&rt, &a);
    }
    ON.store(true, Relaxed);
    tokio_bench::once(&rt, &a);
    ON.store(false, Relaxed);
    println!(
        "allocs {} frees {} tasks {}",
        ALLOCS.load(Relaxed),
        FREES.load(Relaxed),
        tokio_bench::tasks_per_iteration(&a)
    );
}
