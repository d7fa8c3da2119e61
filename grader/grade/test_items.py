"""Each rubric item is one pytest test: it passes when the grader's verdict
for the item is "passed"."""
import pytest

from conftest import record_result, time_left
from lab_grader.outcomes import Status


def test_item(grader, item, request):
    if item is None:
        pytest.fail("nothing to grade", pytrace=False)
    result = grader.result(item, timeout=time_left(request.config))
    record_result(result, request.config)
    if result.status == Status.NOT_JUDGED:
        pytest.skip(result.summary)
    if result.status != Status.PASSED:
        pytest.fail(result.summary, pytrace=False)
