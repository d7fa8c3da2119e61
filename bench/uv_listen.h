/* The loopback listener both libuv servers of the bench use (echo/echo_uv.c,
 * http/http_uv.c): binds 127.0.0.1 on the port in argv[1] (0: any), listens,
 * prints the port as the lab's servers do, and runs the loop. */
#ifndef BENCH_UV_LISTEN_H
#define BENCH_UV_LISTEN_H

#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

static int uv_listen_loopback_and_run(uv_loop_t *loop, int argc, char **argv, uv_connection_cb on_connection)
{
    static uv_tcp_t server;
    uv_tcp_init(loop, &server);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", argc > 1 ? atoi(argv[1]) : 0, &addr);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0) < 0 ||
        uv_listen((uv_stream_t *)&server, 1024, on_connection) < 0) {
        fprintf(stderr, "bind/listen failed\n");
        return 1;
    }
    struct sockaddr_in bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len);
    printf("listening on 127.0.0.1:%u\n", (unsigned)ntohs(bound.sin_port));
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}

#endif
