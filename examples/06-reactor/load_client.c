/* load_client.c - drives an echo server and measures it.
 *
 *   load_client HOST PORT CONNECTIONS ROUND_TRIPS SIZE     (HOST: a name or an address)
 *
 * Opens CONNECTIONS connections, then on each one, ROUND_TRIPS times: sends
 * SIZE bytes and waits until SIZE bytes have come back (checking them). All
 * connections run at once, each with one message in flight. Prints
 *
 *   round_trips N
 *   seconds S
 *   rt_per_s R
 *   p50_us X
 *   p99_us Y
 *
 * Latency is from the first byte sent to the last byte received, per round
 * trip. This is plain C over level-triggered epoll, not the lab's runtime:
 * it must load every server the same way.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct client {
    int fd;
    unsigned done;        /* round trips finished */
    size_t sent, got;     /* of the current message */
    uint64_t start;       /* ns, when the current message's first byte went */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sends what is left of the current message; returns false on a hard error. */
static int send_some(struct client *c, const unsigned char *msg, size_t size)
{
    while (c->sent < size) {
        ssize_t n = send(c->fd, msg + c->sent, size - c->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN)
                return 1; /* the rest when the socket has room: rare, a few KB into an empty buffer */
            return 0;
        }
        c->sent += (size_t)n;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s HOST PORT CONNECTIONS ROUND_TRIPS SIZE\n", argv[0]);
        return 2;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *addr;
    int gai = getaddrinfo(argv[1], argv[2], &hints, &addr);
    if (gai != 0) {
        fprintf(stderr, "%s:%s: %s\n", argv[1], argv[2], gai_strerror(gai));
        return 2;
    }
    unsigned nconn = (unsigned)atoi(argv[3]), rounds = (unsigned)atoi(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    if (nconn == 0 || rounds == 0 || size == 0)
        return 2;
    unsigned char *msg = malloc(size), *buf = malloc(size);
    struct client *cs = calloc(nconn, sizeof *cs);
    uint64_t *lat = malloc(sizeof *lat * (size_t)nconn * rounds);
    if (!msg || !buf || !cs || !lat)
        die("malloc");
    for (size_t i = 0; i < size; i++)
        msg[i] = (unsigned char)(i * 131 + 7);
    int ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1");
    for (unsigned i = 0; i < nconn; i++) {
        int fd = socket(addr->ai_family, SOCK_STREAM, 0);
        if (fd < 0)
            die("socket");
        if (connect(fd, addr->ai_addr, addr->ai_addrlen) < 0)
            die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        cs[i].fd = fd;
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
    size_t nlat = 0;
    unsigned active = nconn;
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < nconn; i++) {
        cs[i].start = now_ns();
        if (!send_some(&cs[i], msg, size))
            die("send");
    }
    struct epoll_event evs[256];
    while (active > 0) {
        int n = epoll_wait(ep, evs, 256, 5000);
        if (n == 0) {
            fprintf(stderr, "no answer from the server for 5 s\n");
            return 1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            struct client *c = &cs[evs[k].data.u32];
            if (!send_some(c, msg, size))
                die("send");
            ssize_t r = recv(c->fd, buf, size - c->got, 0);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                fprintf(stderr, "connection %u: %s\n", evs[k].data.u32, r == 0 ? "closed by the server" : strerror(errno));
                return 1;
            }
            if (memcmp(buf, msg + c->got, (size_t)r) != 0) {
                fprintf(stderr, "connection %u: the echo differs from what was sent\n", evs[k].data.u32);
                return 1;
            }
            c->got += (size_t)r;
            if (c->got < size)
                continue;
            lat[nlat++] = now_ns() - c->start;
            c->got = c->sent = 0;
            if (++c->done == rounds) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                active--;
                continue;
            }
            c->start = now_ns();
            if (!send_some(c, msg, size))
                die("send");
        }
    }
    uint64_t t = now_ns() - t0;
    qsort(lat, nlat, sizeof *lat, cmp_u64);
    printf("round_trips %zu\nseconds %.6f\nrt_per_s %.0f\np50_us %.1f\np99_us %.1f\n", nlat, t / 1e9,
           nlat / (t / 1e9), lat[nlat / 2] / 1e3, lat[(nlat * 99) / 100] / 1e3);
    return 0;
}
