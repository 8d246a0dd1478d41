"""One comparison (grader.verify.checks.output_problem / OutputCheck): the first problem of a call's outputs in
their order, whatever makes it (a value, a special value, a shape, a count), and every output's numbers
brought to the host in one copy per device, not one per output (each copy from a GPU waits for it, and the
grading processes share the GPU)."""
from __future__ import annotations

import pytest
import torch

from grader.verify import checks
from grader.verify.checks import OutputCheck, host_values, output_problem


def _outputs(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 5, generator=g, dtype=torch.float64) for _ in range(n)]


def test_every_output_is_judged_in_one_copy(host_copies):
    expected = _outputs()
    actual = tuple(e.float() for e in expected)
    assert output_problem(actual, expected, 1e-6, "call") is None
    assert host_copies[0] == 1


@pytest.mark.parametrize("k", range(4))
def test_each_outputs_own_problem_is_found_and_named(k):
    expected = _outputs()
    for spoil, says in ((lambda t: t + 1, "relative error"), (lambda t: t.index_fill(1, torch.tensor([2]), float("nan")), "NaN"),
                        (lambda t: t.index_fill(0, torch.tensor([1]), float("-inf")), "-inf"), (lambda t: t[:, :4], "shape")):
        actual = [e.clone() for e in expected]
        actual[k] = spoil(actual[k])
        problem = output_problem(actual, expected, 1e-6, "call")
        assert problem is not None and problem.startswith(f"call[{k}]") and says in problem, (k, problem)


def test_the_first_problem_in_order_wins_whichever_kind():
    expected = _outputs()
    value_first = [e.clone() for e in expected]
    value_first[0] = value_first[0] * 2
    value_first[2] = value_first[2][:2]
    assert output_problem(value_first, expected, 1e-6, "call").startswith("call[0]: relative error")
    shape_first = [e.clone() for e in expected]
    shape_first[1] = shape_first[1][:2]
    shape_first[3] = shape_first[3] * 2
    assert output_problem(shape_first, expected, 1e-6, "call").startswith("call[1]: shape")
    assert "expected 4 outputs" in output_problem(expected[:3], expected, 1e-6, "call")
    assert "expected a tensor" in output_problem([1.0, *expected[1:]], expected, 1e-6, "call")


def test_outputs_not_compared_and_nested_ones():
    expected = _outputs(3)
    actual = [e.clone() for e in expected]
    actual[1] = actual[1] * 5
    assert output_problem(actual, [expected[0], None, expected[2]], 1e-6, "call") is None
    nested = (expected[0], (expected[1], expected[2]))
    wrong = (expected[0], (expected[1], expected[2] * 3))
    assert output_problem(wrong, nested, 1e-6, "call").startswith("call[1][1]: relative error")


def test_several_checks_share_one_copy(host_copies):
    """check_call's way: the inputs' flags and several OutputChecks fetched together (host_values)."""
    expected = _outputs(2)
    first, second = OutputCheck(tuple(expected), expected, 1e-6, "out"), OutputCheck(expected[0] * 2, expected[0], 1e-6, "x after")
    flags = torch.ones(3, dtype=torch.float64)
    got_flags, v1, v2 = host_values(flags, first.stats, second.stats)
    assert host_copies[0] == 1 and got_flags == [1.0, 1.0, 1.0]
    assert first.problem(v1) is None and second.problem(v2).startswith("x after: relative error")
    assert host_values(None, flags)[0] is None


def test_relative_errors_of_a_check_come_in_one_copy_and_the_first_wrong_fails(host_copies):
    """RelErrors (assert_rel_error for several results of one check: a layer's output and its gradients):
    one copy to the host, the first wrong result in order failing, a NaN an infinite error, and a wrong
    result before an exception of the block (a backward that fails after a wrong forward) the failure."""
    from grader.verify.checks import CheckFailure, RelErrors, assert_rel_error

    e = _outputs(3)
    with RelErrors() as errors:
        for k in range(3):
            errors.add(e[k].float(), e[k], 1e-6, f"result {k}")
    assert host_copies[0] == 1
    with pytest.raises(CheckFailure, match="result 1: relative error"):
        with RelErrors() as errors:
            errors.add(e[0], e[0], 1e-6, "result 0")
            errors.add(e[1] * 2, e[1], 1e-6, "result 1")
            errors.add(e[2] * 3, e[2], 1e-6, "result 2")
    with pytest.raises(CheckFailure, match="result 0: relative error inf"):
        assert_rel_error(e[0].index_fill(1, torch.tensor([0]), float("nan")), e[0], 1e-6, "result 0")
    with pytest.raises(CheckFailure, match="forward: relative error"):
        with RelErrors() as errors:
            errors.add(e[0] + 1, e[0], 1e-6, "forward")
            raise RuntimeError("the backward that follows fails")
    with pytest.raises(RuntimeError, match="the backward"):
        with RelErrors() as errors:
            errors.add(e[0], e[0], 1e-6, "forward")
            raise RuntimeError("the backward that follows fails")
    with pytest.raises(CheckFailure, match="result 0: relative error"):  # a later shape problem waits its turn
        with RelErrors() as errors:
            errors.add(e[0] * 2, e[0], 1e-6, "result 0")
            errors.add(e[1][:2], e[1], 1e-6, "result 1")
    with pytest.raises(CheckFailure, match=r"result 1: shape \(2, 5\)"):
        with RelErrors() as errors:
            errors.add(e[0], e[0], 1e-6, "result 0")
            errors.add(e[1][:2], e[1], 1e-6, "result 1")


def test_a_cancelling_answer_is_judged_in_the_same_one_copy(host_copies):
    """An output with its terms' norms (checks.call_terms: a small sum of products that may cancel) is judged
    against the larger norm with no copy of its own: the scale is one of the numbers the one copy brings."""
    from grader.verify.checks import cancelling_terms

    a, b = torch.tensor([[1.0, 1.0]], dtype=torch.float64), torch.tensor([[1.0], [-1.0 + 1e-3]], dtype=torch.float64)
    product = lambda a, b: a @ b  # noqa: E731
    expected = product(a, b)
    terms = cancelling_terms(product, (a, b), expected)
    assert output_problem(expected + 5e-8, expected, 1e-5, "call", terms=terms) is None
    assert host_copies[0] == 1
    assert output_problem(expected + 5e-8, expected, 1e-5, "call") is not None  # 5e-5 of the answer's own norm
