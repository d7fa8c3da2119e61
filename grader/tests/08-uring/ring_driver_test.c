/* ring_driver_test.c - stage 08: the ring as a driver (ring.h contract 4). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"
#include "store_buffer.h"

LAB_SUITE(ring_driver, 10);
LAB_SUITE(ring_driver_race, 15);

struct unparker {
    struct ring *r;
    unsigned ms;
    unsigned rounds;
    pthread_t owner;           /* the thread that parks */
    atomic_uint ended;         /* parks ended with the token so far: the owner's count */
    atomic_bool let_out;       /* a park outlived its deadline: the test ended it with a signal */
    atomic_uint_fast64_t late_ms;  /* how long after the unpark it was still parked */
    atomic_uint_fast64_t unparked_at;  /* when the last unpark was made: a figure for the note */
};

/* How long a park may take to return after the unpark that ends it. The
 * reference returns within a millisecond or so, and within a few tens beside
 * two CPU hogs on two cores: a park still waiting a second later is one no
 * unpark reached. */
#define UNPARK_DEADLINE_MS SCALED_MS(1000)

static void *unpark_later(void *arg)
{
    struct unparker *u = arg;
    for (unsigned i = 0; i < u->rounds; i++) {
        lab_sleep_ms(u->ms);
        uint64_t t0 = monotonic_ns();
        atomic_store_explicit(&u->unparked_at, t0, memory_order_relaxed); /* a figure: ordered by the park's own acquire */
        driver_unpark(ring_driver(u->r));
        /* the owner's park i + 1 ends now, or its io_uring_enter waits for a
         * CQE nothing will post: the harness cannot tell (not a futex wait),
         * so the test's own deadline lets it out with a signal */
        uint64_t deadline = t0 + (uint64_t)UNPARK_DEADLINE_MS * MS_NS;
        /* acquire: pairs with the owner's release increment (the park returned) */
        while (atomic_load_explicit(&u->ended, memory_order_acquire) <= i) {
            uint64_t now = monotonic_ns();
            if (now >= deadline) {
                if (!atomic_load_explicit(&u->let_out, memory_order_relaxed))
                    atomic_store_explicit(&u->late_ms, (now - t0) / MS_NS, memory_order_relaxed);
                /* release: pairs with the owner's acquire load after its park returns (late_ms with it) */
                atomic_store_explicit(&u->let_out, true, memory_order_release);
                let_out(u->owner);
                lab_sleep_ms(10);
            } else {
                lab_sleep_ms(1);
            }
        }
        if (atomic_load_explicit(&u->let_out, memory_order_relaxed)) /* this thread's own store */
            return NULL;
    }
    return NULL;
}

LAB_TEST(ring_driver, unpark_interrupts_untimed_park, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct unparker u = { .r = r, .ms = 30, .rounds = 3, .owner = pthread_self() };
    atomic_init(&u.ended, 0);
    atomic_init(&u.let_out, false);
    atomic_init(&u.late_ms, 0);
    atomic_init(&u.unparked_at, 0);
    let_out_ready();
    uint64_t worst = 0;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, unpark_later, &u), 0, "pthread_create failed");
    for (unsigned i = 0; i < u.rounds; i++) {
        uint64_t t0 = monotonic_ns();
        bool token = driver_park(ring_driver(r), DRIVER_PARK_FOREVER);
        uint64_t waited = monotonic_ns() - t0;
        /* acquire: pairs with the unparker's release store */
        if (atomic_load_explicit(&u.let_out, memory_order_acquire)) {
            atomic_fetch_add_explicit(&u.ended, 1, memory_order_release); /* pairs with the unparker's acquire: stop */
            pthread_join(t, NULL);
            cr_assert_fail("park %u with no timeout was still waiting %llu ms after another thread's unpark, and "
                           "the test ended it with a signal: the unpark never reached the io_uring_enter that "
                           "was waiting, though every park before this one had been ended (ring.h contract 4: "
                           "an unpark ends a park with no timeout at once, through the ring)", i + 1,
                           (unsigned long long)atomic_load_explicit(&u.late_ms, memory_order_relaxed));
        }
        cr_assert(token || waited < 5 * MS_NS, "park %u returned false after %llu ms (ring.h contract 4)", i + 1,
                  (unsigned long long)(waited / MS_NS));
        if (!token) { /* a spurious return: allowed, park again */
            i--;
            continue;
        }
        /* the unpark that ended this park came after its store; one before the park (a token) counts as 0 */
        uint64_t at = atomic_load_explicit(&u.unparked_at, memory_order_relaxed), now = monotonic_ns();
        if (at > t0 && now - at > worst)
            worst = now - at;
        /* release: pairs with the unparker's acquire load (this park is over) */
        atomic_fetch_add_explicit(&u.ended, 1, memory_order_release);
    }
    /* read before the join, while the unparker lives: its count of the write that ended the last park
     * reaches this thread through the kernel only (the eventfd, read by the ring), which ThreadSanitizer
     * does not see, so a plain counter is a race it reports on every run (ring.h, Threads) */
    struct ring_stats st = ring_test_stats(r);
    pthread_join(t, NULL);
    lab_note("unpark to return, worst of %u: %.3f ms", u.rounds, worst / 1e6);
    cr_assert_geq(st.wake_writes, 1, "three parks with no timeout ended, and unpark never wrote the eventfd (ring.h contract 4)");
    ring_free_checked(r);
}

LAB_TEST(ring_driver, unpark_before_park_is_kept, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct driver d = ring_driver(r);
    driver_unpark(d);
    uint64_t t0 = monotonic_ns();
    cr_assert(driver_park(d, DRIVER_PARK_FOREVER), "an unpark before park was lost: park must return at once, "
              "true (ring.h contract 4)");
    cr_assert_lt(monotonic_ns() - t0, 500 * MS_NS, "park with a token waited: the token ends it at once (ring.h contract 4)");
    driver_unpark(d);
    driver_unpark(d);
    cr_assert(driver_park(d, DRIVER_PARK_FOREVER), "two unparks before park: park must return true (ring.h contract 4)");
    t0 = monotonic_ns();
    bool again = driver_park(d, 20 * MS_NS);
    cr_assert(!again || monotonic_ns() - t0 < 5 * MS_NS, "two unparks left two tokens; two are one (ring.h contract 4)");
    cr_assert_eq(ring_test_stats(r).wake_writes, 0, "unparks of a driver that was not parked wrote the eventfd "
                 "%llu times; only an unpark that finds the owner PARKED needs the syscall (ring.h contract 4)",
                 (unsigned long long)ring_test_stats(r).wake_writes);
    ring_free_checked(r);
}

/* park(0) and the token (ring.h contract 4, as stage 02's driver and stage
 * 06's io_driver.h contract 4): a zero park takes a token that is there and
 * answers true, and enters the kernel all the same; the token is then gone. */
LAB_TEST(ring_driver, zero_park_takes_the_token, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct driver d = ring_driver(r);
    uint64_t enters = ring_test_stats(r).enters;
    driver_unpark(d);
    bool first = driver_park(d, 0);
    bool second = driver_park(d, 0);
    uint64_t entered = ring_test_stats(r).enters - enters;
    cr_assert(first, "park(0) after an unpark answered false: the unpark's token was there, and park(0) takes "
              "it and answers true, like every park (ring.h contract 4)");
    cr_assert_not(second, "an unpark, then two park(0)s: both answered true. The first took the token, so the "
                  "second had none to take: park(0) consumes the token it finds (ring.h contract 4)");
    cr_assert_eq(entered, 2, "two park(0)s, one of them with a token, entered the kernel %llu times; expected 2: "
                 "park(0) enters and dispatches, a token there or not (ring.h contract 4)",
                 (unsigned long long)entered);
    /* and a token that came after the last park(0) is the next park's */
    driver_unpark(d);
    uint64_t t0 = monotonic_ns();
    cr_assert(driver_park(d, 200 * MS_NS), "an unpark after park(0) was lost: the next park must return at once, "
              "true (ring.h contract 4)");
    cr_assert_lt(monotonic_ns() - t0, 100 * MS_NS, "an unpark after park(0): the next park(200 ms) waited; the "
                 "token ends it at once (ring.h contract 4)");
    cr_assert_eq(ring_test_stats(r).wake_writes, 0, "unparks of a driver that was not parked wrote the eventfd "
                 "%llu times (ring.h contract 4)", (unsigned long long)ring_test_stats(r).wake_writes);
    ring_free_checked(r);
}

LAB_TEST(ring_driver, park_times_out, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct driver d = ring_driver(r);
    uint64_t enters = ring_test_stats(r).enters;
    struct park_guard g;
    park_guard_start(&g, SCALED_MS(1000)); /* a park that ignores its timeout, ended at the bound below */
    uint64_t t0 = monotonic_ns();
    uint64_t cpu0 = thread_cpu_ns();
    driver_park(d, 30 * MS_NS);
    uint64_t waited = monotonic_ns() - t0, cpu = thread_cpu_ns() - cpu0;
    bool let_out = park_guard_stop(&g);
    cr_assert_geq(waited, 29 * MS_NS, "park(30 ms) returned after %llu us with nothing to do (ring.h contract 4)",
                  (unsigned long long)(waited / 1000));
    cr_assert(!let_out && waited < (uint64_t)SCALED_MS(1000) * MS_NS, "park(30 ms) took %llu ms%s: park(t) waits "
              "at most t (ring.h contract 4)", (unsigned long long)(waited / MS_NS),
              let_out ? ", and the test ended it with a signal" : "");
    cr_assert_lt(cpu, 10 * MS_NS, "park(30 ms) used %llu us of CPU: it must wait in the kernel, not spin (ring.h contract 4)",
                 (unsigned long long)(cpu / 1000));
    cr_assert_leq(ring_test_stats(r).enters - enters, 1, "park(30 ms) entered the kernel %llu times; expected one "
                  "io_uring_enter that submits and waits (ring.h contract 4)",
                  (unsigned long long)(ring_test_stats(r).enters - enters));
    /* "for at most t (ns, not rounded)": a timeout with a part below 1 ms
     * waits that part too; cut to whole ms, the time driver's sub-ms
     * remainder is a 0 ms park, again and again until the tick */
    static const uint64_t sub_ms[] = { UINT64_C(300000), UINT64_C(1500000) };
    for (unsigned i = 0; i < sizeof sub_ms / sizeof sub_ms[0]; i++) {
        t0 = monotonic_ns();
        driver_park(d, (int64_t)sub_ms[i]);
        waited = monotonic_ns() - t0;
        cr_assert_geq(waited, sub_ms[i] * 9 / 10, "park(%llu us) returned after %llu us with nothing to do: the "
                      "timeout's part below 1 ms was not waited (ring.h contract 4: at most t, in ns, not "
                      "rounded)", (unsigned long long)(sub_ms[i] / 1000), (unsigned long long)(waited / 1000));
    }
    ring_free_checked(r);
}

/* timers and completions share one park: a task sleeps 30 ms while another
 * reads a byte a thread sends after 10 ms */
struct sleeper {
    struct sleep s;
    uint64_t *done_ns;
};
static enum poll sleeper_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct sleeper *sl = self;
    if (sleep_poll(&sl->s, cx) == POLL_PENDING)
        return POLL_PENDING;
    *sl->done_ns = monotonic_ns();
    return POLL_READY;
}
static void sleeper_drop(void *self) { sleep_drop(&((struct sleeper *)self)->s); }
static const struct future_vtable sleeper_vt = FUTURE_VTABLE_INIT(struct sleeper, 0, sleeper_poll, sleeper_drop);

struct reader {
    struct uring_read rd;
    char buf[8];
    ssize_t *got;
    uint64_t *done_ns;
};
static enum poll reader_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct reader *rr = self;
    rr->rd.dst = rr->buf; /* the task's copy of the future: its own buffer */
    if (uring_read_poll(&rr->rd, cx, rr->got) == POLL_PENDING)
        return POLL_PENDING;
    *rr->done_ns = monotonic_ns();
    return POLL_READY;
}
static void reader_drop(void *self) { uring_read_drop(&((struct reader *)self)->rd); }
static const struct future_vtable reader_vt = FUTURE_VTABLE_INIT(struct reader, 0, reader_poll, reader_drop);

struct sender {
    int fd;
    unsigned ms;
    uint64_t sent_ns;  /* when the byte went out (the sender's own clock reading) */
};
static void *send_later(void *arg)
{
    struct sender *s = arg;
    lab_sleep_ms(s->ms);
    bool sent = send(s->fd, "z", 1, MSG_NOSIGNAL) == 1;
    s->sent_ns = monotonic_ns();
    return sent ? NULL : (void *)1;
}

LAB_TEST(ring_driver, timers_and_io_share_one_park, 10)
{
    struct iostack s;
    iostack_new(&s);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *st = uring_stream_new(s.r, sv[0]);
    uint64_t t0 = monotonic_ns(), slept = 0, read_at = 0;
    ssize_t got = 0;
    const unsigned byte_ms = SCALED_MS(20), sleep_ms = SCALED_MS(150);
    struct sleeper sl = { .s = sleep_for(s.td, sleep_ms * MS_NS), .done_ns = &slept };
    struct reader rr = { .rd = uring_read(st, NULL, 8), .got = &got, .done_ns = &read_at };
    iostack_spawn(&s, future_of(&sleeper_vt, &sl));
    iostack_spawn(&s, future_of(&reader_vt, &rr));
    struct sender snd = { .fd = sv[1], .ms = byte_ms };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, send_later, &snd), 0, "pthread_create failed");
    uint64_t enters = ring_test_stats(s.r).enters;
    struct park_guard g;
    park_guard_start(&g, SCALED_MS(500)); /* a park that ignores the timer's deadline, ended at the bound below */
    iostack_run(&s);
    bool let_out = park_guard_stop(&g);
    void *failed;
    pthread_join(t, &failed);
    cr_assert_null(failed, "the test's sender could not send");
    cr_assert_eq(got, 1, "the reader got %zd; expected the 1 byte sent (ring.h contract 4)", got);
    if (read_at >= slept && (snd.sent_ns + SCALED_MS(10) * MS_NS >= slept || slept - t0 >= SCALED_MS(350) * MS_NS))
        lab_cannot_judge("the byte due at %u ms was sent at %.1f ms and the %u ms sleep ended at %.1f ms: the "
                         "machine held the sender or the executor too long to tell which came first", byte_ms,
                         (snd.sent_ns - t0) / 1e6, sleep_ms, (slept - t0) / 1e6);
    cr_assert_lt(read_at, slept, "the byte sent at %.1f ms was read at %llu ms, only once the %u ms sleep had ended: "
                 "a completion must end the park at once (ring.h contract 4)", (snd.sent_ns - t0) / 1e6,
                 (unsigned long long)((read_at - t0) / MS_NS), sleep_ms);
    cr_assert_geq(slept - t0, (uint64_t)sleep_ms * MS_NS - MS_NS, "the %u ms sleep ended at %llu ms: never early "
                  "(ring.h contract 4)", sleep_ms, (unsigned long long)((slept - t0) / MS_NS));
    cr_assert(!let_out && slept - t0 < (uint64_t)SCALED_MS(500) * MS_NS, "the %u ms sleep ended at %llu ms%s: "
              "the park's timeout must be the time driver's (ring.h contract 4)", sleep_ms,
              (unsigned long long)((slept - t0) / MS_NS), let_out ? ", after the test ended the park with a signal" : "");
    uint64_t parks = ring_test_stats(s.r).enters - enters;
    cr_assert_leq(parks, 30, "%llu parks entered the kernel for one byte and one timer; a handful expected (ring.h contract 4)",
                  (unsigned long long)parks);
    uring_stream_close(st);
    close(sv[1]);
    iostack_free(&s);
}

/* many threads unpark while the owner parks with and without timeouts */
struct hammer {
    struct ring *r;
    atomic_bool *stop;
};
static void *hammer_unpark(void *arg)
{
    struct hammer *h = arg;
    while (!atomic_load_explicit(h->stop, memory_order_relaxed)) {
        driver_unpark(ring_driver(h->r));
        lab_spin_pause(64);
    }
    return NULL;
}

LAB_TEST(ring_driver, unpark_from_many_threads, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    atomic_bool stop = false;
    struct hammer h = { .r = r, .stop = &stop };
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer_unpark, &h), 0, "pthread_create failed");
    unsigned rounds = lab_scale(2000, 100);
    for (unsigned i = 0; i < rounds; i++)
        driver_park(ring_driver(r), i % 3 == 0 ? 0 : (i % 3 == 1 ? (int64_t)MS_NS : DRIVER_PARK_FOREVER));
    atomic_store_explicit(&stop, true, memory_order_relaxed);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    ring_free_checked(r);
}

/* An unpark that reads the state word with a load and then writes the
 * token, against an owner that parks in between, forced on every run
 * (lab_sb_unpark_race, common/testing): the unpark is single-stepped and
 * stopped at its first plain access to the ring (alone on its page), the
 * owner parks meanwhile (io_uring_enter, 4 s), and the unpark goes on. An
 * unpark whose first access is a read-modify-write is never stopped. */
static void race_unpark(void *arg) { driver_unpark(ring_driver(arg)); }
static void race_park(void *arg)
{
    (void)driver_park(ring_driver(arg), (int64_t)(4000 * MS_NS * (uint64_t)LAB_TIMEOUT_SCALE));
}

LAB_TEST(ring_driver_race, owner_parks_while_unpark_reads_the_state, 15)
{
#if !defined(__x86_64__)
    lab_cannot_judge("the unpark is stopped by single-stepping with x86-64's trap flag; this machine is not "
                     "x86-64");
#else
    alloc_own_pages(true);
    struct ring *r = ring_or_skip(8, 16);
    alloc_own_pages(false);
    struct lab_sb_park sp = { .page = (void *)((uintptr_t)r & ~(uintptr_t)4095), .unpark = race_unpark,
                              .park = race_park, .arg = r, .wake_ms = UNPARK_DEADLINE_MS };
    struct lab_sb_park_result res;
    cr_assert(lab_sb_unpark_race(&sp, &res), "could not start a thread (test machine out of resources)");
    char note[256];
    const char *unjudged = lab_sb_unpark_unjudged(&res, "the ring", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    cr_assert(res.returned || !res.watched,
              "the ring's unpark read the ring's state with a plain access (no read-modify-write) and was stopped "
              "right after it; meanwhile the owner called park, found no token, and went to sleep in "
              "io_uring_enter. The unpark then went on and ended, and the owner was still waiting %u ms later: "
              "what the unpark read was stale by the time it wrote the token, so it wrote no eventfd. The unpark was lost (ring.h contract 4): what does a read of the state tell an unpark about a state the owner may change before the unpark writes? The next hint: "
              "make hint STAGE=8 ITEM=cross-thread-unpark",
              (unsigned)UNPARK_DEADLINE_MS);
    cr_assert(res.returned,
              "the ring's unpark ended before the owner called park, and park (4 s) then did not return within "
              "%u ms: an unpark made before park was lost (ring.h contract 4)",
              (unsigned)UNPARK_DEADLINE_MS);
    ring_free_checked(r);
#endif
}

/* The other half: a park that looks at the state and then announces its
 * sleep in two steps (a load, then a store of PARKED), against an unpark
 * made in between. Every place is tried (store_buffer.h,
 * lab_sb_park_explore): park (4 s) is single-stepped on a fresh ring and
 * stopped right after its first access to the ring, then its second, and
 * so on, until it reaches io_uring_enter; at each stop another thread
 * unparks, then park goes on. The park began before that unpark: it
 * returns within a second every time. A ring freed does not go back to the
 * test's pool (uring_guard.c): the places tried are at most as many as the
 * pool has rings of 8 (64; the reference's park reaches io_uring_enter
 * after 17 accesses to the ring at -O2, 18 at -O0). */
static void park_race_fresh(void *ctx, struct lab_sb_park *sp)
{
    (void)ctx;
    alloc_own_pages(true);
    struct ring *r = ring_or_skip(8, 16);
    alloc_own_pages(false);
    sp->arg = r;
    sp->page = (void *)((uintptr_t)r & ~(uintptr_t)4095);
}

static void park_race_done(void *ctx, struct lab_sb_park *sp)
{
    (void)ctx;
    ring_free_checked(sp->arg);
}

LAB_TEST(ring_driver_race, unpark_after_every_access_of_park, 30)
{
#if !defined(__x86_64__)
    lab_cannot_judge("park is stopped by single-stepping with x86-64's trap flag; this machine is not x86-64");
#else
    require_io_uring();
    struct lab_sb_park sp = { .unpark = race_unpark, .park = race_park, .wake_ms = UNPARK_DEADLINE_MS };
    struct lab_sb_park_result r;
    long k;
    char note[256];
    const char *unjudged = lab_sb_park_explore(&sp, park_race_fresh, park_race_done, NULL, uring_pool_left(8), &k,
                                               &r, "the ring", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    cr_assert(r.returned,
              "the ring's park (4 s) was single-stepped and stopped right after its access number %ld to the "
              "ring; there another thread unparked the ring, and that unpark ended; park then went on and was "
              "still in io_uring_enter %u ms later. The park began before the unpark, so the unpark's token had "
              "to end it: it was written between what park read of the state and what park wrote, and park wrote "
              "over it (ring.h contract 4). What does park's look at the state tell it about an unpark made "
              "before its announcement lands? The next hint: make hint STAGE=8 ITEM=cross-thread-unpark",
              k + 1, (unsigned)UNPARK_DEADLINE_MS);
#endif
}
