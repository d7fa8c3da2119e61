/* driver.c - what every real-time driver shares. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "driver.h"

uint64_t driver_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}
