"""Hostile submissions, as a determined student would write them: each gets
exactly what its code earns (here: nothing, since none of them holds working
code of its own), and is refused by the static gate before any of its code
runs. Stage 01, where the attacks were first measured (issue 16)."""
import os

import pytest

from conftest import ROOT, grade

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


def inline_asm(tree):
    _append(tree, '\n#define CAT(a, b) a##b\nvoid signal_spin(void) { CAT(__as, m__)("nop"); }\n')


def hide_from_tsan(tree):
    _append(tree, "\n#ifdef __SANITIZE_THREAD__\nint signal_hidden;\n#endif\n")


def reads_environment(tree):
    _append(tree, '\nchar *getenv(const char *);\nconst char *signal_peek(void) { return getenv("LAB_NONCE"); }\n')


ATTACKS = [criterion_override, forged_end, constructor, include_reference, include_dev_zero, symlink_reference,
           inline_asm, hide_from_tsan, reads_environment]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.__name__ for a in ATTACKS])
def test_attack_is_refused(attack, tmp_path):
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree, symlinks=True)
    attack(tree)
    g = grade(tmp_path, tree, stage="1", timeout=300)
    assert g.score == 0, f"{attack.__name__} earned {g.score} points\n{g.output[-3000:]}"
    assert "refused by the grader's gate" in g.output, g.output[-3000:]
    assert g.seconds < 120, f"a refusal must be quick, took {g.seconds:.0f} s"


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
