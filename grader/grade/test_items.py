"""Each rubric item is one pytest test: it passes when the grader's verdict
for the item is "passed" (conftest.py: the grader fixture is the grading)."""
import pytest

from lab_grader.outcomes import Status


def test_item(grader, item):
    if item is None:
        pytest.fail("nothing to grade", pytrace=False)
    result = grader.result(item)
    if result.status == Status.NOT_JUDGED:
        pytest.skip(result.summary)
    if result.status != Status.PASSED:
        pytest.fail(result.summary, pytrace=False)
