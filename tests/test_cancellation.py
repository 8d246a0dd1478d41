"""Sums of products that cancel (grader.verify.checks.terms_norm): a right float32 answer whose value lands
near 0 passes in every draw, while the wrong answers of the class (a term dropped, TF32 or bfloat16 operands,
a wrong sign) still fail, for the spec checks (assert_rel_error with terms) and the calls' comparisons
(call_terms, an OutputCheck's terms) alike. On the CPU: float32 sums in a kernel's order against float64."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.verify.checks import CheckFailure, assert_rel_error, cancelling_terms, output_problem, terms_norm

K = 300


def product(a, b):
    return a.double() @ b.double()


def sequential_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A 1 x 1 product summed term by term in float32, as one thread of a tiled kernel does."""
    acc = torch.zeros((), dtype=torch.float32)
    for x, y in zip(a[0], b[:, 0]):
        acc = acc + x * y
    return acc.reshape(1, 1)


def draws(n: int):
    g = torch.Generator().manual_seed(7)
    for _ in range(n):
        yield torch.randn(1, K, generator=g), torch.randn(K, 1, generator=g)


def test_terms_norm_is_the_root_of_the_squared_terms_sum():
    a, b = torch.randn(3, 5, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    expected = torch.stack([torch.stack([(a[i] * b[:, j]).norm() for j in range(4)]) for i in range(3)])
    assert torch.allclose(terms_norm(product, (a, b)), expected)
    x, w, bias = torch.randn(1, 2, 5, 5, dtype=torch.float64), torch.randn(3, 2, 3, 3, dtype=torch.float64), \
        torch.randn(3, dtype=torch.float64)
    conv = lambda x, w, b: F.conv2d(x, w, b, 1, 1)  # noqa: E731
    terms = terms_norm(conv, (x, w, bias))
    # output (0, 0, 2, 2): 18 products and the bias
    patch = x[0, :, 1:4, 1:4]
    assert torch.isclose(terms[0, 0, 2, 2], ((patch * w[0]) ** 2).sum().add(bias[0] ** 2).sqrt())


def test_a_right_float32_answer_passes_however_it_cancels():
    """The draws where the answer's own norm would have failed it (they exist: the reason for the rule)
    pass against the terms' norm, in both the spec checks' form (assert_rel_error) and the calls' (an
    OutputCheck's terms)."""
    cancelled = 0
    for a, b in draws(600):
        ref, got = product(a, b), sequential_dot(a, b)
        if output_problem(got, ref, 1e-5, "1 x 1 x 300") is not None:
            cancelled += 1
        assert_rel_error(got, ref, 1e-5, "1 x 1 x 300", terms=terms_norm(product, (a, b)))
        assert output_problem(got, ref, 1e-5, "1 x 1 x 300", terms=cancelling_terms(product, (a, b), ref)) is None
    assert cancelled, "no draw cancelled: the test shows nothing"


@pytest.mark.parametrize("wrong", ["a term dropped", "TF32 operands", "bfloat16 operands", "sign flipped"])
def test_wrong_answers_that_cancel_still_fail(wrong):
    failed = 0
    for a, b in draws(50):
        ref = product(a, b)
        if wrong == "a term dropped":
            got = product(a[:, 1:], b[1:]).float()
        elif wrong == "TF32 operands":  # 10 mantissa bits
            tf32 = lambda t: (t.view(torch.int32) & ~0x1FFF).view(torch.float32)  # noqa: E731
            got = product(tf32(a), tf32(b)).float()
        elif wrong == "bfloat16 operands":
            got = product(a.bfloat16(), b.bfloat16()).float()
        else:
            got = -ref.float()
        try:
            assert_rel_error(got, ref, 1e-5, "wrong", terms=terms_norm(product, (a, b)))
        except CheckFailure as e:
            assert "terms' norm" in str(e)
            failed += 1
    assert failed >= 48, f"{wrong}: only {failed} of 50 draws failed"


def test_non_finite_answers_are_judged_on_their_own():
    """NaN where the answer has NaN passes and elsewhere fails, with terms as without; the terms at the
    non-finite positions do not count."""
    a, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(6, 5, dtype=torch.float64)
    a[0, 0] = float("nan")
    ref = product(a, b)
    terms = cancelling_terms(product, (a, b), ref)
    assert output_problem(ref.float(), ref, 1e-5, "nan rows", terms=terms) is None
    wrong = ref.clone()
    wrong[1, 1] = float("nan")
    assert "NaN" in output_problem(wrong, ref, 1e-5, "nan rows", terms=terms)


def test_a_large_output_keeps_the_plain_tolerance_without_a_second_reference():
    calls = []

    def counted(a, b):
        calls.append(1)
        return product(a, b)

    a, b = torch.randn(9, 300), torch.randn(300, 8)  # 72 outputs
    assert cancelling_terms(counted, (a, b), product(a, b)) is None and not calls


@pytest.mark.parametrize("exercise, label", [("05_matmul", "matmul(version=1)"), ("05_matmul", "matmul(version=4)"),
                                             ("06_conv2d", "conv2d(version=1, bias)"),
                                             ("10_cudnn_conv", "conv2d(mode=benchmark)")])
def test_a_float32_call_that_cancels_is_judged_against_its_terms_norm(exercise, label):
    """A spec's strict float32 call on one output of two terms that nearly cancel (1 - (1 - 1e-3)): the
    comparison the judge and the generated properties make (call_terms, an OutputCheck's terms) passes an
    error of 100 times the tolerance of the answer (a tenth of the tolerance of its terms' norm, about
    1.414) and fails one of 3 times that tolerance; without terms the first fails too."""
    from grader.specs import all_specs
    from grader.verify.checks import call_terms, call_tolerance

    spec = next(s for s in all_specs() if s.exercise == exercise)
    call = next(c for c in spec.audit_calls("cpu", torch.float32) if c.label == label)
    assert call.sums_products
    args = list(call.args)
    if exercise == "05_matmul":
        one, other = torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0], [-1.0 + 1e-3]])
    else:  # a 1 x 2 image, a 1 x 2 kernel, no bias, stride 1, no padding, dilation 1, groups 1
        one, other = torch.tensor([[[[1.0, 1.0]]]]), torch.tensor([[[[1.0, -1.0 + 1e-3]]]])
        args[2:7] = [None, (1, 1), (0, 0), (1, 1), 1]
    args[0], args[1] = one, other
    expected = call.reference(*args)
    tol, terms = call_tolerance(call, args), call_terms(call, args, expected)
    assert terms is not None and abs(expected.item()) == pytest.approx(1e-3, rel=1e-4)  # (float32 1 - 1e-3)
    near = expected + 100 * tol * 1e-3
    assert output_problem(near, expected, tol, label, terms=terms) is None
    assert output_problem(near, expected, tol, label) is not None
    far = expected + 3 * tol * 2 ** 0.5
    assert "terms' norm" in output_problem(far, expected, tol, label, terms=terms)


def test_a_gradient_that_cancels_is_judged_against_its_own_terms_norm():
    """The gradients of a sum of products sum products too: the bias's gradient, the sum of v over the
    output, near 0 (1 - (1 - 1e-3)) has its terms' norm sqrt(1 + (1 - 1e-3)^2); the others theirs; a
    call that does not sum products has none."""
    from grader.verify.judge import gradient_terms, gradients
    from grader.verify.spec import AuditCall

    conv = lambda x, w, b: F.conv2d(x.double(), w.double(), b.double())  # noqa: E731
    args = [torch.tensor([[[[1.0, 2.0, 3.0]]]]), torch.tensor([[[[0.5, 0.25]]]]), torch.tensor([0.1])]
    call = AuditCall("conv", tuple(args), ("x", "weight", "bias"), conv, grad_args=(0, 1, 2), tolerance=1e-5,
                     sums_products=True)
    v = torch.tensor([[[[1.0, -1.0 + 1e-3]]]], dtype=torch.float64)
    expected = gradients(conv, call, [a.double() for a in args], 0, v)
    terms = gradient_terms(call, args, expected, v)
    c = 1 - 1e-3
    assert terms[2].item() == pytest.approx((1 + c * c) ** 0.5)
    assert torch.allclose(terms[1].flatten(), torch.tensor([1 + 4 * c * c, 4 + 9 * c * c], dtype=torch.float64).sqrt())
    assert torch.allclose(terms[0].flatten(), torch.tensor([0.25, 0.0625 + 0.25 * c * c, 0.0625 * c * c],
                                                           dtype=torch.float64).sqrt())
    # the bias's gradient 100 times the tolerance of its own norm off: right against its terms' norm
    near = expected[2] + 100 * 1e-5 * 1e-3
    assert output_problem(near, expected[2], 1e-5, "d/dbias", terms=terms[2]) is None
    assert output_problem(near, expected[2], 1e-5, "d/dbias") is not None
    plain = AuditCall("conv", tuple(args), ("x", "weight", "bias"), conv, grad_args=(0, 1, 2), tolerance=1e-5)
    assert gradient_terms(plain, args, expected, v) == [None] * 3


def test_the_terms_come_to_the_answers_device_and_dtype():
    """The judge's answer is on the CPU where a call's arguments (and so their terms) may be on another
    GPU (on an H200 host of two, 10's bias gradient on the other GPU had failed its input check with
    PyTorch's "indices should be ... on the same device"): the terms are moved to the answer's device."""
    answer = torch.tensor([1e-3], dtype=torch.float64)
    terms = cancelling_terms(lambda a, b: a.double() * b.double(), (torch.tensor([1.0]), torch.tensor([1.0])), answer)
    assert terms.device == answer.device and terms.item() == 1.0
