//! Stage 07's rows on Tokio's multi_thread runtime, the same shapes as
//! bench/ws/bench_ws.c: everything inside one `block_on` of a runtime with 2
//! workers, built once per process outside the timed region.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::runtime::{Builder, Runtime};

pub static POLLS: AtomicU64 = AtomicU64::new(0);

/// Counts its polls when `COUNT` is on (the counting binary only).
pub struct Counted<F> {
    inner: F,
}
pub static mut COUNT: bool = false;

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if unsafe { COUNT } {
            POLLS.fetch_add(1, Relaxed);
        }
        // SAFETY: structural pinning of the only field
        unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx)
    }
}
pub fn c<F>(f: F) -> Counted<F> {
    Counted { inner: f }
}

pub fn runtime(workers: usize) -> Runtime {
    Builder::new_multi_thread().worker_threads(workers).build().expect("tokio runtime")
}

/// Returns the number of operations of the row.
pub fn run(rt: &Runtime, row: &str) -> u64 {
    match row {
        "spawn" => rt.block_on(c(async {
            let n = 10_000u64;
            let mut hs = Vec::with_capacity(n as usize);
            for i in 0..n {
                hs.push(tokio::spawn(c(async move { i })));
            }
            let mut sum = 0;
            for h in hs {
                sum += h.await.unwrap();
            }
            assert_eq!(sum, n * (n - 1) / 2);
            n
        })),
        "pingpong" => rt.block_on(c(async {
            let n = 1_000_000u64;
            let (tx1, mut rx1) = tokio::sync::mpsc::channel::<u64>(1);
            let (tx2, mut rx2) = tokio::sync::mpsc::channel::<u64>(1);
            let a = tokio::spawn(c(async move {
                for i in 0..n {
                    tx1.send(i).await.unwrap();
                    rx2.recv().await.unwrap();
                }
            }));
            let b = tokio::spawn(c(async move {
                for _ in 0..n {
                    let v = rx1.recv().await.unwrap();
                    tx2.send(v).await.unwrap();
                }
            }));
            a.await.unwrap();
            b.await.unwrap();
            n
        })),
        "bounded" | "unbounded" => {
            let bounded = row == "bounded";
            rt.block_on(c(async move {
                let (producers, per) = (4u64, 2_500u64);
                let mut got = 0u64;
                if bounded {
                    let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(64);
                    let mut hs = Vec::new();
                    for _ in 0..producers {
                        let tx = tx.clone();
                        hs.push(tokio::spawn(c(async move {
                            for i in 0..per {
                                tx.send(i).await.unwrap();
                            }
                        })));
                    }
                    drop(tx);
                    while got < producers * per {
                        rx.recv().await.unwrap();
                        got += 1;
                    }
                    for h in hs {
                        h.await.unwrap();
                    }
                } else {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
                    let mut hs = Vec::new();
                    for _ in 0..producers {
                        let tx = tx.clone();
                        hs.push(tokio::spawn(c(async move {
                            for i in 0..per {
                                // never waits, and (unlike the C side's send
                                // future) takes no budget
                                tx.send(i).unwrap();
                            }
                        })));
                    }
                    drop(tx);
                    while got < producers * per {
                        rx.recv().await.unwrap();
                        got += 1;
                    }
                    for h in hs {
                        h.await.unwrap();
                    }
                }
                got
            }))
        }
        "mutex1" | "mutex16" => {
            let tasks: u64 = if row == "mutex1" { 1 } else { 16 };
            rt.block_on(c(async move {
                let m = Arc::new(tokio::sync::Mutex::new(0u64));
                let per = 10_000 / tasks;
                let mut hs = Vec::new();
                for _ in 0..tasks {
                    let m = m.clone();
                    hs.push(tokio::spawn(c(async move {
                        for _ in 0..per {
                            *m.lock().await += 1;
                        }
                    })));
                }
                for h in hs {
                    h.await.unwrap();
                }
                assert_eq!(*m.lock().await, 10_000);
                10_000
            }))
        }
        "tree" => {
            let leaves = rt.block_on(c(tree(12)));
            assert_eq!(leaves, 4096);
            8191
        }
        _ => panic!("unknown row {row}"),
    }
}

fn tree(depth: u32) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            return 1;
        }
        let a = tokio::spawn(c(tree(depth - 1)));
        let b = tokio::spawn(c(tree(depth - 1)));
        a.await.unwrap() + b.await.unwrap()
    })
}
