"""Step 5 of a grading: what each item earned, from the outcomes of its tests
(or, for a quiz item, from the student's answers against the key).

  passed       every test of the item passed
  not judged   every failing test says nothing of the code (too slow to
               judge, or the test itself could not measure here)
  failed       otherwise; the summary speaks of the first failing test
"""
from . import quiz
from .outcomes import NOT_JUDGED_VERDICTS, ItemResult, Outcome, Status, Verdict

BUILD_WORDS = {"missing": "missing file", "link": "did not link", "grader": "grader error",
               "refused": "refused by the grader's gate"}


def not_built(item, error):
    what = BUILD_WORDS.get(error.kind, "did not compile")
    said = error.first if error.kind in ("link", "not-submitted") else f"{what}: {error.first}"
    return ItemResult(item, Status.FAILED, 0, said, build_error=error)


def from_outcomes(item, outcomes):
    bad = [o for o in outcomes if not o.passed]
    if not bad:
        return ItemResult(item, Status.PASSED, item.points, "passed")
    if all(o.verdict in NOT_JUDGED_VERDICTS for o in bad):
        return ItemResult(item, Status.NOT_JUDGED, 0, f"{bad[0].test}: {bad[0].message}", outcome=bad[0])
    first = bad[0]
    summary = f"{first.test}: {first.message}" if first.verdict != Verdict.NOT_STARTED else first.message
    return ItemResult(item, Status.FAILED, 0, summary, outcome=first)


def from_race(item, done, runs, bad, failing=None):
    """A race item: `done` runs made of `runs`, stopped at the first failing
    one (bad: its outcome, or None), or, with `failing`, every run made
    (LAB_RACE_RUNS=n) and that many failed."""
    if bad is None:
        return ItemResult(item, Status.PASSED, item.points, f"passed {done} of {done} runs")
    r = from_outcomes(item, [bad])
    if bad.verdict == Verdict.NOT_STARTED:   # a function not written yet fails every run alike
        return r
    r.summary = (f"failed on run {done} of {runs}: {r.summary}" if failing is None else
                 f"failed {failing} of {done} runs: {r.summary}")
    return r


def left_to_make_grade(item):
    return ItemResult(item, Status.NOT_JUDGED, 0,
                      f"the {item.lane} lane is left to `make grade` (make check is the quick pass)", deferred=True)


def out_of_time(item):
    return ItemResult(item, Status.NOT_JUDGED, 0, "not judged: the grading ran out of its time budget before this "
                      "item was done (BUDGET=); grade this stage again on its own")


MACHINE = "cannot judge on this machine"   # the self-tests' sign of a verdict the machine made (conftest)
NEEDS_CPUS = "CPU(s), the item needs"       # in too_few_cpus's summary, and in nothing else


def too_few_cpus(item, share):
    """An item that needs more CPUs than the grading has (rubric `cpus`:
    its affinity or cgroup quota, machine.share())."""
    need = (f"{item.cpus:g}, to time the test beside its helpers on cores of their own" if item.cpus > 1 else
            f"{item.cpus:g}: a quota below it pauses the test in the middle of what it times")
    return ItemResult(item, Status.NOT_JUDGED, 0, f"{MACHINE}: it gives this grading {share:g} {NEEDS_CPUS} {need}")


INSTRUCTOR = "your instructor marks this item"


def from_quiz(item, key_file, answers_file, hashed_file=None):
    """A quiz item: the student's answers (TARGET/stage/quiz.toml) against
    the key (the reference's quiz.toml). The key never travels in the
    handout in clear: there, quiz items are left to the instructor, and
    the key's hash (hashed_file, quiz.HASHED) says only how many answers
    of the group are wrong, as feedback that scores nothing."""
    if not key_file.exists():
        return _from_hashed_quiz(item, answers_file, hashed_file)
    if answers_file.is_symlink() or (answers_file.exists() and not answers_file.is_file()):
        return ItemResult(item, Status.FAILED, 0, f"{answers_file.name} is not a regular file: hand in the file itself")
    try:
        key = quiz.load(key_file)
        answers = quiz.load(answers_file) if answers_file.exists() else {}
    except quiz.QuizError as e:
        return ItemResult(item, Status.FAILED, 0, str(e))
    verdict = quiz.score(item.tests, answers, key)
    if verdict is None:
        return ItemResult(item, Status.PASSED, item.points, "passed")
    kind, text = verdict
    outcome = Outcome(test=f"quiz::{item.id}", verdict=Verdict.NOT_STARTED if kind == "blank" else Verdict.FAIL,
                      message=text)
    return ItemResult(item, Status.FAILED, 0, text, outcome=outcome)


def _from_hashed_quiz(item, answers_file, hashed_file):
    """Not judged (the instructor's points), with the feedback the hashed
    key allows: how many of the group's answers are wrong."""
    if hashed_file is None or not hashed_file.is_file():
        return ItemResult(item, Status.NOT_JUDGED, 0, "graded by your instructor (the answer key is not in the handout)")
    if answers_file.is_symlink() or (answers_file.exists() and not answers_file.is_file()):
        return ItemResult(item, Status.NOT_JUDGED, 0, f"{INSTRUCTOR}; {answers_file.name} is not a regular file, "
                          "so no feedback: hand in the file itself")
    try:
        groups = quiz.load_hashed(hashed_file)
        if item.id not in groups:
            raise quiz.QuizError(f"{hashed_file.name} has no group {item.id}")
        answers = quiz.load(answers_file) if answers_file.exists() else {}
        verdict = quiz.score_hashed(item.tests, answers, groups[item.id])
    except quiz.QuizError as e:
        return ItemResult(item, Status.NOT_JUDGED, 0, f"{INSTRUCTOR}; no feedback: {e}")
    if verdict is None:
        text = f"all {len(item.tests)} answers of this group agree with the hashed key; {INSTRUCTOR}"
    else:
        text = f"{verdict[1]}; {INSTRUCTOR}"
    return ItemResult(item, Status.NOT_JUDGED, 0, text)

