/* threads.c - the trace recorder under ThreadSanitizer (test_trace.py):
 * four threads record polls and wakes of shared tasks (cross-thread wake
 * arrows) and name themselves, while the main thread writes the file twice
 * in the middle of it. Built with -DLAB_TRACE -fsanitize=thread. */
#include <pthread.h>
#include <stdio.h>

#include "trace.h"

#define THREADS 4
#define ROUNDS 3000

static struct trace_task tasks[THREADS];

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "worker %d", me);
    trace_thread_name(name);
    for (int i = 0; i < ROUNDS; i++) {
        struct trace_poll p = trace_poll_begin(&tasks[me], false);
        trace_wake_begin(&tasks[(me + 1) % THREADS], true); /* wakes its neighbour */
        trace_wake_end();
        trace_poll_end(p);
        if (i % 500 == 0) {
            trace_park_begin(1000);
            trace_park_end(false);
            trace_unpark();
            trace_steal((uint32_t)((me + 1) % THREADS), 1);
        }
    }
    return NULL;
}

int main(void)
{
    for (int i = 0; i < THREADS; i++) {
        trace_spawn_site(__FILE__, __LINE__);
        trace_task_spawn(&tasks[i], "shared");
    }
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    trace_write(); /* while they record */
    trace_write();
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    return 0; /* written once more at exit */
}
