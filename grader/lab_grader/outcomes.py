"""The words the engine speaks: what happened to one test (a Verdict in an
Outcome) and what an item earned (a Status in an ItemResult).

Both enums are strings too (their values are the words results.json and the
self-tests use), so `Verdict.PASS == "pass"` holds; but every module of the
engine names them through the enum, never by the bare word.
"""
import dataclasses
import enum


class _Word(str, enum.Enum):
    __str__ = str.__str__
    __format__ = str.__format__


class Verdict(_Word):
    """What happened to one test in one run."""
    PASS = "pass"
    FAIL = "fail"                   # an assertion failed
    TIMEOUT = "timeout"             # past its limit (and the reference is not as slow)
    CRASH = "crash"                 # a signal
    NOT_STARTED = "not-started"     # a TODO stub ran
    EXITED_EARLY = "exited-early"   # the process ended before the test did (no END with the nonce)
    MEMORY = "memory"               # Valgrind reported errors or leaks
    RACE = "race"                   # ThreadSanitizer reported a problem
    MISSING = "missing"             # the test did not run at all
    TOO_SLOW = "too-slow"           # timed out, and the reference is as slow right now: not judged
    UNJUDGED = "unjudged"           # the test itself said the machine cannot judge (lab_cannot_judge)
    STARVED = "starved"             # out of time while the machine gave the run almost no CPU (cpu_watch)


# verdicts that say nothing of the code: the item is not judged, not failed
NOT_JUDGED_VERDICTS = (Verdict.TOO_SLOW, Verdict.UNJUDGED, Verdict.STARVED)
# verdicts after which a slower lane would only time out again
HUNG_VERDICTS = (Verdict.TIMEOUT, Verdict.TOO_SLOW, Verdict.STARVED)


class Status(_Word):
    """What an item earned."""
    PASSED = "passed"
    FAILED = "failed"
    NOT_JUDGED = "not-judged"


@dataclasses.dataclass
class Outcome:
    test: str                 # "suite::name"
    verdict: Verdict
    message: str = ""
    details: list = dataclasses.field(default_factory=list)
    seed: str = ""
    notes: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    began: bool = True        # the test body wrote its BEGIN record
    stalled: bool = False     # TIMEOUT ended by the watchdog: every thread waited for ever (no machine is that slow)

    @property
    def passed(self):
        return self.verdict == Verdict.PASS


@dataclasses.dataclass
class ItemResult:
    item: object              # rubric.Item
    status: Status
    points: float
    summary: str = ""         # one line
    outcome: Outcome = None   # the outcome the summary speaks of, when one test decided it
    build_error: object = None   # the build.BuildError that stopped it, when its binary did not build
    deferred: bool = False       # not judged because make check leaves its lane to make grade
