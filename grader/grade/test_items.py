"""Each rubric item is one pytest test: it passes when the grader's verdict
for the item is "passed"."""
import pytest

from conftest import record_result


def test_item(grader, item):
    if item is None:
        pytest.fail("nothing to grade", pytrace=False)
    result = grader.result(item)
    record_result(result)
    if result.status == "not-judged":
        pytest.skip(result.summary)
    if result.status != "passed":
        pytest.fail(result.summary, pytrace=False)
