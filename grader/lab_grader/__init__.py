"""The lab's autograder: builds a student tree, runs the grader's tests in
lanes (plain, race, Valgrind, TSan, performance), reads what happened from
the test records, and reports points with a diagnosis for every failure.

grading.py is the main, read top to bottom; pytest drives it through
grader/grade/conftest.py, one pytest item per rubric item. The map, a step
a line: the module, and what it hands to the next step.

  step        module                 hands on
  ----------  ---------------------  ---------------------------------------------
  asked       arguments.py           the checked options (stages, target, items, test, seed)
                                     and the Environment: every environment variable the
                                     grader heeds (CC, NO_COLOR, NO_PROGRESS, LAB_*), read
                                     there once and passed down
  graded      plan.py                the Plan: per stage, its items and their tests
  built       assemble.py, build.py  a StageBuild per stage: its binaries, or the error
              (intake.py, gate.py)   (the student's files taken in, checked before linking)
  run         lanes.py,              per lane, {test: Outcome}: binary_run.BinaryRun is one run
              binary_run.py          of a test binary in the jail; judge.py turns what it
              (sandbox.py, jail.py)  left into each test's Outcome; calibrate.py reruns a
                                     timeout on the reference; checkers.py: Valgrind's and
                                     TSan's reports)
  judged      scoring.py             per item, an ItemResult: status, points, summary
                                     (outcomes.py: a test's Verdict, an item's Status)
  written     report.py              the terminal report
              results_json.py        results.json (every path: the grading's and the fallbacks)
              junit.py               JUnit XML
              (diagnosis.py)         the one diagnosis of an item the three print

pipeline.py runs built -> run -> judged, a thread per stage, and hands
grading.py each item's ItemResult and, at the end, a pipeline.Builds (the
builds, and whether the grader's own files stayed untouched), which the
three outputs read. progress.py: the progress line on a terminal.
"""
