"""The static gate: what a student's files and objects may be, checked before
anything of theirs runs. A refusal costs the stage (every item of it fails
with the refusal's one line), never the grading.

Before compiling (the source, as text):
  - every file is a regular file: no symlinks (a link to solutions/ or to
    /etc/shadow is not the student's work);
  - every #include names a file by a plain name ("x.h": the stage, an earlier
    stage or common/; <x.h>: the system), never an absolute path, a `..`,
    a macro, #include_next, or Criterion and the grader's test support;
  - no sanitizer or compiler-identity macro, and (in the preprocessed
    text) no attribute that turns a sanitizer off for a function: code
    must not hide from TSan.
The compiler itself runs in a root of its own that holds the stage folders,
common/ and the system's headers and nothing else (build.run_limited), so
whatever the text manages to include, it can only be one of those files.
After compiling, what the compiler did, in every variant (plain, TSan):
  - its assembly (gcc -save-temps): no inline assembly (gcc marks every
    asm statement #APP), no .incbin or .include, no section outside the
    compiler's own kinds (a section name can carry directives), no ifunc
    or unique symbol;
  - the preprocessed text is the same in every variant, but for what the
    handout's own copy of the file differs by (stage 07's fences under
    TSan): code under test cannot tell the lanes apart at compile time.
After compiling (the object, with nm and readelf):
  - it defines only names the stage's reference defines (its API), and
    file-local ones: never the harness's, Criterion's, the allocator's,
    the wrap hooks' or main; no ifunc (its resolver runs before any
    constructor) and no unique symbol;
  - it uses only the functions of an allowlist: common libc and pthread
    calls, the earlier stages' and common/'s APIs, and what the reference
    of the same stage uses (stage 06's sockets, say);
  - no constructor or destructor sections.
"""
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import subprocess
import threading

# libc and pthread calls any stage may make: memory, strings, locks and
# conditions, threads, printing for debugging, assertions. Not the clocks
# nor sleeping: a stage whose reference reads a clock (02's parker, 07's
# idle workers) may too, through the reference's own calls; elsewhere time
# comes from the driver, and code that could time the tests' forcing hooks
# could behave well only while they force (issue 25, class 7).
#
# Left out because a tool would not see through them (issue 25's fifth
# red-team pass, +6 of 23 on stage 01 with the two below and a spinlock):
# strdup and strndup allocate inside the C library, where the allocation
# counter's --wrap=malloc does not reach, so a state kept in one leaked
# unseen; the fortified __*_chk copies and rand_r are not intercepted by
# gcc 12's ThreadSanitizer, so a race read through __memcpy_chk went
# unreported (and _FORTIFY_SOURCE, defined by the code itself, would turn
# every memcpy into one).
ALWAYS = set("""
malloc calloc realloc free aligned_alloc posix_memalign
memset memcpy memmove memcmp memchr strlen strnlen strcmp strncmp strcpy strncpy strchr strrchr strstr
strerror strerror_r abort __assert_fail __stack_chk_fail __errno_location __tls_get_addr
printf fprintf vfprintf puts putchar fputs fputc fwrite fflush perror snprintf vsnprintf sprintf stderr stdout
pthread_create pthread_join pthread_detach pthread_self pthread_equal pthread_once
pthread_key_create pthread_key_delete pthread_getspecific pthread_setspecific
pthread_mutex_init pthread_mutex_destroy pthread_mutex_lock pthread_mutex_trylock pthread_mutex_unlock
pthread_mutex_timedlock pthread_mutexattr_init pthread_mutexattr_destroy pthread_mutexattr_settype
pthread_cond_init pthread_cond_destroy pthread_cond_wait pthread_cond_timedwait pthread_cond_clockwait
pthread_cond_signal pthread_cond_broadcast pthread_condattr_init pthread_condattr_destroy pthread_condattr_setclock
pthread_spin_init pthread_spin_destroy pthread_spin_lock pthread_spin_unlock pthread_spin_trylock
pthread_rwlock_init pthread_rwlock_destroy pthread_rwlock_rdlock pthread_rwlock_wrlock pthread_rwlock_unlock
sched_yield
rand random srand srandom qsort bsearch
_GLOBAL_OFFSET_TABLE_
""".split())
ATOMIC_LIBCALL = re.compile(r"^__(atomic|sync)_\w+$")
# names a student object may never define, whatever the reference does
NEVER_DEFINED = re.compile(r"^(main|lab_\w+|criterion_\w+|cr_\w+|__wrap_\w+|__real_\w+|_init|_fini|"
                           r"malloc|calloc|realloc|free|aligned_alloc|posix_memalign|memalign|valloc|pvalloc|"
                           r"_start|__libc_\w+|__tsan_\w+|__asan_\w+|__sanitizer_\w+|__ubsan_\w+)$")
CTOR_SECTIONS = (".init_array", ".fini_array", ".preinit_array", ".ctors", ".dtors", ".init", ".fini")
HIDING = re.compile(r"\b(__SANITIZE_THREAD__|__SANITIZE_ADDRESS__|__has_feature|__OPTIMIZE__|__has_include_next)\b")
ASM = re.compile(r"\b(asm|__asm__|__asm)\b")   # .incbin and raw syscalls need one
# attributes that take a function out of a sanitizer's sight, however spelled
# (no_sanitize("thread"), no_sanitize_thread, __no_sanitize_thread__,
# disable_sanitizer_instrumentation, no_instrument_function): with one, a
# racy function is compiled for the TSan lane without its checks
UNWATCHED = re.compile(r"\b\w*(sanitize|instrument)\w*\b", re.I)
FORBIDDEN_INCLUDES = re.compile(r"^(criterion/|lab_test\.h$|harness\.h$|wakers\.h$|measure\.h$|futures\.h$|"
                                r"virtual_clock\.h$|still_clock\.h$|store_buffer\.h$|alloc_count\.h$|wake_probe\.h$)")
MAX_SOURCE = 512 * 1024   # bytes in one student file


class Refused(Exception):
    """The one line that says what was refused and where."""


def logical_lines(text):
    """(line number, line) with backslash-newlines joined, trigraphs and the
    %: digraph turned into what the preprocessor sees."""
    text = text.replace("??=", "#").replace("??/", "\\")
    text = re.sub(r"(?m)^(\s*)%:", r"\1#", text)
    out, buf, start = [], "", None
    for no, line in enumerate(text.split("\n"), 1):
        if start is None:
            start = no
        if line.endswith("\\"):
            buf += line[:-1]
            continue
        out.append((start, buf + line))
        buf, start = "", None
    return out


def check_tree(stage_dir):
    """Refuses symlinks and anything but regular files in a stage folder."""
    for p in sorted(pathlib.Path(stage_dir).rglob("*")):
        if p.is_symlink():
            raise Refused(f"{p.name} is a symbolic link (to {p.readlink()}): hand in the file itself")
        if not p.is_file() and not p.is_dir():
            raise Refused(f"{p.name} is not a regular file")


def _hiding_blocks(text):
    """The conditional blocks (#if... to its #endif) whose condition names a
    hiding macro, each as its text; and the lines outside such blocks that
    name one."""
    lines = logical_lines(text)
    blocks, loose, k = [], [], 0
    while k < len(lines):
        no, line = lines[k]
        code = re.sub(r"//.*|/\*.*?\*/", " ", line)
        if HIDING.search(code):
            if re.match(r"^\s*#\s*if", code):
                depth, body = 0, []
                while k < len(lines):
                    body.append(lines[k][1].rstrip())
                    c = lines[k][1]
                    if re.match(r"^\s*#\s*if", c):
                        depth += 1
                    elif re.match(r"^\s*#\s*endif", c):
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                blocks.append((no, "\n".join(body)))
            else:
                loose.append((no, code.strip()))
        k += 1
    return blocks, loose


def check_source(path, handout=None):
    """The text checks of one student file (.c or .h). handout: the text of
    the same file as handed out, whose given conditional blocks on a
    sanitizer macro (stage 07's fences under TSan) may stay as given."""
    path = pathlib.Path(path)
    data = path.read_bytes()
    if len(data) > MAX_SOURCE:
        raise Refused(f"{path.name} is {len(data)} bytes; a source file of this lab is under {MAX_SOURCE // 1024} KiB")
    text = data.decode(errors="replace")
    for no, line in logical_lines(text):
        code = re.sub(r"/\*.*?\*/", " ", line)
        m = re.match(r"^\s*#\s*(include_next|include|import)\b\s*(.*)$", code)
        if m:
            what, arg = m.group(1), m.group(2).strip()
            if what != "include":
                raise Refused(f"{path.name}:{no}: #{what} is not allowed; use #include")
            q = re.match(r'^"([^"]*)"|^<([^>]*)>', arg)
            if not q:
                raise Refused(f"{path.name}:{no}: #include of a macro; name the header itself")
            name = q.group(1) if q.group(1) is not None else q.group(2)
            if name.startswith("/") or ".." in name.split("/") or "\\" in name:
                raise Refused(f"{path.name}:{no}: #include \"{name}\": a header is named by a plain name, never by a "
                              "path (the stage, the earlier stages, common/ and the system are on the include path)")
            if q.group(1) is not None and "/" in name:
                raise Refused(f"{path.name}:{no}: #include \"{name}\": a quoted header is a file of the stage, an "
                              "earlier stage or common/, named without a folder")
            if FORBIDDEN_INCLUDES.match(name):
                raise Refused(f"{path.name}:{no}: #include {name}: the grader's test support is not for the code "
                              "under test")
    blocks, loose = _hiding_blocks(text)
    given_blocks, given_loose = _hiding_blocks(handout) if handout is not None else ([], [])
    for mine, given, why in ((blocks, given_blocks, " (only the handout's own blocks may)"), (loose, given_loose, "")):
        allowed = [b for _, b in given]
        for no, part in mine:
            if part not in allowed:
                raise Refused(f"{path.name}:{no}: {HIDING.search(part).group(1)}: code under test must not change "
                              f"with the tool that checks it{why}")
            allowed.remove(part)


# the sections gcc itself makes of C code: a name outside these came from
# __attribute__((section)), whose text gcc copies into the assembly as it is
SECTION = re.compile(r"^\.(text|data|bss|rodata|tbss|tdata|data\.rel\.ro|data\.rel|debug_\w+)(\.[\w.]+)?$|"
                     r"^\.note\.[\w.-]+$|^\.comment$")   # .note.gnu.property: Ubuntu's gcc (-fcf-protection)
TSAN_CTOR = re.compile(r"^\.init_array\.\d+$")   # -fsanitize=thread's own module constructor
TSAN_CTOR_ENTRY = re.compile(r"^\s*\.quad\s+_sub_I_\d+_\d+\s*$")


# Directives that put bytes of the file's choosing where they stand. In an
# executable section they are machine code written as data: a `static const`
# array given __attribute__((section(".text"))) and called through a cast ran
# raw system calls, cleared the trap flag under a single-stepped count, and
# carried the reference's own compiled objects (issue 25, red-team pass 6:
# 10 of 46 and 18 of 36 points for skeletons). gcc puts no data in an
# executable section of C code (x86-64 jump tables go in .rodata).
DATA = frozenset((".byte", ".2byte", ".4byte", ".8byte", ".short", ".value", ".word", ".hword", ".int", ".long",
                  ".quad", ".octa", ".ascii", ".asciz", ".string", ".string8", ".string16", ".string32",
                  ".string64", ".zero", ".skip", ".space", ".fill", ".float", ".single", ".double", ".sleb128",
                  ".uleb128", ".dc", ".dc.b", ".dc.w", ".dc.l", ".dc.a", ".ds", ".reloc"))


def _executable(directive):
    """Whether the section a .section/.pushsection line (or a bare .text,
    .data, .bss) switches to holds code: named .text*, or flagged x."""
    parts = directive.split(None, 1)
    keyword = parts[0].lower()
    if keyword in (".text", ".data", ".bss"):
        return keyword == ".text"
    args = parts[1] if len(parts) > 1 else ""
    name = args.split(",", 1)[0].strip().strip('"')
    flags = re.search(r',\s*"([^"]*)"', args)
    return name.startswith(".text") or bool(flags and "x" in flags.group(1))


def check_assembly(text, source_name, variant):
    """What the compiler made of one student file (its .s), in one variant."""
    where = f"{source_name} ({'as compiled for TSan' if variant == 'tsan' else 'as compiled'})"
    section = None
    executable, stack, previous = True, [], False   # as's first section is .text
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#APP"):
            raise Refused(f"{where}: inline assembly is not allowed in this lab")
        # as reads directives and mnemonics in any case (.INCBIN, .TEXT, RDTSC)
        word = stripped.split(None, 1)[0].lower() if stripped else ""
        if word in (".text", ".data", ".bss", ".section", ".pushsection"):
            if word == ".pushsection":
                stack.append(executable)
            previous, executable = executable, _executable(stripped)
        elif word == ".popsection":
            previous, executable = executable, stack.pop() if stack else False
        elif word == ".previous":
            previous, executable = executable, previous
        elif executable and (word in DATA or word.startswith(".dc.")):
            raise Refused(f"{where}: data ({word}) in a section of code: bytes placed where instructions run "
                          "(a section attribute put them there); the lab's code is C, compiled")
        if word in ("rdtsc", "rdtscp", "rdpid", "rdrand", "rdseed", "cpuid", "syscall", "sysenter", "int",
                    "pushf", "pushfq", "pushfw", "popf", "popfq", "popfw"):
            raise Refused(f"{where}: the instruction {word}, which C code of this lab has no use for (a clock "
                          "read behind the grader's back, a system call, or the flags word, which tells a "
                          "single-stepped count from a plain run)")
        if word in (".incbin", ".include", ".macro", ".irp", ".irpc", ".rept", ".purgem"):
            raise Refused(f"{where}: the assembly has a {word} directive, which C code of this lab never makes "
                          "(a section name or an asm statement put it there)")
        if word in (".section", ".pushsection"):
            section = stripped.split(None, 1)[1].split(",")[0].strip() if " " in stripped or "\t" in stripped else ""
            if SECTION.match(section):
                continue
            if variant == "tsan" and TSAN_CTOR.match(section):
                continue
            raise Refused(f"{where}: a section named {section[:40]!r}: the lab's code goes in the compiler's own "
                          "sections (no __attribute__((section)), no constructors)")
        if section is not None and TSAN_CTOR.match(section) and word == ".quad" and not TSAN_CTOR_ENTRY.match(line):
            raise Refused(f"{where}: a constructor that is not the sanitizer's own")
        if word == ".type" and any(k in stripped.lower() for k in ("gnu_indirect_function", "stt_gnu_ifunc",
                                                                   "gnu_unique_object", "stt_gnu_unique")):
            raise Refused(f"{where}: an ifunc or unique symbol ({stripped[:60]}): its resolver would run before "
                          "any test")


def _code_lines(text):
    """A preprocessed text's code lines: no line markers, no blank lines
    (where the preprocessor skipped a block it leaves markers and blanks
    that depend on the file's layout, not on its code)."""
    return [x for x in text.splitlines() if x.strip() and not re.match(r"^#\s*\d+\s", x)]


def lane_difference(plain, tsan):
    """The chunks (plain lines, TSan lines) in which two preprocessed texts
    of one file differ."""
    import difflib
    a, b = _code_lines(plain), _code_lines(tsan)
    return [(tuple(a[i1:i2]), tuple(b[j1:j2]))
            for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if op != "equal"]


def check_lanes_agree(source_name, plain, tsan, handout_chunks):
    """The student's file preprocessed for the plain and the TSan lane
    differs only where the handout's own copy of it does."""
    allowed = list(handout_chunks)
    for chunk in lane_difference(plain, tsan):
        if chunk in allowed:
            allowed.remove(chunk)
            continue
        shown = (chunk[1] or chunk[0] or ("",))[0].strip()[:60]
        raise Refused(f"{source_name}: the code compiled for TSan differs from the code compiled for the other "
                      f"lanes ({shown!r}): code under test must not change with the tool that checks it")


# Constructs no stage of the lab needs, which forging a grade does: the
# binary's own structures, the stack's return addresses, the dynamic
# linker's lists. Not refused (a name is no boundary, and a student may
# have a reason), but put before the instructor beside the score.
REVIEW_HEADERS = ("elf.h", "link.h", "dlfcn.h", "sys/auxv.h", "execinfo.h", "sys/ptrace.h", "ucontext.h",
                  "setjmp.h", "sys/mman.h", "sys/syscall.h")
REVIEW_WORDS = re.compile(r"\b(Elf(?:32|64)_\w+|ElfW|dl_iterate_phdr|dladdr1?|dlsym|dlvsym|dlopen|dlinfo|getauxval|"
                          r"_r_debug|r_debug|link_map|__builtin_frame_address|__builtin_return_address|"
                          r"__builtin_extract_return_addr|__builtin_longjmp|__builtin_setjmp|_DYNAMIC|__ehdr_start|"
                          r"__executable_start|etext|edata|__environ|environ|setjmp|longjmp|sigsetjmp|siglongjmp|"
                          r"mprotect|process_vm_readv|process_vm_writev|ptrace|syscall)\b")
REVIEW_STRINGS = re.compile(r'"[^"]*(/proc/self|/proc/\d|\\177ELF|\\x7fELF|/dev/mem)[^"]*"')


def review(text, student_files):
    """What the instructor should read in one student file, from the text
    the compiler compiled (its .i): a header from REVIEW_HEADERS, a
    REVIEW_WORDS name or a REVIEW_STRINGS string in the student's own
    lines, a #line directive (it makes the student's lines look like
    another file's). Each once, in order."""
    names = {pathlib.Path(f).name for f in student_files}
    found, entered = [], set()
    mine = False
    for line in text.splitlines():
        m = re.match(r'^# (\d+) "([^"]*)"((?: \d)*)$', line)
        if m:
            name, flags = m.group(2), m.group(3).split()
            is_student = pathlib.Path(name).name in names and not name.startswith("/usr/")
            if "1" in flags:
                entered.add(name)
                header = next((h for h in REVIEW_HEADERS if name.endswith("/" + h)), None)
                if header and mine:
                    found.append(f"includes <{header}>")
            elif name not in entered and not name.startswith("<") and not is_student and len(entered) > 0:
                found.append(f"a #line directive (naming {name[:60]})")
                is_student = True
            mine = is_student
            continue
        if mine:
            code = re.sub(r'"(\\.|[^"\\])*"', lambda q: q.group(0) if REVIEW_STRINGS.match(q.group(0)) else '""',
                          line)
            for w in REVIEW_WORDS.finditer(code):
                found.append(f"uses {w.group(1)}")
            for q in REVIEW_STRINGS.finditer(code):
                found.append(f"the string {q.group(0)[:40]}")
    return list(dict.fromkeys(found))


def check_preprocessed(text, student_files):
    """No inline assembly and no attribute that hides code from a sanitizer
    in the lines of the student's own files, after macros are expanded (gcc
    -E output, its line markers telling whose line each is)."""
    mine = False
    no = 0
    names = {pathlib.Path(f).name for f in student_files}
    for line in text.splitlines():
        m = re.match(r'^# (\d+) "([^"]*)"', line)
        if m:
            no = int(m.group(1))
            mine = pathlib.Path(m.group(2)).name in names and not m.group(2).startswith("/usr/")
            continue
        if mine:
            code = re.sub(r'"(\\.|[^"\\])*"', '""', line)
            a = ASM.search(code)
            if a:
                raise Refused(f"line {no}: inline assembly ({a.group(0)}) is not allowed in this lab")
            u = UNWATCHED.search(code)
            if u:
                raise Refused(f"line {no}: {u.group(0)} takes code out of the sanitizers' sight; "
                              "not allowed in this lab")
        no += 1


_NM = {}                     # (object, its size and mtime, flags) -> its symbols: a grading of stage 07
_NM_LOCK = threading.Lock()  # reads the same reference objects for every stage of its closure (protects _NM)


def _nm(obj, *flags, kept_dir=None):
    """{symbol: type} as nm -P prints them; kept in memory and in kept_dir
    (a directory of the build the assembler names; never beside the object:
    the shipped reference objects are grader files the integrity check
    fingerprints), keyed by the object's path, size and mtime, so the
    mutants of a later stage read each reference object once."""
    obj = pathlib.Path(obj)
    st = obj.stat()
    stamp = [st.st_size, st.st_mtime_ns]
    key = (str(obj), *stamp, flags)
    with _NM_LOCK:
        if key in _NM:
            return dict(_NM[key])
    kept = (pathlib.Path(kept_dir) / (hashlib.sha256(repr(key).encode()).hexdigest()[:24] + ".json")
            if kept_dir else None)
    syms = None
    try:
        data = json.loads(kept.read_text()) if kept else {}
        if data.get("key") == repr(key):
            syms = data["symbols"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    if syms is None:
        out = subprocess.run(["nm", "-P", *flags, str(obj)], capture_output=True, text=True, timeout=60).stdout
        syms = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 2:
                syms[f[0]] = f[1]
        if kept:
            try:
                kept.parent.mkdir(parents=True, exist_ok=True)
                tmp = kept.with_name(f".{kept.name}.{os.getpid()}.{threading.get_ident()}")
                tmp.write_text(json.dumps({"key": repr(key), "symbols": syms}))
                tmp.replace(kept)
            except OSError:
                pass   # nm again next time
    with _NM_LOCK:
        _NM[key] = syms
    return dict(syms)


def defined_globals(objs, kept_dir=None):
    out = set()
    for o in objs:
        out |= {s for s, t in _nm(o, "--defined-only", kept_dir=kept_dir).items() if t.isupper()}
    return out


def undefined(objs, kept_dir=None):
    out = set()
    for o in objs:
        out |= set(_nm(o, "--undefined-only", kept_dir=kept_dir))
    return out


@dataclasses.dataclass
class Allowed:
    """What a stage's student objects may define and use."""
    defines: set
    uses: set

    @property
    def digest(self):
        h = hashlib.sha256(" ".join(sorted(self.defines)).encode() + b"|" + " ".join(sorted(self.uses)).encode())
        return h.hexdigest()[:12]


def allowed(reference_objs, earlier_objs, common_objs, kept_dir=None):
    api = defined_globals(reference_objs, kept_dir)
    uses = (ALWAYS | undefined(reference_objs, kept_dir) | api | defined_globals(earlier_objs, kept_dir) |
            defined_globals(common_objs, kept_dir))
    return Allowed(api, uses)


def check_object(obj, source_name, allow, variant="plain", kept_dir=None, check_calls=True):
    """Refused unless the object defines only its stage's API and calls
    only what `allow` lets it. check_calls=False (LAB_GATE_CALLS=0, from the
    grader's environment, which no submission can set): the self-tests of
    the jail (test_sandbox.py) turn the call allowlist off, to show what the
    sandbox does with code that got past it."""
    for sym, kind in sorted(_nm(obj, "--defined-only", kept_dir=kept_dir).items()):
        if kind in ("i", "u"):
            raise Refused(f"{source_name} defines `{sym}` as an {'ifunc' if kind == 'i' else 'unique'} symbol: its "
                          "resolver would run before any test")
        if not kind.isupper():
            continue
        if NEVER_DEFINED.match(sym) or sym not in allow.defines:
            raise Refused(f"{source_name} defines `{sym}`, which is not a function of this stage's API: make a "
                          "helper of your own static; the grader's, Criterion's and the allocator's names are theirs")
    for sym in sorted(_nm(obj, "--undefined-only", kept_dir=kept_dir)):
        if (sym in allow.uses or ATOMIC_LIBCALL.match(sym) or not check_calls) and not (
                sym.startswith("lab_") and sym != "lab_todo"):
            continue
        if variant == "tsan" and sym.startswith("__tsan_"):
            continue   # the sanitizer's instrumentation
        if sym.startswith("lab_") and sym != "lab_todo":
            raise Refused(f"{source_name} uses `{sym}`, which belongs to the grader's harness: code under test "
                          "only ever calls lab_todo (through LAB_TODO)")
        raise Refused(f"{source_name} uses `{sym}`, which this stage's code has no reason to call (the grader "
                      "allows the libc and pthread calls of the lab, and the earlier stages' and common/'s APIs)")
    out = subprocess.run(["readelf", "-S", "-W", str(obj)], capture_output=True, text=True, timeout=60).stdout
    for sec in CTOR_SECTIONS:
        if variant == "tsan" and sec == ".init_array":
            continue   # the sanitizer's own constructor (check_assembly saw that it is the only one)
        if re.search(rf"\s{re.escape(sec)}(\.\S*)?\s", out):
            raise Refused(f"{source_name} has a {sec} section: no constructors or destructors (code that runs "
                          "before or after the tests)")
