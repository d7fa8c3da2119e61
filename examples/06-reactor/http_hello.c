/* http_hello.c - a small HTTP/1.1 server on the lab's runtime.
 *
 *   http_hello [port [timeout_ms]]      then: curl http://127.0.0.1:PORT/
 *
 * Every well-formed request gets "hello, world" (HEAD: the same head, no
 * body). It is small, but it is the first program of the lab that meets
 * real clients (ab, wrk, h2load, curl, a browser), and real clients hold a
 * server to the protocol. What it keeps:
 *
 *  - Parsing is the distribution's http_parser (libhttp-parser-dev, the
 *    parser Node.js used for a decade, itself derived from nginx's; its
 *    authors now develop llhttp instead, which Debian 12 does not package,
 *    while Debian keeps http_parser patched): a streaming state machine
 *    that takes the bytes as they come, in any split, and calls us back
 *    per piece. Hand-written HTTP parsing is where request smuggling
 *    comes from; a lab example should not teach it.
 *  - Keep-alive as HTTP says: HTTP/1.1 keeps the connection unless the
 *    request says "Connection: close"; HTTP/1.0 closes it unless the
 *    request says "Connection: keep-alive" (the parser matches the header
 *    case-insensitively, token lists included). The answer says which:
 *    "Connection: close" when this is the last answer, "Connection:
 *    keep-alive" when the client asked for it.
 *  - Pipelined requests are answered in order, and every answer to the
 *    requests of one read goes out in one write (one send for the batch,
 *    not one per request: that is what h2load -m16 measures).
 *  - Bodies (Content-Length or chunked) are read and thrown away, never
 *    taken for requests; past BODY_MAX the answer is 413.
 *  - Bad input gets an answer and a close, never a hang: 400 for a request
 *    the parser rejects or an HTTP/1.1 request without exactly one Host,
 *    431 for a head over HEAD_MAX bytes, 505 for a version other than 1.x,
 *    408 for a request not complete within the timeout.
 *  - Timeouts, from stage 05's sleep: a request must arrive whole within
 *    timeout_ms (default 10 s) of the moment the server starts waiting for
 *    it, and an answer must be taken by the client within as long. An idle
 *    keep-alive connection is closed after timeout_ms. Without this, clients
 *    that send half a request and stop hold their descriptors forever: at
 *    the usual limit of 1,024 descriptors, 1,100 of them lock everyone out.
 *
 * One task per connection, a hand-written state machine of three phases:
 *
 *   READING --(read, parse: answers queued)--> WRITING --(all written)--> READING
 *      |                                          |
 *      |  timeout, half a request: 408            |  the last answer written
 *      v                                          v
 *   (close) <--(end of stream, or a while)-- LINGERING
 *
 * LINGERING is the "lingering close" of Apache and nginx: after the last
 * answer, shut our write half down and read (and drop) what the client
 * still sends for a short while, then close. Closing at once with unread
 * bytes in the socket makes the kernel send a reset, and a reset can
 * destroy the answer in the client's receive buffer before the client has
 * read it: the client would see "connection reset" instead of the 431.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <http_parser.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

enum {
    IN_BUF = 16384,          /* one read */
    OUT_BUF = 16384,         /* one write: the answers of a batch */
    RESPONSE_MAX = 256,      /* the longest answer we queue: room is kept for one more */
    HEAD_MAX = 8192,         /* request line and headers; more: 431 */
    BODY_MAX = 1 << 20,      /* a body we read and drop; more: 413 */
    LINGER_MAX = 1 << 16,    /* bytes we drop while lingering before we close anyway */
};
#define NS_PER_MS UINT64_C(1000000)
#define LINGER_NS (1000 * NS_PER_MS) /* at most this long lingering (or the timeout, if shorter) */

static uint64_t timeout_ns = 10000 * NS_PER_MS;

/* ---- the answers --------------------------------------------------------- */

#define OK_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
#define OK_BODY "hello, world\n"
#define KEEP "Connection: keep-alive\r\n"
#define CLOSE "Connection: close\r\n"

struct text {
    const char *s;
    size_t n;
};
#define TEXT(lit) { lit, sizeof lit - 1 }

/* The answer to a good request, by [connection header][HEAD?]: precomputed,
 * so the fast path is one memcpy per request. */
enum conn_hdr { CONN_NONE, CONN_KEEP, CONN_CLOSE };
static const struct text OK[3][2] = {
    [CONN_NONE] = { TEXT(OK_HEAD "\r\n" OK_BODY), TEXT(OK_HEAD "\r\n") },
    [CONN_KEEP] = { TEXT(OK_HEAD KEEP "\r\n" OK_BODY), TEXT(OK_HEAD KEEP "\r\n") },
    [CONN_CLOSE] = { TEXT(OK_HEAD CLOSE "\r\n" OK_BODY), TEXT(OK_HEAD CLOSE "\r\n") },
};

static const char *reason(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* ---- the connection ------------------------------------------------------- */

enum phase { READING, WRITING, LINGERING };

struct http_conn {
    struct tcp_stream *st;        /* ours: closed by http_drop */
    struct time_driver *td;       /* borrowed, for the deadline */
    char *in, *out;               /* one allocation, IN_BUF + OUT_BUF; ours */
    size_t in_pos, in_have;       /* in[in_pos, in_have): read, not yet parsed */
    size_t out_len;               /* out[0, out_len): answers queued */
    enum phase phase;
    bool started;                 /* the first poll has run (the struct is in the task by then) */
    bool close_after;             /* the last answer is queued: parse no more */
    bool mid_request;             /* a request has begun and is not complete */
    bool head_only;               /* the current request is HEAD */
    size_t lingered;              /* bytes dropped while LINGERING */

    /* the parser and what its callbacks learn about the current request */
    http_parser p;
    int error;                    /* 0, or the status a callback chose (400, 413, 505) */
    unsigned host_seen;           /* Host headers in this request */
    int host_match;               /* bytes of "host" matched in this field name; -1: not Host */
    bool in_value;                /* the last callback was a header value */
    uint64_t body_bytes;

    /* The deadline, and the one timer that enforces it. The timer is armed
     * lazily: moving the deadline later (every answered request does) only
     * writes deadline_ns; a timer that fires before the deadline re-arms at
     * it. So a busy keep-alive connection costs one wheel insert per timeout
     * period, not one insert and one cancel per request. */
    uint64_t deadline_ns;
    struct sleep timer;           /* armed: in the wheel, holding our waker */
    uint64_t armed_ns;            /* the deadline the armed timer is set for */
    bool armed;

    struct tcp_write wr;          /* while WRITING: out[0, out_len) */
};

/* ---- parser callbacks: they see one request's pieces, in order ----------- */

static int on_message_begin(http_parser *p)
{
    struct http_conn *c = p->data;
    c->mid_request = true;
    c->host_seen = 0;
    c->host_match = 0;
    c->in_value = false;
    c->body_bytes = 0;
    return 0;
}

/* A header name may come in pieces (it may straddle two reads), so "is this
 * Host?" is matched a byte at a time across calls, case-insensitively. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (c->in_value) { /* a field after a value: a new header begins */
        c->in_value = false;
        c->host_match = 0;
    }
    for (size_t i = 0; i < len && c->host_match >= 0; i++)
        c->host_match = c->host_match < 4 && tolower((unsigned char)at[i]) == "host"[c->host_match]
                            ? c->host_match + 1
                            : -1;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    (void)at;
    (void)len;
    struct http_conn *c = p->data;
    if (!c->in_value) { /* the first piece of this value: the name is whole */
        c->in_value = true;
        if (c->host_match == 4)
            c->host_seen++;
    }
    return 0;
}

/* Returning nonzero (other than 1) makes the parser stop with
 * HPE_CB_headers_complete; c->error says which answer to give. */
static int on_headers_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->head_only = p->method == HTTP_HEAD;
    if (p->http_major != 1)
        c->error = 505;
    else if (p->http_minor >= 1 && c->host_seen != 1)
        c->error = 400; /* RFC 9112 3.2: a 1.1 request has exactly one Host */
    else if ((p->flags & F_CONTENTLENGTH) && p->content_length > BODY_MAX)
        c->error = 413; /* said before the body comes: answer before it does */
    return c->error ? -1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    (void)at;
    struct http_conn *c = p->data;
    c->body_bytes += len;
    if (c->body_bytes > BODY_MAX) { /* chunked: the length is learnt as it comes */
        c->error = 413;
        return -1;
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->mid_request = false;
    /* http_should_keep_alive: 1.1 unless "close", 1.0 only with "keep-alive".
     * An Upgrade or a CONNECT makes the parser stop after this message (what
     * follows is another protocol); we do not switch, so we close. */
    bool keep = http_should_keep_alive(p) && !p->upgrade;
    enum conn_hdr h = !keep ? CONN_CLOSE : (p->flags & F_CONNECTION_KEEP_ALIVE) ? CONN_KEEP : CONN_NONE;
    const struct text *t = &OK[h][c->head_only];
    memcpy(c->out + c->out_len, t->s, t->n);
    c->out_len += t->n;
    if (!keep)
        c->close_after = true;
    /* Pausing makes http_parser_execute return just after this message:
     * for a close, what follows is not to be parsed; for a full batch, it
     * is parsed once the batch is written. */
    if (!keep || c->out_len + RESPONSE_MAX > OUT_BUF)
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* An error answer, queued after the answers before it, and the end. */
static void queue_error(struct http_conn *c, int status)
{
    const char *why = reason(status);
    int n = snprintf(c->out + c->out_len, OUT_BUF - c->out_len,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n" CLOSE "\r\n%s\n",
                     status, why, strlen(why) + 1, why);
    if (n > 0 && (size_t)n < OUT_BUF - c->out_len)
        c->out_len += (size_t)n; /* always: RESPONSE_MAX of room is kept free */
    c->close_after = true;
}

/* Runs the parser over the unparsed input; answers go to out. */
static void parse(struct http_conn *c)
{
    size_t n = http_parser_execute(&c->p, &settings, c->in + c->in_pos, c->in_have - c->in_pos);
    c->in_pos += n;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
    if (e == HPE_PAUSED)
        http_parser_pause(&c->p, 0); /* we paused it (on_message_complete) */
    else if (e != HPE_OK)
        queue_error(c, c->error ? c->error : e == HPE_HEADER_OVERFLOW ? 431 : 400);
    if (c->close_after || c->in_pos == c->in_have)
        c->in_pos = c->in_have = 0; /* all parsed, or nothing more to parse */
}

/* ---- the deadline ------------------------------------------------------------ */

static void set_deadline(struct http_conn *c, uint64_t from_now_ns)
{
    c->deadline_ns = time_driver_now(c->td) + from_now_ns;
}

/* Called where the task would return Pending: makes sure the timer will
 * wake it by the deadline. True when the deadline has passed instead. */
static bool deadline_passed(struct http_conn *c, struct context *cx)
{
    for (;;) {
        if (c->armed && c->armed_ns > c->deadline_ns) { /* the deadline moved earlier */
            sleep_drop(&c->timer);
            c->armed = false;
        }
        if (!c->armed) {
            /* the struct is in the task (it never moves), so the wheel may point into it */
            c->timer = sleep_until(c->td, c->deadline_ns);
            c->armed_ns = c->deadline_ns;
            c->armed = true;
        }
        if (sleep_poll(&c->timer, cx) == POLL_PENDING)
            return false; /* the timer holds our waker */
        sleep_drop(&c->timer);
        c->armed = false;
        if (c->armed_ns >= c->deadline_ns)
            return true;
        /* fired for an old deadline: the connection made progress since; re-arm */
    }
}

static void start_writing(struct http_conn *c)
{
    c->wr = tcp_write_all(c->st, c->out, c->out_len);
    c->phase = WRITING;
    set_deadline(c, timeout_ns); /* the client must take the answers within the timeout */
}

static void start_lingering(struct http_conn *c)
{
    tcp_stream_shutdown(c->st); /* the client reads end of stream after our last answer */
    c->phase = LINGERING;
    set_deadline(c, timeout_ns < LINGER_NS ? timeout_ns : LINGER_NS);
}

/* ---- the task ------------------------------------------------------------------ */

static enum poll http_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct http_conn *c = self;
    if (!c->started) {
        /* Not in on_stream: the spawn copied the struct into the task, and
         * the parser's back pointer must point at the copy. */
        c->started = true;
        http_parser_init(&c->p, HTTP_REQUEST);
        c->p.data = c;
        set_deadline(c, timeout_ns);
    }
    for (;;) {
        ssize_t n;
        switch (c->phase) {
        case READING:
            if (c->in_pos < c->in_have) { /* input left over from a paused parse */
                parse(c);
                if (c->out_len > 0)
                    start_writing(c);
                continue;
            }
            if (tcp_stream_poll_read(c->st, cx, c->in, IN_BUF, &n) == POLL_PENDING) {
                if (!deadline_passed(c, cx))
                    return POLL_PENDING;
                if (!c->mid_request)
                    return POLL_READY; /* idle keep-alive connection: close quietly */
                queue_error(c, 408);
                start_writing(c);
                continue;
            }
            if (n <= 0)
                return POLL_READY; /* end of stream (half a request is dropped) or an error */
            c->in_pos = 0;
            c->in_have = (size_t)n;
            parse(c);
            if (c->out_len > 0)
                start_writing(c);
            continue;

        case WRITING:
            if (tcp_write_poll(&c->wr, cx, &n) == POLL_PENDING) {
                if (!deadline_passed(c, cx))
                    return POLL_PENDING;
                return POLL_READY; /* the client does not read its answers: give up */
            }
            c->out_len = 0;
            if (n < 0)
                return POLL_READY;
            if (c->close_after) {
                start_lingering(c);
                continue;
            }
            c->phase = READING;
            set_deadline(c, timeout_ns); /* the next request: within the timeout */
            continue;

        case LINGERING: {
            /* c->in is free now: drop what the client still sends into it */
            if (tcp_stream_poll_read(c->st, cx, c->in, IN_BUF, &n) == POLL_PENDING)
                return deadline_passed(c, cx) ? POLL_READY : POLL_PENDING;
            if (n <= 0)
                return POLL_READY; /* the client closed too: now a close sends no reset */
            c->lingered += (size_t)n;
            if (c->lingered > LINGER_MAX)
                return POLL_READY;
            continue;
        }
        }
    }
}

static void http_drop(void *self)
{
    struct http_conn *c = self;
    if (c->armed)
        sleep_drop(&c->timer);
    if (c->phase == WRITING)
        tcp_write_drop(&c->wr);
    tcp_stream_close(c->st);
    free(c->in);
}

static const struct future_vtable http_vt = FUTURE_VTABLE_INIT(struct http_conn, 0, http_poll, http_drop);

static void on_stream(struct runtime *rt, struct tcp_stream *st)
{
    struct http_conn c = { .st = st, .td = rt->td, .in = malloc(IN_BUF + OUT_BUF), .phase = READING };
    if (!c.in) {
        tcp_stream_close(st);
        return;
    }
    c.out = c.in + IN_BUF;
    runtime_spawn(rt, future_of(&http_vt, &c));
}

int main(int argc, char **argv)
{
    if (argc > 2)
        timeout_ns = (uint64_t)strtoull(argv[2], NULL, 10) * NS_PER_MS;
    /* http_parser's limit on the request line and headers together, for
     * every parser of the process (431 past it: HPE_HEADER_OVERFLOW) */
    http_parser_set_max_header_size(HEAD_MAX);
    return runtime_serve(argc > 1 ? atoi(argv[1]) : 0, on_stream);
}
