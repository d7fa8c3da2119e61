/* echo_server_mt.c - examples/06-reactor/echo_server.c, unchanged, on the
 * work-stealing runtime (mt_runtime.h): the same connection tasks, now
 * polled by WORKERS threads (default 2), with epoll_wait run by whichever
 * worker is idle.
 *
 *   echo_server_mt [port [connections]]      WORKERS=n in the environment
 *
 *   make -C examples/07-work-stealing
 *   build/echo_server_mt 7000 &  ../06-reactor/build/load_client 127.0.0.1 7000 100 1000 64
 */
#include "mt_runtime.h"

#include "../06-reactor/echo_server.c"
