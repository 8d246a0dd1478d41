"""The graded tests: one per check of the exercise's spec, then the timing."""
from __future__ import annotations

import pytest

from grader.checks import CheckFailure
from grader.performance import measure


def test_check(check, ctx):
    failure = None
    try:
        check.run(ctx)
    except CheckFailure as e:
        failure = str(e)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
        failure = f"{type(e).__name__}: " + str(e).split("\nException raised from")[0]
    if failure is not None:  # outside the except block, so no chained traceback clutters the reason
        pytest.fail(failure, pytrace=False)


def test_performance(spec, ctx, reference_module, record_property):
    if spec.benchmark() is None:
        pytest.skip("this exercise has no timed part")
    result = measure(spec, ctx, reference_module)
    record_property("performance", result)
    if result["verdict"]:
        pytest.fail(result["verdict"], pytrace=False)
