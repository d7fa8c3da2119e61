/* raw_sockets.h - the test's own side of a connection (stages 06 and 08):
 * plain sockets, outside the runtime under test, to send, receive, connect
 * and reset from where a peer would. */
#ifndef LAB_TEST_RAW_SOCKETS_H
#define LAB_TEST_RAW_SOCKETS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lab_test.h"

/* A non-blocking AF_UNIX stream socketpair. */
static inline void nb_socketpair(int sv[2])
{
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0,
                 "socketpair failed in the test itself: %s", strerror(errno));
}

/* A blocking client connected to 127.0.0.1:port. */
static inline int raw_connect_rcvbuf(uint16_t port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0, "socket failed in the test itself: %s", strerror(errno));
    /* before connect: the window the handshake announces follows it */
    if (rcvbuf > 0)
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0, "SO_RCVBUF failed in the "
                     "test itself: %s", strerror(errno));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "the test's client could not connect to "
                 "127.0.0.1:%u: %s", (unsigned)port, strerror(errno));
    return fd;
}

static inline int raw_connect(uint16_t port) { return raw_connect_rcvbuf(port, 0); }

/* A port on 127.0.0.1 where nothing listens (bound, then closed). */
static inline uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0, "could not find a free port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

/* Sends everything (on a non-blocking socket too: waits for room); false
 * on error. */
static inline bool raw_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd pf = { .fd = fd, .events = POLLOUT };
            poll(&pf, 1, 100);
            continue;
        }
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads until len bytes, the end of the stream, or timeout_ms without a
 * byte; the number of bytes read. */
static inline size_t raw_recv_all(int fd, void *buf, size_t len, unsigned timeout_ms)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, (int)timeout_ms) <= 0)
            break;
        ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

/* Closes with a reset (SO_LINGER 0). */
static inline void raw_close_reset(int fd)
{
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* A byte of a seeded pattern. */
static inline unsigned char pattern_byte(uint64_t seed, size_t i)
{
    uint64_t x = seed + i * UINT64_C(0x9E3779B97F4A7C15);
    x ^= x >> 29;
    return (unsigned char)(x * UINT64_C(0xBF58476D1CE4E5B9) >> 56);
}

/* The reading end of a long write (pthread_create(..., drain_peer_run, &d)
 * with fd, total and seed set): reads at most 1000 bytes at a time until
 * total bytes or the end of the stream, and checks each byte against
 * pattern_byte(seed, its place). */
struct drain_peer {
    int fd;
    size_t total;
    uint64_t seed;
    size_t got;
    size_t bad_at;       /* the first byte out of place, or total */
    unsigned char bad, want;
};

static inline void *drain_peer_run(void *arg)
{
    struct drain_peer *d = arg;
    unsigned char buf[1000];
    d->bad_at = d->total;
    while (d->got < d->total) {
        size_t want = d->total - d->got < sizeof buf ? d->total - d->got : sizeof buf;
        ssize_t k = recv(d->fd, buf, want, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        for (ssize_t i = 0; i < k && d->bad_at == d->total; i++)
            if (buf[i] != pattern_byte(d->seed, d->got + (size_t)i)) {
                d->bad_at = d->got + (size_t)i;
                d->bad = buf[i];
                d->want = pattern_byte(d->seed, d->got + (size_t)i);
            }
        d->got += (size_t)k;
    }
    return NULL;
}

#endif
