//! The timer benchmark's Tokio side: the same command line, the same
//! pseudo-random deadlines and cancel order, and the same output as the C
//! binaries (../timers/timer_bench.c).
//!
//!   tokio_timer bulk [warmup]
//!       BENCH_TIMER_N (1,000,000) `Sleep`s with deadlines uniform in
//!       [1, BENCH_BULK_MAX_MS] ms after the round's start. A `Sleep` is put
//!       in the wheel only at its first poll, so "insert" is one poll of each
//!       (from one future, under `task::unconstrained`: the coop budget would
//!       make the 129th poll Pending without registering), and "cancel" is
//!       dropping each in the random order (TimerEntry's drop takes the driver
//!       lock and unlinks it from the wheel). The Sleeps live in one array,
//!       made (untimed) before the timed polls and never moved, so neither
//!       phase allocates or frees: as the C sides, whose timers are an array.
//!   tokio_timer fire
//!       BENCH_FIRE_N (100,000) tasks on a current_thread runtime with the
//!       time driver, each `sleep_until(deadline).await` and then returning the
//!       time it ran; the root awaits the handles in deadline order.
use std::future::{poll_fn, Future};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::runtime::{Builder, Runtime};
use tokio::time::{sleep_until, Sleep};

fn splitmix64(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e3779b97f4a7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

fn env(k: &str, d: u64) -> u64 {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}
extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
}
/// CPU time of the process (CLOCK_PROCESS_CPUTIME_ID = 2 on Linux), in ns.
fn cpu_ns() -> u64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { clock_gettime(2, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn runtime() -> Runtime {
    Builder::new_current_thread().enable_time().build().expect("tokio runtime")
}

fn bulk(warmup: u64) {
    let n = env("BENCH_TIMER_N", 1_000_000) as usize;
    let max_ms = env("BENCH_BULK_MAX_MS", 600_000);
    let mut s = 1u64;
    let dl: Vec<u64> = (0..n).map(|_| 1 + splitmix64(&mut s) % max_ms).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    s = 2;
    for i in (2..=n).rev() {
        let j = (splitmix64(&mut s) % i as u64) as usize;
        order.swap(i - 1, j);
    }
    // BENCH_BULK_SCATTER=1: the k-th Sleep goes to a random element of the
    // array (seed 4), as in the C binaries; the cancel order is mapped too.
    let place: Option<Vec<u32>> = if env("BENCH_BULK_SCATTER", 0) != 0 {
        let mut p: Vec<u32> = (0..n as u32).collect();
        s = 4;
        for i in (2..=n).rev() {
            let j = (splitmix64(&mut s) % i as u64) as usize;
            p.swap(i - 1, j);
        }
        for o in order.iter_mut() {
            *o = p[*o as usize];
        }
        Some(p)
    } else {
        None
    };
    let rt = runtime();
    // One array of Sleeps, never moved or reallocated: pinned in place.
    let mut v: Vec<MaybeUninit<Sleep>> = Vec::with_capacity(n);
    unsafe { v.set_len(n) };
    let (mut ins, mut can) = (0u128, 0u128);
    rt.block_on(tokio::task::unconstrained(async {
        for _ in 0..=warmup {
            let base = Instant::now();
            for k in 0..n {
                let at = place.as_ref().map_or(k, |p| p[k] as usize);
                v[at].write(sleep_until((base + Duration::from_millis(dl[k])).into()));
            }
            let t0 = Instant::now();
            poll_fn(|cx| {
                for k in 0..n {
                    let at = place.as_ref().map_or(k, |p| p[k] as usize);
                    let sl = unsafe { Pin::new_unchecked(v[at].assume_init_mut()) };
                    if sl.poll(cx).is_ready() {
                        panic!("a bulk timer fired");
                    }
                }
                Poll::Ready(())
            })
            .await;
            let t1 = Instant::now();
            for &j in &order {
                unsafe { std::ptr::drop_in_place(v[j as usize].as_mut_ptr()) };
            }
            let t2 = Instant::now();
            ins = (t1 - t0).as_nanos();
            can = (t2 - t1).as_nanos();
        }
    }));
    println!(
        "impl Tokio\ninsert_ns {ins}\ncancel_ns {can}\nn {n}\nsleep_bytes {}",
        std::mem::size_of::<Sleep>()
    );
}

static REGISTERED: AtomicUsize = AtomicUsize::new(0);

fn fire() {
    let n = env("BENCH_FIRE_N", 100_000) as usize;
    let span = env("BENCH_FIRE_SPAN_MS", 1000) * 1_000_000;
    let lead = env("BENCH_FIRE_LEAD_MS", 200) * 1_000_000;
    let rt = runtime();
    let start = Instant::now();
    let mut s = 3u64;
    let dl: Vec<Instant> =
        (0..n).map(|_| start + Duration::from_nanos(lead + splitmix64(&mut s) % span)).collect();
    let mut by_deadline: Vec<usize> = (0..n).collect();
    by_deadline.sort_by_key(|&i| dl[i]);
    let (fired, reg_wall, reg_cpu) = rt.block_on(async {
        let hs: Vec<_> = dl
            .iter()
            .map(|&d| {
                tokio::spawn(async move {
                    let mut sl = std::pin::pin!(sleep_until(d.into()));
                    // the first poll puts the Sleep in the wheel
                    let first = poll_fn(|cx| Poll::Ready(sl.as_mut().poll(cx))).await;
                    REGISTERED.fetch_add(1, Relaxed);
                    if first.is_pending() {
                        sl.await;
                    }
                    Instant::now()
                })
            })
            .collect();
        // The tasks register their Sleeps at their first poll, which comes
        // once this root task waits: yield until all have, then start the
        // clocks, as the C sides do after their last insert.
        while REGISTERED.load(Relaxed) < n {
            tokio::task::yield_now().await;
        }
        let (rw, rc) = (Instant::now(), cpu_ns());
        let mut fired = vec![start; n];
        let mut hs: Vec<Option<_>> = hs.into_iter().map(Some).collect();
        for &i in &by_deadline {
            fired[i] = hs[i].take().unwrap().await.unwrap();
        }
        (fired, rw, rc)
    });
    let (end_wall, end_cpu) = (Instant::now(), cpu_ns());
    let mut late: Vec<i64> = (0..n)
        .map(|i| {
            if fired[i] >= dl[i] {
                (fired[i] - dl[i]).as_nanos() as i64
            } else {
                -((dl[i] - fired[i]).as_nanos() as i64)
            }
        })
        .collect();
    let early = late.iter().filter(|&&l| l < 0).count();
    late.sort_unstable();
    println!(
        "impl Tokio\nn {n}\np50_ns {}\np99_ns {}\nmax_ns {}\nmin_ns {}\nearly {early}\ncpu_ns {}\nwall_ns {}\nreg_ns {}",
        late[n / 2],
        late[n * 99 / 100],
        late[n - 1],
        late[0],
        end_cpu - reg_cpu,
        (end_wall - reg_wall).as_nanos(),
        (reg_wall - start).as_nanos()
    );
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    match a.get(1).map(String::as_str).unwrap_or("bulk") {
        "bulk" => bulk(a.get(2).and_then(|v| v.parse().ok()).unwrap_or(1)),
        "fire" => fire(),
        w => {
            eprintln!("unknown workload {w} (bulk|fire)");
            std::process::exit(2);
        }
    }
}
