#!/bin/sh
# deps.sh - make sure what `make bench` needs is installed (Debian/Ubuntu),
# in the style of grader/deps.sh: installs the missing packages when it can
# (root, or passwordless sudo); otherwise prints the one apt-get line to run
# and fails.
#
# Tokio comes from the distribution only: librust-tokio-dev unpacks Tokio and
# every crate it needs under /usr/share/cargo/registry, and bench/tokio builds
# offline against that directory (bench/tokio/.cargo/config.toml). Nothing is
# downloaded from crates.io. cargo and rustc are taken from the machine when
# they are there (any recent toolchain), else from the distribution's cargo.
# The timer benchmark builds Tokio's "time" feature from the same directory
# (bench/tokio-time) and links libuv from libuv1-dev. The echo benchmark
# builds Tokio's "net" and "io-util" the same way (bench/tokio-echo), links
# libuv again, and uses strace and taskset.
set -u
need=""
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v cargo >/dev/null 2>&1 || need="$need cargo"
ls -d /usr/share/cargo/registry/tokio-1.* >/dev/null 2>&1 || need="$need librust-tokio-dev"
# the timer benchmark's libuv side (libuv's timers: uv_timer_start/stop)
[ -e /usr/include/uv.h ] || need="$need libuv1-dev"
# stage 07's table: oneTBB's task_arena beside Tokio's multi_thread runtime
[ -e /usr/include/oneapi/tbb/task_group.h ] || need="$need libtbb-dev"
# the echo benchmark: taskset pins server and client, strace counts syscalls
command -v taskset >/dev/null 2>&1 || need="$need util-linux"
command -v strace >/dev/null 2>&1 || need="$need strace"
# the HTTP benchmark (make -C bench http): http_parser on both sides, and
# ab, wrk and h2load as the clients
[ -e /usr/include/http_parser.h ] || need="$need libhttp-parser-dev"
command -v ab >/dev/null 2>&1 || need="$need apache2-utils"
command -v wrk >/dev/null 2>&1 || need="$need wrk"
command -v h2load >/dev/null 2>&1 || need="$need nghttp2-client"
[ -z "$need" ] && exit 0

echo "missing:$need" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends$need" >&2
    exit 1
fi
echo "installing:$need" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2 || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $need >&2 || {
    echo "apt-get failed; run: sudo apt-get install -y --no-install-recommends$need" >&2
    exit 1
}
