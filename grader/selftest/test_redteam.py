"""Hostile submissions, as a determined student would write them: each gets
exactly what its code earns (here: nothing, since none of them holds working
code of its own), and is refused by the static gate before any of its code
runs. Stage 01, where the attacks were first measured (issue 16)."""
import os
import pathlib

import pytest

from conftest import ROOT, CpuPressure, assert_quick, grade, solutions_copy

SIGNAL = "01-signal"


def _append(tree, text, name="signal.c"):
    with open(tree / SIGNAL / name, "a") as f:
        f.write(text)


def criterion_override(tree):
    _append(tree, "\nvoid criterion_send_assert(void *a) { (void)a; }\nvoid criterion_abort_test(void) {}\n")


def forged_end(tree):
    _append(tree, "\nvoid lab_test_end(void);\nvoid signal_forge(void) { lab_test_end(); _exit(0); }\n")


def constructor(tree):
    _append(tree, "\nstatic volatile int ran;\n__attribute__((constructor(101))) static void early(void) { ran = 1; }\n")


def include_reference(tree):
    (tree / SIGNAL / "signal.c").write_text('#include "../../solutions/01-signal/signal.c"\n')


def include_dev_zero(tree):
    (tree / SIGNAL / "signal.c").write_text('#include "/dev/zero"\n')


def symlink_reference(tree):
    (tree / SIGNAL / "signal.c").unlink()
    os.symlink(ROOT / "solutions" / SIGNAL / "signal.c", tree / SIGNAL / "signal.c")


def symlinked_stage_folder(tree):
    import shutil
    shutil.rmtree(tree / SIGNAL)
    os.symlink(ROOT / "solutions" / SIGNAL, tree / SIGNAL)


def inline_asm(tree):
    _append(tree, '\n#define CAT(a, b) a##b\nvoid signal_spin(void) { CAT(__as, m__)("nop"); }\n')


def hide_from_tsan(tree):
    _append(tree, "\n#ifdef __SANITIZE_THREAD__\nint signal_hidden;\n#endif\n")


def reads_environment(tree):
    _append(tree, '\nchar *getenv(const char *);\nconst char *signal_peek(void) { return getenv("LAB_NONCE"); }\n')


def incbin_behind_a_line_marker(tree):
    """#line makes the next lines look like a system header's to a reading
    of the text; the compiler's assembly still marks the asm statement."""
    _append(tree, '\n#line 1 "/usr/include/stdio.h"\n__asm__(".incbin \\"/usr/include/stdio.h\\"");\n')


def directive_in_a_section_name(tree):
    """gcc copies a section name into its assembly as it is: a newline in it
    starts a directive of the student's choosing."""
    _append(tree, '\n__attribute__((section(".data\\n.incbin \\"/usr/include/stdio.h\\"\\n#"), used))\n'
                  'static int blob = 1;\n')


def ifunc_resolver(tree):
    """An ifunc's resolver runs while the program is being loaded, before any
    constructor; a file-local one has a lower-case kind in nm."""
    _append(tree, "\nstatic int real(void) { return 0; }\nstatic void *pick(void) { return (void *)real; }\n"
                  "static int chosen(void) __attribute__((ifunc(\"pick\")));\n"
                  "static int (*keep)(void) __attribute__((used)) = chosen;\n")


def hide_from_tsan_by_pasting(tree):
    """A sanitizer macro no reading of the text finds: pasted together
    inside #if, where macros expand. The plain lane's code and the TSan
    lane's differ, which the gate sees in the compiler's own output."""
    _append(tree, "\n#define CAT(a, b) a##b\n#if CAT(__SANITIZE_, THREAD__)\n"
                  "static int only_under_tsan __attribute__((used));\n#endif\n")


def times_the_forcing_hooks(tree):
    """A clock read to tell a forced interleaving (a hook that waits) from a
    plain run: stage 01's code has no clock of its own to read."""
    _append(tree, "\n#include <time.h>\nstatic long elapsed(void)\n{\n    struct timespec t;\n"
                  "    clock_gettime(CLOCK_MONOTONIC, &t);\n    return t.tv_nsec;\n}\n"
                  "static long (*keep_elapsed)(void) __attribute__((used)) = elapsed;\n")


def reads_the_cycle_counter(tree):
    """The same with a compiler builtin, which calls nothing: the assembly
    shows the instruction."""
    _append(tree, "\nstatic unsigned long long now(void) { return __builtin_ia32_rdtsc(); }\n"
                  "static unsigned long long (*keep_now)(void) __attribute__((used)) = now;\n")


def reads_the_flags_word(tree):
    """The trap flag tells a query single-stepped for its instruction count
    (stage 05's next-expiration-o-levels) from a plain run; a builtin reads
    it without an asm statement, and the assembly shows pushf."""
    _append(tree, "\nstatic unsigned long long flags(void) { return __builtin_ia32_readeflags_u64(); }\n"
                  "static unsigned long long (*keep_flags)(void) __attribute__((used)) = flags;\n")


def anchors_on_the_harness_data(tree):
    """The independent red-team's forge started from &lab_todo_record_fd,
    which common/lab_todo.h declares: an address in the harness's data,
    from which the masked nonce lies at fixed offsets."""
    _append(tree, '\n#include "lab_todo.h"\nstatic const void *anchor(void) { return &lab_todo_record_fd; }\n'
                  "static const void *(*keep_anchor)(void) __attribute__((used)) = anchor;\n")


def out_of_the_sanitizers_sight(tree):
    """An attribute compiles a function for the TSan lane without its checks:
    a race in it goes unseen. Spelled through a macro, which the
    preprocessed text has expanded."""
    _append(tree, '\n#define QUIET __attribute__((no_sanitize("thread")))\n'
                  "QUIET static int peek(const int *p) { return *p; }\n"
                  "static int (*keep_peek)(const int *) __attribute__((used)) = peek;\n")


def machine_code_in_the_text_section(tree):
    """A byte array placed among the instructions and called through a
    cast runs any machine code (red-team pass 6: raw system calls, the trap
    flag cleared, the reference's own objects lifted in as bytes)."""
    _append(tree, '\nstatic const unsigned char ret_blob[] __attribute__((section(".text.unlikely"))) = { 0xc3 };\n'
                  "static void run_blob(void) { ((void (*)(void))(const void *)ret_blob)(); }\n"
                  "static void (*keep_blob)(void) __attribute__((used)) = run_blob;\n")


def machine_code_in_a_section_flagged_executable(tree):
    """The same bytes in a section with a data name and the x flag, spelled
    into the name (gcc copies it as it is)."""
    _append(tree, '\nstatic unsigned char rwx_blob[] __attribute__((section(".data,\\"awx\\"#"))) = { 0xc3 };\n'
                  "static void run_rwx(void) { ((void (*)(void))(void *)rwx_blob)(); }\n"
                  "static void (*keep_rwx)(void) __attribute__((used)) = run_rwx;\n")


def directive_in_capitals(tree):
    """as reads directives and mnemonics in any case: .INCBIN is .incbin,
    .TEXT is .text, RDTSC is rdtsc (seen by a reading of the gate, not yet by
    a student)."""
    _append(tree, '\n__attribute__((section(".data\\n.INCBIN \\"/usr/include/stdio.h\\"\\n#"), used))\n'
                  'static int blob2 = 1;\n')


ATTACKS = [criterion_override, forged_end, constructor, include_reference, include_dev_zero, symlink_reference,
           symlinked_stage_folder,
           inline_asm, hide_from_tsan, reads_environment, incbin_behind_a_line_marker, directive_in_a_section_name,
           ifunc_resolver, times_the_forcing_hooks, reads_the_cycle_counter, reads_the_flags_word,
           anchors_on_the_harness_data, out_of_the_sanitizers_sight, machine_code_in_the_text_section,
           machine_code_in_a_section_flagged_executable, directive_in_capitals]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.__name__ for a in ATTACKS])
def test_attack_is_refused(attack, tmp_path):
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree, symlinks=True)
    attack(tree)
    pressure = CpuPressure()
    g = grade(tmp_path, tree, stage="1", timeout=300)
    assert g.score == 0, f"{attack.__name__} earned {g.score} points\n{g.output[-3000:]}"
    assert "refused by the grader's gate" in g.output, g.output[-3000:]
    assert_quick(g.seconds, 120, "a refusal", pressure)


def test_a_hostile_header_is_not_compiled_into_the_tests(tmp_path):
    """A signal.h that turns every assertion into nothing: the grader's
    tests use the handout's signal.h, so the skeleton's code still earns 0
    and the report says the header was not used."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "labs", tree)
    _append(tree, "\n#undef cr_assert\n#define cr_assert(...) ((void)0)\n#undef cr_assert_eq\n"
                  "#define cr_assert_eq(...) ((void)0)\n", name="signal.h")
    g = grade(tmp_path, tree, stage="1", timeout=300)
    assert g.score == 0, g.output[-3000:]
    assert "your signal.h differs from the handout's" in g.output, g.output[-3000:]


def test_a_tampered_given_file_is_graded_from_the_handout(tmp_path):
    """Stage 07's channel_given.c has no part of the student's: a tree whose
    copy of it would not even compile grades as the reference does, from the
    handout's copy, and the report says the student's copy was not used."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    (tree / "07-work-stealing" / "channel_given.c").write_text("#error this copy must never be compiled\n")
    g = grade(tmp_path, tree, stage="7", items=["channel"], timeout=600)
    item = g.item("07-work-stealing/channel")
    assert item["score"] == item["max_score"] > 0, g.output[-3000:]
    assert "your channel_given.c differs from the handout's" in g.output, g.output[-3000:]


def test_code_hidden_from_tsan_loses_the_tsan_item(tmp_path):
    """Code that the TSan build compiles differently: the TSan item is
    refused (the other items grade the plain lane's code, which is the
    reference's), and the report says why."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    hide_from_tsan_by_pasting(tree)
    g = grade(tmp_path, tree, stage="1", items=["tsan-races"], timeout=300)
    item = g.item("01-signal/tsan-races")
    assert item["score"] == 0, g.output[-3000:]
    assert "differs from the code compiled for the other lanes" in g.output, g.output[-3000:]


def _spliced_include(path):
    """An #include the text's reader does not see: a comment spans the
    line break between `#` and `include`."""
    return f'# /*\n*/ include "{path}"\n'


def test_an_include_sees_only_the_submission(tmp_path):
    """However an #include is spelled, the compiler runs in a root that
    holds the stage folders, common/ and the system's headers: the
    reference and a file only root may read are not there to be read."""
    import shutil
    secret = tmp_path / "secret.h"
    secret.write_text("TOPSECRET_7f3a value\n")
    os.chmod(secret, 0o600)
    for target in (ROOT / "solutions" / SIGNAL / "signal.c", secret):
        tree = tmp_path / f"tree-{target.name}"
        shutil.copytree(ROOT / "labs", tree)
        (tree / SIGNAL / "signal.c").write_text(_spliced_include(target))
        g = grade(tmp_path, tree, stage="1", items=["pending-registers"], timeout=300)
        assert g.score == 0, f"{target}: {g.output[-3000:]}"
        assert "TOPSECRET" not in g.output, g.output[-3000:]


def test_an_included_c_file_is_part_of_the_cache_key(tmp_path):
    """signal.c that only includes impl.c: graded after a tree whose
    signal.c is the same but whose impl.c works, the skeleton's impl.c
    still earns nothing (the object cache is keyed by every file the
    compiler could read, not by the headers alone)."""
    import shutil
    trees = {}
    for name, impl in (("works", ROOT / "solutions"), ("stub", ROOT / "labs")):
        tree = tmp_path / name
        shutil.copytree(ROOT / "labs", tree)
        shutil.copyfile(impl / SIGNAL / "signal.c", tree / SIGNAL / "impl.c")
        (tree / SIGNAL / "signal.c").write_text('#include "impl.c"\n')
        trees[name] = tree
    works = grade(tmp_path, trees["works"], stage="1", items=["pending-registers"], timeout=300)
    assert works.score > 0, works.output[-3000:]
    stub = grade(tmp_path, trees["stub"], stage="1", items=["pending-registers"], timeout=300)
    assert stub.score == 0, stub.output[-3000:]


def test_constructs_no_stage_needs_are_put_before_the_instructor(tmp_path):
    """The binary's own structures and the stack's frame addresses are what
    a forged grade walks; no stage needs them. Such code is not refused (a
    list of names is no boundary) but listed beside the score: a hidden
    entry of no points in results.json (the instructor's alone on
    Gradescope) and a line in the report; the score is what the code
    earns. The reference's own files put nothing there."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    _append(tree, "\n#include <elf.h>\nstatic unsigned long walk(void)\n{\n"
                  "    const Elf64_Ehdr *e = __builtin_frame_address(0);\n    return (unsigned long)e;\n}\n"
                  "static unsigned long (*keep_walk)(void) __attribute__((used)) = walk;\n")
    g = grade(tmp_path, tree, stage="1", items=["pending-registers"], timeout=300)
    assert g.score == 1, g.output[-3000:]
    review = [t for t in g.results["tests"] if t["number"] == f"{SIGNAL}/review"]
    assert len(review) == 1 and review[0]["visibility"] == "hidden" and review[0]["max_score"] == 0, g.results
    for what in ("includes <elf.h>", "uses Elf64_Ehdr", "uses __builtin_frame_address"):
        assert what in review[0]["output"], review[0]["output"]
    assert "for your instructor to read" in g.output, g.output[-3000:]
    clean = grade(tmp_path, solutions_copy(tmp_path), stage="1", items=["pending-registers"], timeout=300)
    assert not [t for t in clean.results["tests"] if t["number"].endswith("/review")], clean.results


def test_student_text_in_a_todo_or_a_seed_record_is_not_shown(tmp_path):
    """lab_todo's text and the SEED record are the student's to write: a
    TODO text that is not the skeleton's (here: a marker standing for the
    hidden tests' strings read out of the binary) is not shown, and a seed
    that is not a number never reaches the printed rerun command."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "labs", tree)
    src = tree / SIGNAL / "signal.c"
    text = src.read_text()
    assert 'LAB_TODO("allocate one shared' in text
    src.write_text(text.replace('LAB_TODO("allocate one shared', 'LAB_TODO("LEAKED-7f3a allocate one shared', 1))
    g = grade(tmp_path, tree, stage="1", items=["pending-registers"], timeout=300)
    assert g.score == 0, g.output[-3000:]
    assert "LEAKED-7f3a" not in g.output and "LEAKED-7f3a" not in str(g.results), g.output[-3000:]
    assert "not the skeleton's (not shown)" in g.output, g.output[-3000:]
    from lab_grader import records
    runs = records.parse("BEGIN 7 s::t\nSEED 7 1; touch /tmp/x\nEND 7 s::t n\n")
    assert runs[0].seed == "", runs[0].seed


def test_a_failed_check_resumed_at_its_passing_branch_still_fails(tmp_path):
    """The red team's hook on the failure path (issue 25): broken code that
    points Criterion's first call of every failed check (through its
    writable GOT slot) at a function of its own, which returns to the
    check's passing branch, so the body goes on and ends as a pass. It
    earned 6 of 24 where the same code earns 3. Now the GOT is read-only
    (-z now) and the seal refuses to change the executable's image, so the
    hook is never set: its write crashes the code that makes it; and had it
    been set, every failed check sends its FAIL on the grader's channel
    before that call (lab_check_failed). These items are the ones the hook
    had won; pending-registers, the one the code earns without the hook,
    is lost to that crash."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "labs", tree)
    shutil.copyfile(pathlib.Path(__file__).parent / "data" / "redteam" / "resume_failed_checks.c",
                    tree / SIGNAL / "signal.c")
    won = ["explored-check-register", "wake-outside-every-lock", "drop-future-cancels"]
    g = grade(tmp_path, tree, stage="1", items=["pending-registers", *won], timeout=300)
    assert g.score <= 1, g.output[-3000:]
    assert all(g.item(f"{SIGNAL}/{i}")["score"] == 0 for i in won), g.output[-3000:]


def test_no_allowed_call_hides_work_from_the_tools():
    """The fifth red-team pass (handout only) hid a leak in strndup's memory
    (allocated inside the C library, out of the allocation counter's reach)
    and a race behind __memcpy_chk (not intercepted by gcc 12's
    ThreadSanitizer): neither is a call any stage may make now. The
    fortified copies are what _FORTIFY_SOURCE turns memcpy and printf into,
    so code that defines it is refused too."""
    from lab_grader import gate
    hidden = {"strdup", "strndup", "rand_r"} | {n for n in gate.ALWAYS if n.endswith("_chk")}
    assert hidden & gate.ALWAYS <= {"__stack_chk_fail"}, sorted(hidden & gate.ALWAYS)
