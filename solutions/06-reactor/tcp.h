/* tcp.h - stage 06: TCP over the reactor, as futures.
 *
 *   struct tcp_listener *l;  tcp_listener_bind(r, td, "127.0.0.1", 0, &l);
 *   struct tcp_accept a = tcp_accept(l);       poll: a new stream
 *   struct tcp_connect c = tcp_connect(r, "127.0.0.1", port);   poll: a stream
 *   struct tcp_read rd = tcp_read(s, buf, sizeof buf);           poll: bytes read, 0 at end of stream
 *   struct tcp_write wr = tcp_write_all(s, buf, n);              poll: n, once all are written
 *   struct tcp_shutdown sh = tcp_shutdown(s);                    poll: the write half closed
 *
 * Every future is a plain struct, like stage 05's sleep: make one, poll it
 * (or view it as a struct future and spawn it), drop it. Each operation is
 * the reactor's loop (reactor.h): wait for readiness, try the non-blocking
 * syscall, clear readiness on EAGAIN and only then.
 *
 * The contract (docs/06-reactor.md#async-tcp):
 *  1. Pending only with the stream's waker of that direction registered in
 *     the reactor; a read and a write may wait on one stream at once (one
 *     reader and one writer at a time per stream).
 *  2. Dropping a pending future deregisters its interest at once: the
 *     reactor drops its waker (read, write), or the half-made socket is
 *     deregistered and closed (connect). tcp_stream_close and
 *     tcp_listener_close deregister before they close.
 *  3. End of stream is a read of 0; a reset is a read or write of
 *     -ECONNRESET (or -EPIPE); writing to a closed peer never raises
 *     SIGPIPE (MSG_NOSIGNAL).
 *  4. accept failing for want of descriptors (EMFILE, ENFILE, ENOBUFS,
 *     ENOMEM) backs off on a timer of the time driver (10 ms, doubling up
 *     to 1 s, reset by a success) and tries again: it never spins. Without a
 *     time driver (td NULL) the error is the future's output instead.
 *  5. Short reads (tcp_stream_set_short_read, on by default): a read that
 *     fills less than the buffer clears readable as EAGAIN would, saving
 *     the syscall that would have said so. Sound for a stream socket under
 *     edge-triggered epoll: new data after the read is a new edge.
 * Results: accept and connect give a struct tcp_stream_result; read and write
 * a ssize_t (bytes, or -errno); shutdown an int (0 or -errno).
 * Ownership: a stream or a listener is its owner's until tcp_stream_close /
 * tcp_listener_close (drop every future using it first). The reactor and
 * the time driver are borrowed.
 */
#ifndef LAB_TCP_H
#define LAB_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <netinet/in.h>

#include "future.h"
#include "reactor.h"
#include "sleep.h"
#include "time_driver.h"

struct tcp_listener;
struct tcp_stream;

struct tcp_stream_result {
    int err;                    /* 0, or -errno */
    struct tcp_stream *stream;  /* yours when err == 0 */
};

/* ---- listener --------------------------------------------------------------- */

/* A listening socket on ip:port (port 0: any), registered in r. td (may be
 * NULL) times accept's back-off. 0 and *out, or -errno. */
int tcp_listener_bind(struct reactor *r, struct time_driver *td, const char *ip, uint16_t port,
                      struct tcp_listener **out);
uint16_t tcp_listener_port(const struct tcp_listener *l);
void tcp_listener_close(struct tcp_listener *l);

struct tcp_accept {
    struct tcp_listener *l;
    struct sleep backoff;  /* armed while backing_off */
    bool backing_off;
};
struct tcp_accept tcp_accept(struct tcp_listener *l);
enum poll tcp_accept_poll(struct tcp_accept *a, struct context *cx, struct tcp_stream_result *out);
void tcp_accept_drop(struct tcp_accept *a);
struct future tcp_accept_future(struct tcp_accept *a);

/* ---- connect ------------------------------------------------------------------ */

struct tcp_connect {
    struct reactor *r;
    struct sockaddr_in addr;
    int err;              /* a bad address, found at tcp_connect */
    int fd;               /* -1 until the first poll */
    struct io_reg *reg;
};
struct tcp_connect tcp_connect(struct reactor *r, const char *ip, uint16_t port);
enum poll tcp_connect_poll(struct tcp_connect *c, struct context *cx, struct tcp_stream_result *out);
void tcp_connect_drop(struct tcp_connect *c);
struct future tcp_connect_future(struct tcp_connect *c);

/* ---- stream ------------------------------------------------------------------- */

/* One read: Ready with bytes (> 0), 0 at end of stream, or -errno. */
enum poll tcp_stream_poll_read(struct tcp_stream *s, struct context *cx, void *buf, size_t len, ssize_t *n);
/* One write: Ready with bytes written (> 0), or -errno. */
enum poll tcp_stream_poll_write(struct tcp_stream *s, struct context *cx, const void *buf, size_t len,
                                ssize_t *n);
/* Closes the write half (the peer reads end of stream). 0 or -errno. */
int tcp_stream_shutdown(struct tcp_stream *s);
/* Deregisters, closes, frees. */
void tcp_stream_close(struct tcp_stream *s);
int tcp_stream_fd(const struct tcp_stream *s);
void tcp_stream_set_short_read(struct tcp_stream *s, bool on);

struct tcp_read {
    struct tcp_stream *s;
    void *buf;
    size_t len;
};
struct tcp_read tcp_read(struct tcp_stream *s, void *buf, size_t len);
enum poll tcp_read_poll(struct tcp_read *rd, struct context *cx, ssize_t *out);
void tcp_read_drop(struct tcp_read *rd);
struct future tcp_read_future(struct tcp_read *rd);

struct tcp_write {
    struct tcp_stream *s;
    const void *buf;
    size_t len, done;
};
struct tcp_write tcp_write_all(struct tcp_stream *s, const void *buf, size_t len);
enum poll tcp_write_poll(struct tcp_write *wr, struct context *cx, ssize_t *out);
void tcp_write_drop(struct tcp_write *wr);
struct future tcp_write_future(struct tcp_write *wr);

/* shutdown(SHUT_WR) never blocks: Ready at the first poll. A future so that
 * it composes (a task's "write, then shut down" is two awaits). */
struct tcp_shutdown {
    struct tcp_stream *s;
};
struct tcp_shutdown tcp_shutdown(struct tcp_stream *s);
struct future tcp_shutdown_future(struct tcp_shutdown *sh);

/* ---- test hooks ---- */

/* The stream's or listener's registration (for reactor_test_token). */
struct io_reg *tcp_stream_test_reg(struct tcp_stream *s);
struct io_reg *tcp_listener_test_reg(struct tcp_listener *l);
/* accept syscalls the listener has made, failed ones included. */
uint64_t tcp_listener_test_accept_calls(struct tcp_listener *l);

#endif
