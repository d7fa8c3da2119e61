/* uring_tcp.h - stage 08: TCP on the ring, as futures.
 *
 *   struct uring_listener *l;  uring_listener_bind(r, "127.0.0.1", 0, &l);
 *   struct uring_accept a = uring_accept(l);            poll: a new stream
 *   struct uring_read rd = uring_read(s, buf, len);     poll: bytes read, 0 at end of stream
 *   struct uring_write wr = uring_write_all(s, buf, n); poll: n, once all are sent
 *   struct uring_recv rv = uring_recv(s, buf, len);     poll: bytes, from the stream's multishot receive
 *
 * Stage 06's futures did the syscall themselves when the reactor said it
 * would not block. These start an operation on the ring (ring.h) and wait
 * for its completion: the kernel does the syscall. A read's bytes land in
 * the operation's own buffer, and the future copies them into the caller's
 * when it is polled Ready; a write sends from the operation's copy. The
 * caller's memory is never the kernel's, so a future can be dropped at any
 * moment: what the kernel may still write belongs to the ring.
 *
 * The contract (docs/08-uring.md#async-tcp-on-the-ring):
 *  1. Pending only with an operation in the ring that will wake the
 *     latest poller (ring.h contract 5).
 *  2. Dropping a pending read or write drops its operation (ring.h
 *     contract 1: an orphan until its last CQE); the caller's buffer is
 *     never written after the drop.
 *  3. The listener keeps one multishot accept on the ring from its first
 *     accept's poll until it is closed (ring.h contract 2): every accept
 *     future takes the next connection the kernel completed. The kernel
 *     may end the accept (a CQE without IORING_CQE_F_MORE); its last CQE
 *     is handed out like the ones before it: a descriptor is a stream, an
 *     error of the accept (-EMFILE, ...) is the accept future's answer,
 *     and only -ECANCELED, -EINTR and -EAGAIN, which say the accept
 *     stopped and nothing about the listener, are not handed out. The
 *     next accept that needs a connection then starts a new multishot
 *     accept, once nothing more will come of the old one (ring_op_done).
 *     Closing the listener drops that operation: connections the kernel
 *     completes after are closed by the ring.
 *  4. End of stream is a read of 0; errors are -errno (a reset:
 *     -ECONNRESET; writing to a closed peer -EPIPE or -ECONNRESET, never a
 *     SIGPIPE: MSG_NOSIGNAL). write_all sends the rest after a partial
 *     send until all len bytes are sent.
 *  5. A stream keeps one multishot receive with provided buffers on the
 *     ring from its first uring_recv's poll until it is closed or the
 *     stream ends (ring.h contracts 2, 6): every uring_recv takes the
 *     next bytes it received, in order; dropping a uring_recv leaves it
 *     receiving. Closing the stream drops that operation. Use uring_read
 *     or uring_recv on a stream, not both.
 * Ownership: streams and listeners are their owner's until closed (drop
 * their futures first); the ring is borrowed.
 */
#ifndef LAB_URING_TCP_H
#define LAB_URING_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "future.h"
#include "ring.h"

struct uring_listener;
struct uring_stream;

struct uring_stream_result {
    int err;                      /* 0, or -errno */
    struct uring_stream *stream;  /* yours when err == 0 */
};

/* A listening socket on ip:port (port 0: any). 0 and *out, or -errno. */
int uring_listener_bind(struct ring *r, const char *ip, uint16_t port, struct uring_listener **out);
uint16_t uring_listener_port(const struct uring_listener *l);
void uring_listener_close(struct uring_listener *l);

struct uring_accept {
    struct uring_listener *l;
};
struct uring_accept uring_accept(struct uring_listener *l);
enum poll uring_accept_poll(struct uring_accept *a, struct context *cx, struct uring_stream_result *out);
void uring_accept_drop(struct uring_accept *a);
struct future uring_accept_future(struct uring_accept *a);

/* A stream over a connected socket fd (taken: closed by uring_stream_close). */
struct uring_stream *uring_stream_new(struct ring *r, int fd);
void uring_stream_close(struct uring_stream *s);
int uring_stream_fd(const struct uring_stream *s);

struct uring_read {
    struct uring_stream *s;
    void *dst;           /* the caller's: written only by poll */
    size_t len;
    ring_op_id op;       /* 0 until the first poll */
};
struct uring_read uring_read(struct uring_stream *s, void *dst, size_t len);
/* Ready with bytes (> 0, copied to dst), 0 at end of stream, or -errno. */
enum poll uring_read_poll(struct uring_read *rd, struct context *cx, ssize_t *out);
void uring_read_drop(struct uring_read *rd);
struct future uring_read_future(struct uring_read *rd);

struct uring_write {
    struct uring_stream *s;
    const void *src;     /* copied into the operation's buffer at the first poll */
    size_t len, done;
    ring_op_id op;
};
struct uring_write uring_write_all(struct uring_stream *s, const void *src, size_t len);
/* Ready with len once all are sent, or -errno. */
enum poll uring_write_poll(struct uring_write *wr, struct context *cx, ssize_t *out);
void uring_write_drop(struct uring_write *wr);
struct future uring_write_future(struct uring_write *wr);

/* Provided buffers of a stream's multishot receive. */
#define URING_RECV_BUFS 8u
#define URING_RECV_BUF_SIZE 4096u

struct uring_recv {
    struct uring_stream *s;
    void *dst;           /* the caller's: written only by poll */
    size_t len;          /* > 0 */
};
struct uring_recv uring_recv(struct uring_stream *s, void *dst, size_t len);
/* Ready with bytes (> 0, at most len, copied to dst), 0 at end of stream
 * (and at every poll after it), or -errno (contract 5). */
enum poll uring_recv_poll(struct uring_recv *rv, struct context *cx, ssize_t *out);
void uring_recv_drop(struct uring_recv *rv);
struct future uring_recv_future(struct uring_recv *rv);

/* ---- test hooks ---- */

/* The listener's multishot accept operation (0 before the first poll). */
ring_op_id uring_listener_test_op(struct uring_listener *l);
/* The stream's multishot receive (0 before the first uring_recv poll and after the end). */
ring_op_id uring_stream_test_recv_op(struct uring_stream *s);

#endif
