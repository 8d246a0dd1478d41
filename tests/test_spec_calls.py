"""The specs' own calls are valid where a grade relies on it, on the CPU (no op runs: PyTorch's references
only): 09's random draws in training keep enough values per channel for BatchNorm, and so do its fixed
calls at their edges of one output row and one output column."""
from __future__ import annotations

import pytest
import torch

from grader import specs
from grader.verify.properties import reference_result
from grader.verify.spec import audit_seed, conv_output_hw


def test_a_random_training_draw_of_one_value_per_channel_becomes_a_valid_call():
    """09's random calls take exercise 06's random convolutions, a few of which (about 1 in 7,000) have
    one image and one output pixel: in training PyTorch refuses one value per channel, so such a draw
    must become a valid call (its references are computed as its calls are made), of at least 3 values
    per channel (over 2, BatchNorm's gradient to x is float32 rounding)."""
    from grader.specs.ex06_conv2d import random_case

    spec = specs.by_exercise("09_conv_bn_relu_training")
    for seed in range(100_000):
        c = random_case(torch.Generator().manual_seed(seed), "random 1")
        p, q = conv_output_hw((c.h, c.w), (c.kh, c.kw), c.stride, c.padding, c.dilation)
        if c.n * p * q == 1:
            break
    else:
        pytest.fail("no draw of one value per channel in 100,000 seeds")
    with audit_seed(0):
        calls = spec.random_calls(torch.Generator().manual_seed(seed), "cpu", torch.float32)
    trained = [call for call in calls if call.reference is not None and "training" in call.label]
    assert trained
    for call in trained:
        reference_result(call, list(call.args))
        z = call.args[call.names.index("z")] if "z" in call.names else None
        if z is not None:  # the backward's saved output: its values per channel
            assert z.numel() // z.shape[1] >= 3, f"{call.label}: z of shape {list(z.shape)}"


def test_09s_few_values_edges_keep_at_least_3_values_per_channel_in_training():
    """09's training calls at their edges of one output row and one output column: at least 3 values per
    channel, where the gradient to x is more than float32 rounding (over 2 values BatchNorm's normalized
    values are +-sqrt(var / (var + eps)) whatever x is)."""
    spec = specs.by_exercise("09_conv_bn_relu_training")
    with audit_seed(0):
        calls = [c for c in spec.audit_calls("cpu", torch.float32)
                 if "training" in c.label and c.reference is not None]
    seen = 0
    for call in calls:
        for i, edge in call.edges():
            if "one output row" in edge.name or "one output column" in edge.name:
                args = list(call.args)
                args[i] = edge.at(args[i])
                out = reference_result(call, args)
                z = out[0] if isinstance(out, (tuple, list)) else out
                assert z.numel() // z.shape[1] >= 3, f"{call.label}, {edge.name}: output {list(z.shape)}"
                seen += 1
    assert seen


@pytest.mark.parametrize("s", specs.all_specs(), ids=lambda s: s.exercise)
def test_every_call_tolerance_is_a_number_where_its_inputs_hold_nan_and_infinities(s):
    """A tolerance that is a function of the call's arguments (a bound from the inputs) stays finite where
    the NaN property puts NaN and infinities into them: compared against NaN, every output would fail
    ("relative error 0 exceeds nan"), the solution's too."""
    from grader.verify.checks import call_tolerance

    with audit_seed(0):
        calls = s.audit_calls("cpu", torch.float32)
    for call in calls:
        if not callable(call.tolerance):
            continue
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in call.args]
        for i in call.nonfinite or (0,):
            if isinstance(args[i], torch.Tensor) and args[i].is_floating_point() and args[i].numel() >= 2:
                args[i].view(-1)[0], args[i].view(-1)[-1] = float("nan"), float("inf")
        tol = call_tolerance(call, args)
        assert tol == tol and tol < float("inf"), f"{call.label}: tolerance {tol} with NaN and infinities in its inputs"
