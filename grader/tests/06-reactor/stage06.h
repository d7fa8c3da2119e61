/* stage06.h - what the stage 06 tests share (support.c has the code).
 *
 * The tests drive the public API only: reactor.h, io_driver.h, tcp.h, and
 * below them stage 05's time driver and sleep and stage 03's executor. Every
 * socket is a socketpair or bound to 127.0.0.1, port 0.
 */
#ifndef STAGE06_H
#define STAGE06_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lab_test.h"
#include "measure.h"
#include "raw_sockets.h"
#include "wakers.h"
#include "reactor.h"
#include "io_driver.h"
#include "tcp.h"
#include "time_driver.h"
#include "sleep.h"
#include "combinators.h"
#include "executor.h"

#define MS_NS UINT64_C(1000000)
#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))

/* ---- the stack: reactor <- I/O driver <- time driver <- executor ---------- */
struct iostack {
    struct reactor *r;
    struct io_driver *io;
    struct time_driver *td;
    struct executor *ex;
};
void iostack_new(struct iostack *s);
/* Asserts that no registration is left, then frees everything. */
void iostack_free(struct iostack *s);
/* Runs the executor until every task is done; fails the test on deadlock. */
void iostack_run(struct iostack *s);
/* Spawns a future and drops its join handle (the task runs detached). */
void iostack_spawn(struct iostack *s, struct future f);
/* A listener on 127.0.0.1, any port, with the stack's time driver. */
struct tcp_listener *iostack_listen(struct iostack *s);

/* A listener, a raw (blocking) peer connected to it, and the accepted stream. */
struct conn {
    struct tcp_listener *l;
    struct tcp_stream *st;  /* NULL once the test closed it */
    int peer;               /* -1 once the test closed it */
};
void conn_new(struct iostack *s, struct conn *c);
/* The same, the peer's receive buffer set to rcvbuf bytes before it connects (0: the default). */
void conn_new_rcvbuf(struct iostack *s, struct conn *c, int rcvbuf);
void conn_free(struct conn *c);

/* A thread's errand on the peer's side: after `ms`, send msg (if not NULL),
 * then shut down the write half, reset the connection, or do nothing. */
enum peer_end { PEER_KEEP, PEER_SHUTDOWN, PEER_RESET };
struct delayed {
    int fd;
    unsigned ms;
    const char *msg;
    enum peer_end end;
    uint64_t sent_ns;   /* written by delayed_peer: monotonic_ns() once it sent */
};
void *delayed_peer(void *arg);  /* returns non-NULL when the send failed */

/* ---- raw sockets (blocking, the test's side of a connection) --------------- */
/* nb_socketpair, raw_connect, free_port, raw_send_all, raw_close_reset, pattern_byte, drain_peer: raw_sockets.h */
/* Raises the soft open-files limit to the hard limit; returns the new soft limit. */
unsigned long raise_nofile(void);

/* ---- futures built from the stage's futures ---------------------------------- */

/* Echo server: accepts `conns` connections, spawning an echo task for each
 * (read, write all of it back, until end of stream; then close). A runtime
 * copies a future's state before its first poll (future.h): what the test
 * reads afterwards lives in a tally the state points to. */
struct echo_tally {
    unsigned accepted;
    int err;           /* the first accept error, or 0 */
};
struct echo_server {
    struct iostack *s;
    struct tcp_listener *l;
    unsigned conns;
    struct echo_tally *tally;
    struct tcp_accept acc;
    bool accepting;
};
struct future echo_server_future(struct echo_server *es);

/* Echo client: connects to port, then `rounds` times writes `size` bytes
 * (a pattern from seed) and reads them back, checking each byte; then
 * closes. Counts finished clients in *done; records the first error. */
struct echo_client {
    struct reactor *r;
    uint16_t port;
    unsigned rounds, size;
    uint64_t seed;
    unsigned *done;
    int *failed;       /* set to a line number on the first failure */
    /* state */
    int state;
    unsigned round;
    size_t got;
    struct tcp_connect conn;
    struct tcp_stream *st;
    struct tcp_write wr;
    unsigned char *out, *in;
};
void echo_client_init(struct echo_client *c, struct reactor *r, uint16_t port, unsigned rounds, unsigned size,
                      uint64_t seed, unsigned *done, int *failed);
struct future echo_client_future(struct echo_client *c);


#endif
