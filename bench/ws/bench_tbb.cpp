// bench_tbb.cpp - the rows of stage 07's table that fit oneTBB (libtbb-dev):
// a task_arena of 2 threads; spawn/join of 10,000 tasks with a task_group,
// and the depth-12 fork-join tree. TBB has no async channel or async mutex:
// those rows are left empty. `bench_tbb <spawn|tree> <warmup>` prints
// `ns <wall>`; with BENCH_COUNT defined, `allocs <n>` and `ops <n>` too
// (operator new counted; TBB's own small-object allocator is not).
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#ifdef BENCH_COUNT
static std::atomic<bool> on{false};
static std::atomic<unsigned long> allocs{0};
void *operator new(std::size_t n)
{
    if (on.load(std::memory_order_relaxed))
        allocs.fetch_add(1, std::memory_order_relaxed);
    if (void *p = std::malloc(n ? n : 1))
        return p;
    throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
#endif

static unsigned long tree(unsigned depth)
{
    if (depth == 0)
        return 1;
    unsigned long a = 0, b = 0;
    tbb::task_group g;
    g.run([&] { a = tree(depth - 1); });
    g.run([&] { b = tree(depth - 1); });
    g.wait();
    return a + b;
}

static unsigned long one(tbb::task_arena &arena, const char *row)
{
    unsigned long ops = 0;
    arena.execute([&] {
        if (!std::strcmp(row, "spawn")) {
            const unsigned n = 10000;
            std::vector<unsigned long> out(n);
            tbb::task_group g;
            for (unsigned i = 0; i < n; i++)
                g.run([&out, i] { out[i] = i; });
            g.wait();
            unsigned long sum = 0;
            for (unsigned i = 0; i < n; i++)
                sum += out[i];
            if (sum != (unsigned long)n * (n - 1) / 2)
                std::abort();
            ops = n;
        } else if (!std::strcmp(row, "tree")) {
            if (tree(12) != 4096)
                std::abort();
            ops = 8191;
        } else {
            std::fprintf(stderr, "bench_tbb: no such row here: %s\n", row);
            std::exit(2);
        }
    });
    return ops;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *w = std::getenv("BENCH_WORKERS");
    tbb::task_arena arena(w ? std::atoi(w) : 2);
    int warmup = std::atoi(argv[2]);
    for (int i = 0; i < warmup; i++)
        one(arena, argv[1]);
#ifdef BENCH_COUNT
    on = true;
#endif
    auto t0 = std::chrono::steady_clock::now();
    unsigned long ops = one(arena, argv[1]);
    auto t1 = std::chrono::steady_clock::now();
#ifdef BENCH_COUNT
    on = false;
    std::printf("polls 0\nallocs %lu\nops %lu\n", allocs.load(), ops);
#else
    (void)ops;
#endif
    std::printf("ns %lld\n", (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    return 0;
}
