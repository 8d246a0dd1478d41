"""Sums of products that cancel (grader.verify.checks.terms_norm): a right float32 answer whose value lands
near 0 passes in every draw, while the wrong answers of the class (a term dropped, TF32 or bfloat16 operands,
a wrong sign) still fail, for the spec checks (assert_rel_error with terms) and the calls' tolerances
(sum_of_products_tolerance) alike. On the CPU: float32 sums in a kernel's order against float64."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.verify.checks import CheckFailure, assert_rel_error, sum_of_products_tolerance, terms_norm

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
    pass against the terms' norm, in both the spec checks' form and the calls' tolerance."""
    cancelled = 0
    for a, b in draws(600):
        ref, got = product(a, b), sequential_dot(a, b)
        err = (got.double() - ref).norm().item()
        if err > 1e-5 * ref.norm().item():
            cancelled += 1
        assert_rel_error(got, ref, 1e-5, "1 x 1 x 300", terms=terms_norm(product, (a, b)))
        assert err <= sum_of_products_tolerance(1e-5, product, (a, b)) * ref.norm().item()
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


def test_non_finite_answers_do_not_loosen_the_tolerance():
    a, b = torch.randn(4, 6), torch.randn(6, 5)
    a[0, 0] = float("nan")
    plain = sum_of_products_tolerance(1e-5, product, (a[1:], b))
    assert sum_of_products_tolerance(1e-5, product, (a, b)) <= plain * 1.5  # the finite rows' ratio, about 1
    assert sum_of_products_tolerance(1e-5, product, (torch.zeros(2, 3), torch.randn(3, 2))) == 1e-5


def test_a_large_output_keeps_the_plain_tolerance_without_a_second_reference():
    calls = []

    def counted(a, b):
        calls.append(1)
        return product(a, b)

    a, b = torch.randn(9, 300), torch.randn(300, 8)  # 72 outputs
    assert sum_of_products_tolerance(1e-5, counted, (a, b)) == 1e-5 and len(calls) == 1


@pytest.mark.parametrize("exercise, label", [("05_matmul", "matmul(version=1)"), ("05_matmul", "matmul(version=4)"),
                                             ("06_conv2d", "conv2d(version=1, bias)"),
                                             ("10_cudnn_conv", "conv2d(mode=benchmark)")])
def test_a_float32_call_that_cancels_gets_the_terms_norm_as_its_scale(exercise, label):
    """A spec's strict float32 call, on one output of two terms that nearly cancel (1 - (1 - 1e-3)): its
    tolerance (what the judge and the generated properties compare with) is the plain one times the terms'
    norm over the answer's, about 1414; on terms that do not cancel, the plain one."""
    from grader.specs import all_specs
    from grader.verify.checks import CALL_TOLERANCE, call_tolerance

    spec = next(s for s in all_specs() if s.exercise == exercise)
    call = next(c for c in spec.audit_calls("cpu", torch.float32) if c.label == label)
    args = list(call.args)
    if exercise == "05_matmul":
        one, other = torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0], [-1.0 + 1e-3]])
    else:  # a 1 x 2 image, a 1 x 2 kernel, no bias, stride 1, no padding, dilation 1, groups 1
        one, other = torch.tensor([[[[1.0, 1.0]]]]), torch.tensor([[[[1.0, -1.0 + 1e-3]]]])
        args[2:7] = [None, (1, 1), (0, 0), (1, 1), 1]
    args[0], args[1] = one, other
    base = CALL_TOLERANCE[torch.float32] if exercise != "10_cudnn_conv" else 1e-4
    assert call_tolerance(call, args) == pytest.approx(base * 2 ** 0.5 / 1e-3, rel=1e-3)
    args[1] = other.abs()
    assert call_tolerance(call, args) == pytest.approx(base)


def test_a_gradient_that_cancels_gets_its_own_terms_norm_as_its_scale():
    """The gradients of a sum of products sum products too: the bias's gradient, the sum of v over the
    output, near 0 (1 - (1 - 1e-3)) gets its terms' norm sqrt(1 + (1 - 1e-3)^2) as its scale; the other
    gradients theirs (here none cancels); a call that does not sum products keeps the plain tolerance."""
    from grader.verify.judge import gradient_tolerances, gradients
    from grader.verify.spec import AuditCall

    conv = lambda x, w, b: F.conv2d(x.double(), w.double(), b.double())  # noqa: E731
    args = [torch.tensor([[[[1.0, 2.0, 3.0]]]]), torch.tensor([[[[0.5, 0.25]]]]), torch.tensor([0.1])]
    call = AuditCall("conv", tuple(args), ("x", "weight", "bias"), conv, grad_args=(0, 1, 2), tolerance=1e-5,
                     sums_products=True)
    v = torch.tensor([[[[1.0, -1.0 + 1e-3]]]], dtype=torch.float64)
    expected = gradients(conv, call, [a.double() for a in args], 0, v)
    tols = gradient_tolerances(call, args, expected, v)
    assert tols[2] == pytest.approx(1e-5 * (1 + (1 - 1e-3) ** 2) ** 0.5 / 1e-3, rel=1e-6)
    # d/dw = [1 - 2 c, 2 - 3 c] (c = 1 - 1e-3), its terms' norms [sqrt(1 + 4 c^2), sqrt(4 + 9 c^2)]: about 3
    c = 1 - 1e-3
    dw, terms = torch.tensor([1 - 2 * c, 2 - 3 * c]), torch.tensor([1 + 4 * c * c, 4 + 9 * c * c]).sqrt()
    assert tols[1] == pytest.approx(1e-5 * (terms.norm() / dw.norm()).item(), rel=1e-6)
    # d/dx = [0.5, 0.25 - 0.5 c, -0.25 c]: its norm against its terms' norm, about 1.3
    dx, terms = torch.tensor([0.5, 0.25 - 0.5 * c, -0.25 * c]), torch.tensor([0.25, 0.0625 + 0.25 * c * c, 0.0625 * c * c]).sqrt()
    assert tols[0] == pytest.approx(1e-5 * (terms.norm() / dx.norm()).item(), rel=1e-6)
    summed = gradients(conv, call, [a.double() for a in args], 0, v.abs())  # 1 + (1 - 1e-3): no cancelling
    assert gradient_tolerances(call, args, summed, v.abs())[2] == pytest.approx(1e-5)
    plain = AuditCall("conv", tuple(args), ("x", "weight", "bias"), conv, grad_args=(0, 1, 2), tolerance=1e-5)
    assert gradient_tolerances(plain, args, expected, v) == [1e-5] * 3


def test_the_scale_is_found_on_the_answers_device():
    """The judge's answer is on the CPU where a call's arguments (and so their terms) may be on another
    GPU: the factor moves the terms to the answer (on an H200 host of two, 10's bias gradient on the other
    GPU had failed its input check with PyTorch's "indices should be ... on the same device"; a machine of
    one device cannot show it, so here the terms come in another dtype and must still be compared)."""
    from grader.verify.checks import cancellation_factor

    answer = torch.tensor([1e-3, 0.0, float("nan")], dtype=torch.float32)
    assert cancellation_factor(answer, torch.tensor([1.0, 0.0, 5.0], dtype=torch.float64)) == pytest.approx(1000.0)
