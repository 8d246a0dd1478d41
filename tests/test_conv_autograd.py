"""The backward of exercises 06 (conv2d) and 07 (conv_transpose2d), on the CPU: each exercise computes
its gradients with its own forward op only, through identities (solutions/06_conv2d/conv2d.py and
solutions/07_conv_transpose2d/conv_transpose2d.py say which). Here the solutions' Python modules are
loaded with PyTorch's F.conv2d / F.conv_transpose2d standing in for the compiled op (a CPU op of the
same schema that also refuses what the C++ checks refuse), so the very code the GPU runs is checked,
in float64 against torch.autograd, on many random shapes: strides 1-3 per axis, paddings 0-3 (beyond
d (k - 1) too), dilations 1-3, non-square kernels 1-5, groups (depthwise and channel multipliers),
output_padding, odd sizes, batch 1 and empty batches, the batch split into chunks. Then the
registration (gradcheck, opcheck), `ctx.needs_input_grad`, and the calls made: always stride 1 for the
data gradient, version 3 only where it takes the call (groups 1). Last, MobileNetV2's weight-gradient
calls as 06's version 2 plans them (tests/test_depthwise_tile_plan.py's copy of the depthwise tile
plan): each fits the depthwise tile kernel or falls back to the implicit GEMM. What the kernels compute
on the backward's calls is graded on the GPU: the autograd groups of 06 and 07, which catch the
known-wrong variants backward_kernel_not_flipped, backward_ignores_the_stride and
weight_gradient_drops_groups of each (tests/known_wrong/).
"""
from __future__ import annotations

import importlib.util
import itertools
import types
from unittest import mock

import pytest
import torch
import torch.nn.functional as F

from grader.env import REPO

INT_MAX = 2**31 - 1
EXERCISES = {"06": ("06_conv2d", "conv2d.py"), "07": ("07_conv_transpose2d", "conv_transpose2d.py")}


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise RuntimeError(message)  # as the C++ op's TORCH_CHECK


def _op_checks_conv2d(x, weight, stride, padding, dilation, groups, version):
    """What 06's C++ front end refuses (conv2d.cpp), for the calls the backward makes."""
    _need(version in (1, 2, 3), f"version must be 1, 2 or 3, but is {version}")
    _need(len(stride) == len(padding) == len(dilation) == 2, "stride, padding and dilation must have 2 values")
    _need(groups >= 1 and x.shape[1] % groups == 0, f"groups ({groups}) must divide x's {x.shape[1]} channels")
    _need(weight.shape[0] % groups == 0, f"groups ({groups}) must divide weight's {weight.shape[0]} output channels")
    _need(weight.shape[1] * groups == x.shape[1], f"weight must have shape (cout, cin / groups, kh, kw), but has shape "
          f"{list(weight.shape)} (x has shape {list(x.shape)}, groups {groups})")
    for d in range(2):
        _need(stride[d] > 0 and dilation[d] > 0 and padding[d] >= 0, f"stride {stride}, dilation {dilation}, padding "
              f"{padding}: out of range")
        span = dilation[d] * (weight.shape[2 + d] - 1) + 1
        _need(weight.shape[2 + d] > 0 and span <= x.shape[2 + d] + 2 * padding[d], f"weight: the kernel {list(weight.shape)} with dilation {dilation} spans more than the padded input")
    _need(version != 3 or groups == 1, f"groups must be 1 for version 3 (TF32 tensor cores), but is {groups}")
    _need(x.shape[1] * x.shape[2] * x.shape[3] < INT_MAX and weight.numel() < INT_MAX, "2^31 or more elements")


def _op_checks_conv_transpose2d(x, weight, stride, padding, output_padding, groups, dilation, version):
    """What 07's C++ front end refuses (conv_transpose2d.cpp)."""
    _need(version in (1, 2), f"version must be 1 or 2, but is {version}")
    _need(groups >= 1 and x.shape[1] % groups == 0, f"groups ({groups}) must divide x's {x.shape[1]} channels")
    _need(weight.shape[0] == x.shape[1], f"weight must have shape (cin, cout / groups, kh, kw) with cin = "
          f"{x.shape[1]}, but has shape {list(weight.shape)}")
    for d in range(2):
        _need(stride[d] > 0 and dilation[d] > 0 and padding[d] >= 0, f"stride {stride}, dilation {dilation}, padding "
              f"{padding}: out of range")
        _need(0 <= output_padding[d] < max(stride[d], dilation[d]), f"output_padding {output_padding} must be "
              f"smaller than the stride {stride} or the dilation {dilation}")
        out = ((x.shape[2 + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (weight.shape[2 + d] - 1)
               + output_padding[d] + 1)
        _need(out > 0, f"padding {padding} crops the whole output")
    _need(version == 1 or groups <= 65535, f"groups: version 2 takes at most 65535 groups, but groups is {groups}")


class StandIn:
    """A CPU op with the exercise op's schema, computed by PyTorch's functional op, that records its calls."""

    def __init__(self, ns: str, name: str, schema: str, checks, functional):
        self.calls = []
        self.paths: set[str] = set()
        self.lib = torch.library.Library(ns, "DEF")  # noqa: TOR901 (kept alive with the stand-in)
        self.lib.define(schema)

        def impl(x, weight, bias, *args):
            version = args[-1]
            checks(x, weight, *args)
            self.calls.append({"x": tuple(x.shape), "weight": tuple(weight.shape), "args": args, "version": version})
            return functional(x, weight, bias, *args[:-1]).contiguous()

        self.lib.impl(name, impl, "CompositeExplicitAutograd")
        self.namespace = ns
        self.ops = getattr(torch.ops, ns)

    def qualname(self, op: str) -> str:
        return f"{self.namespace}::{op}"

    def took(self, name: str, dtype=None) -> None:
        """The Python branches the wrapper marks (grader.toolchain.build.Library.took), recorded."""
        self.paths.add(name if dtype is None else f"{name}/{str(dtype).removeprefix('torch.')}")


# The reference where the checkout has it; a student release has no solutions/, and these tests then
# check the student's own exercises/ (whose backward is theirs to write).
TREE = REPO / "solutions" if (REPO / "solutions").is_dir() else REPO / "exercises"


def _load(folder: str, file: str, stand_in: StandIn, root=TREE) -> types.ModuleType:
    """The exercise's Python module (TREE's), its library replaced by `stand_in` (registrations go to its
    namespace)."""
    path = root / folder / file
    spec = importlib.util.spec_from_file_location(f"stand_in_{stand_in.namespace}", path)
    module = importlib.util.module_from_spec(spec)
    with mock.patch("grader.toolchain.build.load_library", return_value=stand_in):
        spec.loader.exec_module(module)
    return module


def stand_in_06(ns: str = "course_test_ex06") -> StandIn:
    return StandIn(ns, "conv2d", "conv2d(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
                   "int[] dilation, int groups, int version) -> Tensor", _op_checks_conv2d,
                   lambda x, w, b, stride, padding, dilation, groups: F.conv2d(x, w, b, stride, padding, dilation,
                                                                               groups))


def stand_in_07(ns: str = "course_test_ex07") -> StandIn:
    return StandIn(ns, "conv_transpose2d", "conv_transpose2d(Tensor x, Tensor weight, Tensor? bias, int[] stride, "
                   "int[] padding, int[] output_padding, int groups, int[] dilation, int version) -> Tensor",
                   _op_checks_conv_transpose2d,
                   lambda x, w, b, stride, padding, output_padding, groups, dilation:
                   F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation))


@pytest.fixture(scope="module")
def ex06():
    op = stand_in_06()
    return _load("06_conv2d", "conv2d.py", op), op


@pytest.fixture(scope="module")
def ex07():
    op = stand_in_07()
    return _load("07_conv_transpose2d", "conv_transpose2d.py", op), op


# ------------------------------------------------------------------------------------ random shapes

def _r(g, lo, hi):
    return int(torch.randint(lo, hi + 1, (1,), generator=g))


def _channels(g, kind):
    """(cin, cout, groups) of a kind: dense, grouped, depthwise (groups = cin = cout) or a channel multiplier."""
    if kind == "dense":
        return _r(g, 1, 5), _r(g, 1, 5), 1
    if kind == "grouped":
        groups = _r(g, 2, 3)
        return groups * _r(g, 1, 3), groups * _r(g, 1, 3), groups
    groups = _r(g, 1, 6)
    return groups, groups * (1 if kind == "depthwise" else _r(g, 2, 3)), groups


KINDS = ("dense", "grouped", "depthwise", "multiplier")


def conv_case(seed: int):
    """A random conv2d: (n, cin, h, w, cout, kh, kw, stride, padding, dilation, groups); every fourth
    has p > d (k - 1) along an axis, and batch 1 comes up often."""
    g = torch.Generator().manual_seed(seed)
    cin, cout, groups = _channels(g, KINDS[seed % 4])
    k = (_r(g, 1, 5), _r(g, 1, 5))
    stride, dilation = (_r(g, 1, 3), _r(g, 1, 3)), (_r(g, 1, 3), _r(g, 1, 3))
    padding = (_r(g, 0, 3), _r(g, 0, 3))
    if seed % 4 == 1:  # padding beyond the dilated kernel's reach d (k - 1) along one axis
        axis = _r(g, 0, 1)
        padding = tuple(dilation[a] * (k[a] - 1) + _r(g, 1, 2) if a == axis else padding[a] for a in range(2))
    size = [_r(g, max(1, dilation[a] * (k[a] - 1) + 1 - 2 * padding[a]), 13) for a in range(2)]
    n = (1, 2, 3, 4)[seed % 4] if seed % 5 else _r(g, 1, 6)
    return n, cin, size[0], size[1], cout, k[0], k[1], stride, padding, dilation, groups


def transposed_case(seed: int):
    """A random conv_transpose2d: (n, cin, h, w, cout, kh, kw, stride, padding, output_padding, dilation, groups)."""
    g = torch.Generator().manual_seed(10_000 + seed)
    cin, cout, groups = _channels(g, KINDS[seed % 4])
    k = (_r(g, 1, 5), _r(g, 1, 5))
    stride, dilation = (_r(g, 1, 3), _r(g, 1, 3)), (_r(g, 1, 3), _r(g, 1, 3))
    size = (_r(g, 1, 9), _r(g, 1, 9))
    out_pad = tuple(_r(g, 0, max(stride[a], dilation[a]) - 1) for a in range(2))
    padding = []
    for a in range(2):  # up to 3, keeping an output (and, one time in four, beyond d (k - 1))
        full = (size[a] - 1) * stride[a] + dilation[a] * (k[a] - 1) + out_pad[a] + 1
        padding.append(min(_r(g, 0, 3) + (dilation[a] * (k[a] - 1) if seed % 4 == 1 else 0), (full - 1) // 2))
    n = (1, 2, 3, 4)[seed % 4] if seed % 5 else _r(g, 1, 6)
    return n, cin, size[0], size[1], cout, k[0], k[1], stride, tuple(padding), out_pad, dilation, groups


def _rand(g, *shape):
    return torch.randn(shape, generator=g, dtype=torch.float64)


def _reference_grads(fn, args, grad_y):
    """torch.autograd's gradients of fn(*args) for grad_y, for every tensor argument that requires one."""
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return torch.autograd.grad(fn(*args), leaves, grad_y)


def _divisors(n):
    return [p for p in range(1, n + 1) if n % p == 0]


CONV_SEEDS = range(120)
TRANSPOSED_SEEDS = range(120)


def test_random_cases_cover_what_they_should():
    convs = [conv_case(s) for s in CONV_SEEDS]
    assert {c[7] for c in convs} >= set(itertools.product((1, 2, 3), repeat=2)) - {(3, 3)}  # strides per axis
    assert any(c[8][a] > c[9][a] * (c[5 + a] - 1) for c in convs for a in range(2))  # p > d (k - 1)
    assert any(c[1] == c[4] == c[10] > 1 for c in convs) and any(c[4] == 2 * c[1] == 2 * c[10] for c in convs)
    assert any(c[5] != c[6] for c in convs) and any(c[0] == 1 for c in convs)
    assert any(c[2] % 2 and c[3] % 2 for c in convs)
    trans = [transposed_case(s) for s in TRANSPOSED_SEEDS]
    assert any(c[9][a] >= c[7][a] for c in trans for a in range(2))  # output_padding >= stride (dilation > stride)
    assert any(c[8][a] > c[10][a] * (c[5 + a] - 1) for c in trans for a in range(2))
    assert any(c[1] == c[4] == c[11] > 1 for c in trans)


@pytest.mark.parametrize("seed", CONV_SEEDS)
def test_conv2d_identities_match_autograd(ex06, seed):
    module, _ = ex06
    n, cin, h, w, cout, kh, kw, stride, padding, dilation, groups = conv_case(seed)
    g = torch.Generator().manual_seed(seed)
    x = _rand(g, n, cin, h, w).requires_grad_()
    weight = _rand(g, cout, cin // groups, kh, kw).requires_grad_()
    y = F.conv2d(x, weight, None, stride, padding, dilation, groups)
    grad_y = _rand(g, *y.shape)
    dx, dw = torch.autograd.grad(y, (x, weight), grad_y)

    def conv(a, k, stride, padding, dilation, groups):  # F.conv2d standing in for the op
        return F.conv2d(a, k, None, stride, padding, dilation, groups)

    got = module.conv2d_input_grad(conv, grad_y, weight.detach(), tuple(x.shape), stride, padding, dilation, groups)
    assert got.shape == x.shape
    torch.testing.assert_close(got, dx, rtol=1e-12, atol=1e-12)
    for chunks in _divisors(n):
        got = module.conv2d_weight_grad(conv, x.detach(), grad_y, tuple(weight.shape), stride, padding, dilation,
                                        groups, chunks)
        assert got.shape == weight.shape
        torch.testing.assert_close(got, dw, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", TRANSPOSED_SEEDS)
def test_conv_transpose2d_identities_match_autograd(ex07, seed):
    module, _ = ex07
    n, cin, h, w, cout, kh, kw, stride, padding, out_pad, dilation, groups = transposed_case(seed)
    g = torch.Generator().manual_seed(seed)
    x = _rand(g, n, cin, h, w).requires_grad_()
    weight = _rand(g, cin, cout // groups, kh, kw).requires_grad_()
    y = F.conv_transpose2d(x, weight, None, stride, padding, out_pad, groups, dilation)
    grad_y = _rand(g, *y.shape)
    dx, dw = torch.autograd.grad(y, (x, weight), grad_y)

    def convt(a, k, stride, padding, output_padding, groups, dilation):
        return F.conv_transpose2d(a, k, None, stride, padding, output_padding, groups, dilation)

    got = module.conv_transpose2d_input_grad(convt, grad_y, weight.detach(), tuple(x.shape), stride, padding,
                                             dilation, groups)
    assert got.shape == x.shape
    torch.testing.assert_close(got, dx, rtol=1e-12, atol=1e-12)
    for chunks in _divisors(n):
        got = module.conv_transpose2d_weight_grad(convt, x.detach(), grad_y, tuple(weight.shape), stride, padding,
                                                  dilation, groups, chunks)
        assert got.shape == weight.shape
        torch.testing.assert_close(got, dw, rtol=1e-12, atol=1e-12)


# --------------------------------------------------- through the registered op (the stand-in's calls)

def _conv_args(seed, dtype=torch.float64, bias=True):
    n, cin, h, w, cout, kh, kw, stride, padding, dilation, groups = conv_case(seed)
    g = torch.Generator().manual_seed(seed)
    x = _rand(g, n, cin, h, w).to(dtype).requires_grad_()
    weight = _rand(g, cout, cin // groups, kh, kw).to(dtype).requires_grad_()
    b = _rand(g, cout).to(dtype).requires_grad_() if bias else None
    return x, weight, b, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


def _transposed_args(seed, dtype=torch.float64, bias=True):
    n, cin, h, w, cout, kh, kw, stride, padding, out_pad, dilation, groups = transposed_case(seed)
    g = torch.Generator().manual_seed(seed)
    x = _rand(g, n, cin, h, w).to(dtype).requires_grad_()
    weight = _rand(g, cin, cout // groups, kh, kw).to(dtype).requires_grad_()
    b = _rand(g, cout).to(dtype).requires_grad_() if bias else None
    return x, weight, b, dict(stride=stride, padding=padding, output_padding=out_pad, groups=groups, dilation=dilation)


@pytest.mark.parametrize("seed", range(0, 24, 4))
def test_conv2d_gradcheck_through_the_registered_backward(ex06, seed):
    module, _ = ex06
    x, weight, b, kw = _conv_args(seed)
    for version in (1, 2) + ((3,) if kw["groups"] == 1 else ()):
        assert torch.autograd.gradcheck(lambda x, w, b: module.conv2d(x, w, b, version=version, **kw), (x, weight, b),
                                        fast_mode=True)


@pytest.mark.parametrize("seed", range(0, 24, 4))
def test_conv_transpose2d_gradcheck_through_the_registered_backward(ex07, seed):
    module, _ = ex07
    x, weight, b, kw = _transposed_args(seed)
    for version in (1, 2):
        assert torch.autograd.gradcheck(lambda x, w, b: module.conv_transpose2d(x, w, b, version=version, **kw),
                                        (x, weight, b), fast_mode=True)


def test_modules_train_like_pytorchs(ex06, ex07):
    """Conv2d and ConvTranspose2d: the parameters' gradients are torch.nn's, for the same initial values."""
    torch.manual_seed(0)
    for ours, theirs, shape in (
            (ex06[0].Conv2d(6, 4, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), groups=2, dtype=torch.float64),
             torch.nn.Conv2d(6, 4, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), groups=2, dtype=torch.float64),
             (3, 6, 9, 8)),
            (ex07[0].ConvTranspose2d(6, 4, 4, stride=2, padding=1, output_padding=1, groups=2, dtype=torch.float64),
             torch.nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1, output_padding=1, groups=2, dtype=torch.float64),
             (3, 6, 5, 7))):
        theirs.load_state_dict(ours.state_dict())
        x = torch.randn(shape, dtype=torch.float64)
        ours(x).square().sum().backward()
        theirs(x).square().sum().backward()
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-12, atol=1e-12, msg=name)


# (kernel, dilation): d (k - 1) odd along one axis, along both, along neither (with a dilation), a 1x1
PADDING_WORD_CASES = [((2, 3), (1, 1)), ((4, 4), (1, 1)), ((3, 2), (2, 3)), ((3, 3), (1, 1)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("kernel, dilation", PADDING_WORD_CASES)
def test_padding_words_as_pytorch_takes_them(ex06, kernel, dilation):
    """conv2d and Conv2d take padding "same" and "valid" as F.conv2d and torch.nn.Conv2d do (the stand-in
    op takes numbers only: the wrapper resolves the words), values and gradients; "same" with a stride
    and any other word are refused with an error naming the padding, by the function and the class."""
    module, _ = ex06
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 9, 8, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, *kernel, generator=g, dtype=torch.float64, requires_grad=True)
    y, want = module.conv2d(x, w, None, 1, "same", dilation, version=2), F.conv2d(x, w, None, 1, "same", dilation)
    torch.testing.assert_close(y, want, rtol=1e-12, atol=1e-12)
    v = torch.randn(want.shape, generator=g, dtype=torch.float64)
    for got, ref in zip(torch.autograd.grad(y, (x, w), v), torch.autograd.grad(want, (x, w), v)):
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(module.conv2d(x, w, None, 2, "valid", dilation, version=2),
                               F.conv2d(x, w, None, 2, "valid", dilation), rtol=1e-12, atol=1e-12)
    ours = module.Conv2d(3, 4, kernel, padding="same", dilation=dilation, dtype=torch.float64)
    theirs = torch.nn.Conv2d(3, 4, kernel, padding="same", dilation=dilation, dtype=torch.float64)
    theirs.load_state_dict(ours.state_dict())
    assert ours.padding == theirs.padding == "same"
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-12, atol=1e-12)
    for refused in (lambda: module.conv2d(x, w, None, 2, "same", version=2), lambda: module.conv2d(x, w, None, 1, "full"),
                    lambda: module.Conv2d(3, 4, kernel, stride=2, padding="same"),
                    lambda: module.Conv2d(3, 4, kernel, padding="full")):
        with pytest.raises(ValueError, match="padding"):
            refused()


@pytest.mark.parametrize("exercise", ["08_conv_bn_relu_inference", "09_conv_bn_relu_training", "10_cudnn_conv"])
def test_the_other_wrappers_take_the_padding_words_as_pytorch(exercise, monkeypatch):
    """08's, 09's and 10's functional ops take "same" and "valid" as F.conv2d does: their op, played by a
    numbers-only stand-in built on F.conv2d, gets the input and the padding that make F.conv2d's result
    (x padded after its end where d (k - 1) is odd); "same" with a stride and other words are refused
    naming the padding."""
    from grader import specs

    spec = specs.by_exercise(exercise)
    try:
        module = specs.import_exercise_module(TREE / spec.exercise, spec)
    except Exception as e:  # noqa: BLE001: no toolchain or build here
        pytest.skip(f"{exercise}: its extension cannot load here: {str(e).splitlines()[0][:200]}")
    seen = []

    def conv(x, w, stride, padding, dilation):
        assert all(isinstance(p, int) for p in padding), padding
        seen.append(padding)
        return F.conv2d(x, w, None, stride, padding, dilation)

    if exercise == "10_cudnn_conv":
        monkeypatch.setattr(module, "_conv2d", lambda x, w, b, s, p, d, g, m: conv(x, w, s, p, d))
        call = lambda x, w, s, p, d: module.conv2d(x, w, None, s, p, d)  # noqa: E731
    elif exercise == "08_conv_bn_relu_inference":
        monkeypatch.setattr(module, "lib", mock.Mock(ops=mock.Mock(conv_bn_relu_inference=lambda x, w, b, g, bb, m, v,
                                                                      e, s, p, d, ver: conv(x, w, s, p, d))))
        call = lambda x, w, s, p, d: module.conv_bn_relu_inference(x, w, None, None, None, None, None, 1e-5, s, p, d,  # noqa: E731
                                                                   version=1)
    else:
        monkeypatch.setattr(module.ConvBNReLUFunction, "apply",
                            lambda x, w, b, g, bb, m, v, n, t, mom, e, s, p, d, ver: conv(x, w, s, p, d))
        call = lambda x, w, s, p, d: module.conv_bn_relu(x, w, None, None, None, None, None, None, stride=s,  # noqa: E731
                                                         padding=p, dilation=d, version=1)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 3, 9, 8, generator=g, dtype=torch.float64)
    for kernel, dilation in PADDING_WORD_CASES:
        w = torch.randn(4, 3, *kernel, generator=g, dtype=torch.float64)
        for word, stride in (("same", 1), ("valid", 2)):
            torch.testing.assert_close(call(x, w, stride, word, dilation), F.conv2d(x, w, None, stride, word, dilation),
                                       rtol=1e-12, atol=1e-12)
        for word, stride in (("same", 2), ("full", 1)):
            with pytest.raises(ValueError, match="padding"):
                call(x, w, stride, word, dilation)
    assert seen, "the stand-in op was never called"


def test_opcheck_autograd_registration(ex06, ex07):
    checks = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static")
    op6, op7 = ex06[1], ex07[1]
    for seed in (1, 2):  # p > d (k - 1) along an axis (and, for 07, groups)
        x, weight, b, kw = _conv_args(seed, torch.float32)
        args = (x, weight, b, list(kw["stride"]), list(kw["padding"]), list(kw["dilation"]), kw["groups"], 2)
        torch.library.opcheck(op6.ops.conv2d, args, test_utils=checks)
        x, weight, b, kw = _transposed_args(seed, torch.float32)
        args = (x, weight, b, list(kw["stride"]), list(kw["padding"]), list(kw["output_padding"]), kw["groups"],
                list(kw["dilation"]), 2)
        torch.library.opcheck(op7.ops.conv_transpose2d, args, test_utils=checks)


def _backward_calls(op, run):
    """The calls of the op that the backward of run() made (the forward's is the first)."""
    del op.calls[:]
    y = run()
    assert len(op.calls) == 1
    y.backward(torch.randn_like(y))
    return op.calls[1:]


@pytest.mark.parametrize("which", ("x", "weight", "bias", "x and weight"))
def test_only_the_gradients_asked_for_are_computed(ex06, ex07, which):
    """ctx.needs_input_grad: a gradient nobody asked for costs no call (and none is returned)."""
    for (module, op), make, fn in ((ex06, _conv_args, "conv2d"), (ex07, _transposed_args, "conv_transpose2d")):
        x, weight, b, kw = make(5)
        wanted = {"x": (x,), "weight": (weight,), "bias": (b,), "x and weight": (x, weight)}[which]
        for t in (x, weight, b):
            t.requires_grad_(any(t is u for u in wanted))
        calls = _backward_calls(op, lambda: getattr(module, fn)(x, weight, b, version=2, **kw))
        assert len(calls) == {"x": 1, "weight": 1, "bias": 0, "x and weight": 2}[which], (fn, calls)
        for t in (x, weight, b):
            assert (t.grad is not None) == any(t is u for u in wanted)


def test_data_gradient_calls_are_stride_1_in_the_forwards_version(ex06, ex07):
    for seed in range(12):
        x, weight, b, kw = _conv_args(seed)
        weight.requires_grad_(False)
        for version in (1, 2) + ((3,) if kw["groups"] == 1 else ()):
            (call,) = _backward_calls(ex06[1], lambda: ex06[0].conv2d(x, weight, b, version=version, **kw))
            assert call["args"][0] == [1, 1] and call["version"] == version
        x, weight, b, kw = _transposed_args(seed)
        weight.requires_grad_(False)
        for version in (1, 2):
            (call,) = _backward_calls(ex07[1], lambda: ex07[0].conv_transpose2d(x, weight, b, version=version, **kw))
            assert call["args"][0] == [1, 1] and call["version"] == version


def test_version_3_weight_gradient_in_chunks_runs_version_2(ex06):
    """Version 3 takes groups 1 only: split into chunks (groups of the call), the weight gradient runs on
    version 2; as one call, on version 3."""
    module, op = ex06
    g = torch.Generator().manual_seed(0)
    for n, size, chunked in ((8, 40, True), (2, 5, False)):
        x = _rand(g, n, 3, size, size).requires_grad_(False)
        weight = _rand(g, 4, 3, 3, 3).requires_grad_()
        (call,) = _backward_calls(op, lambda: module.conv2d(x, weight, None, padding=1, version=3))
        assert (call["version"], call["args"][3]) == ((2, 4) if chunked else (3, 1)), call


def test_weight_gradient_chunks(ex06, ex07):
    for module in (ex06[0], ex07[0]):
        chunks = module.weight_grad_chunks
        # ResNet-50's 64 -> 64 3x3 at batch 32, 56 x 56, on 132 SMs: 9 tiles of 64 x 64, so 32 chunks
        assert chunks(32, 64 * 64 * 9, 32 * 56 * 56, 1, 132) == 32
        # a layer with enough tiles of its own, and a small problem, stay one call
        assert chunks(32, 512 * 512 * 9, 32 * 14 * 14, 1, 132) == 1
        assert chunks(2, 4 * 3 * 9, 2 * 5 * 5, 1, 132) == 1
        # the smallest divisor of the batch at or above the 30 chunks wanted; a batch of 1 has none
        assert chunks(31, 64 * 64 * 9, 31 * 56 * 56, 1, 132) == 31
        assert chunks(30, 64 * 64 * 9, 30 * 56 * 56, 1, 132) == 30
        assert chunks(28, 64 * 64 * 9, 28 * 56 * 56, 1, 132) == 28
        assert chunks(1, 64, 10**6, 1, 132) == 1
        for n, outputs, reduction, groups, sms in itertools.product((1, 6, 12, 32, 64), (9, 4096 * 3, 10**6),
                                                                     (10, 5000, 10**6), (1, 32, 960, 40000), (40, 132)):
            p = chunks(n, outputs, reduction, groups, sms)
            assert n % p == 0 and 1 <= p <= n and (p == 1 or groups * p <= 65535), (n, outputs, reduction, groups, p)


@pytest.mark.parametrize("fn", ("conv2d", "conv_transpose2d"))
def test_empty_batch_gives_zero_gradients(ex06, ex07, fn):
    module, op = ex06 if fn == "conv2d" else ex07
    x = torch.zeros(0, 4, 6, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(6, 2, 3, 3, dtype=torch.float64, requires_grad=True) if fn == "conv2d" else \
        torch.randn(4, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    y = getattr(module, fn)(x, weight, b, stride=2, padding=1, groups=2, version=2)
    y.sum().backward()
    assert x.grad.shape == x.shape and torch.equal(weight.grad, torch.zeros_like(weight))
    assert torch.equal(b.grad, torch.zeros_like(b))


# ------------------------------------------------ MobileNet's weight-gradient calls, as planned

def test_weight_gradient_calls_of_mobilenet_layers(ex06):
    """MobileNetV2's layers at batch 32, their weight gradient as version 2 gets it (chunks for an H100's
    132 SMs): where each group of the call has one input channel (a chunk per image), the depthwise
    kernel is asked, with a whole output plane as its kernel: only for the depthwise layers (a dense
    layer's chunks keep two images), and its tile fits in shared memory, or the launcher falls back to
    the implicit GEMM, which takes the call (at most 65535 groups)."""
    from grader.bench import model_shapes
    from tests import test_depthwise_tile_plan as m

    depthwise = fallback = 0
    for layer, _ in model_shapes.unique(model_shapes.mobilenet_v2()):
        if not isinstance(layer, model_shapes.Conv):
            continue
        ho, wo = layer.out_hw
        cin_g, groups = layer.cin // layer.groups, layer.groups
        chunks = ex06[0].layer_chunks(layer.n, (layer.cout, cin_g, layer.k, layer.k), (ho, wo), groups, 132)
        assert layer.n % chunks == 0 and groups * chunks <= 65535
        # the call: x' (cin / g, g n, h, w), dy' (g chunks cout / g, n / chunks, ho, wo), stride 1 (the
        # forward's dilation), dilation the forward's stride, its padding
        k_out = [m.out_size(size, k, 1, layer.padding, layer.stride) for size, k in ((layer.h, ho), (layer.w, wo))]
        assert min(k_out) >= layer.k
        s = m.Shape(cin_g, groups * layer.n, layer.h, layer.w, chunks * layer.cout, ho, wo, k_out[0], k_out[1], (1, 1),
                    (layer.padding,) * 2, (layer.stride,) * 2, groups * chunks)
        if s.groups != s.cin:
            continue
        assert layer.cout // groups <= 2, layer  # a dense layer's call stays a GEMM
        assert m.depthwise_path(s, 4) != "direct"  # a whole plane as the kernel: 7 x 7 at least
        plan = m.depthwise_tile(s, 4)
        if plan is None:
            fallback += 1
        else:
            (tp, rows, cols, in_rows, in_cols, _), grid = plan
            assert tp * in_rows * in_cols <= m.kDwSmemBytes // 4 and grid[1] <= 65535
            depthwise += 1
    assert depthwise >= 1 and fallback >= 1


# -------------------------------- the grader's autograd group on the CPU, the stand-in for the op

class _CpuContext:
    """grader.verify.spec.Context whose generators are on the CPU (the checks ask for the GPU's)."""

    def __new__(cls, module, seed):
        from grader.verify.spec import Context

        class Cpu(Context):
            def generator(self, name, device="cuda"):
                return super().generator(name, "cpu")

        return Cpu(module, seed, REPO)


@pytest.fixture
def grade_on_the_cpu(monkeypatch):
    """The generated properties' device, and the conv specs' inputs, on the CPU."""
    from grader.verify import properties
    from grader.specs import ex06_conv2d

    monkeypatch.setattr(properties, "DEVICE", properties.Device("cpu"))
    monkeypatch.setattr(ex06_conv2d, "randn", lambda g, shape, dtype, scale=1.0:
                        (torch.randn(shape, generator=g, dtype=torch.float32) * scale).to(dtype))


def _autograd_checks(exercise: str):
    """The autograd group's checks, hand-written and generated, but the profiler's and the huge one (GPU
    only: it asks for more than 8 GiB of free GPU memory)."""
    from grader import specs as spec
    from grader.verify.properties import property_checks

    s = spec.by_exercise(exercise)
    return [c for c in s.checks() + property_checks(s)
            if c.group == "autograd" and "own kernels" not in c.name and not c.huge]


def _failures(checks, module, first_only=False) -> dict[str, str]:
    from grader.verify.checks import CheckFailure

    ctx = _CpuContext(module, 3)
    failed = {}
    for c in checks:
        try:
            c.run(ctx)
        except CheckFailure as e:
            failed[c.name] = str(e)
            if first_only:
                break
    return failed


@pytest.mark.parametrize("exercise", ("06", "07"))
def test_the_autograd_group_passes_the_solution(ex06, ex07, grade_on_the_cpu, exercise):
    module = (ex06 if exercise == "06" else ex07)[0]
    checks = _autograd_checks(exercise)
    names = " ".join(c.name for c in checks)
    assert "gradcheck" in names and "random shape" in names and "[gradients]" in names and "opcheck" in names
    assert _failures(checks, module) == {}


@pytest.mark.parametrize("exercise", ("06", "07"))
def test_the_huge_gradient_check_on_its_case_made_small(ex06, ex07, grade_on_the_cpu, monkeypatch, exercise):
    """The huge weight-gradient check (ConvSpec._check_huge_gradient) on its case cut to 64 images of
    15 x 15 (the batch's pieces need more than 2^31 elements: a GPU's, where test_gpu_grading's declared
    paths see them taken): the solution passes, a weight gradient 1% off fails."""
    from dataclasses import replace

    from grader import specs as spec
    from grader.verify.checks import CheckFailure
    from grader.specs import ex06_conv2d

    monkeypatch.setattr(ex06_conv2d, "require_free_memory", lambda nbytes, what: None)
    module = (ex06 if exercise == "06" else ex07)[0]
    s = spec.by_exercise(exercise)
    small = replace(s.huge_gradient_case, n=64, h=15, w=15, padding=(4, 4) if s.transposed else (0, 0))
    (check,) = [c for c in replace(s, huge_gradient_case=small).checks() if c.huge]
    assert check.group == "autograd"
    ctx = _CpuContext(module, 3)
    check.run(ctx)
    right = module._weight_grad
    monkeypatch.setattr(module, "_weight_grad", lambda *args: right(*args) * 1.01)
    with pytest.raises(CheckFailure, match="relative error"):
        check.run(ctx)


_counter = itertools.count()


@pytest.mark.parametrize("name", ("backward_kernel_not_flipped", "backward_ignores_the_stride",
                                  "weight_gradient_drops_groups", "backward_through_pytorch"))
@pytest.mark.parametrize("exercise", ("06", "07"))
def test_the_known_wrong_backwards_fail_the_autograd_group(grade_on_the_cpu, tmp_path, exercise, name):
    """tests/known_wrong's backward variants, with the stand-in for the op: each fails the group's
    float32 gradients (gradcheck, first in the group, fails them too, but its report of a failure
    recomputes every Jacobian: minutes on these cores), but the one that calls PyTorch's convolution,
    whose gradients are right: only the profiler (on a GPU) tells it (grader.verify.observe.KernelRule)."""
    from tests.known_wrong import all_variants

    folder, file = EXERCISES[exercise]
    variant = next(v for v in all_variants() if v.exercise == folder and v.name == name)
    assert variant.loses == {"autograd"} and variant.keeps is None
    variant.materialize(tmp_path)
    make = stand_in_06 if exercise == "06" else stand_in_07
    module = _load(folder, file, make(f"course_test_variant_{next(_counter)}"), root=tmp_path)
    checks = [c for c in _autograd_checks(exercise) if "gradcheck" not in c.name and "opcheck" not in c.name]
    if name == "backward_through_pytorch":
        assert _failures(checks[:5], module) == {}
        return
    failed = _failures(checks, module, first_only=True)
    assert failed, name
    (reason,) = failed.values()
    expected = {"gradcheck": "relative error"}.get(variant.reason, variant.reason)  # gradcheck's, on a GPU
    assert expected in reason, reason


def test_each_versions_backward_may_run_every_kernel_of_its_version():
    """The profiler's rule for a version's backward follows the spec's versions_graded (a kernel added to
    a version, such as a weight reorder, is allowed in its backward too), and version 3's includes
    version 2's, which its chunked weight gradient runs."""
    from grader import specs as spec
    from grader.specs.ex06_conv2d import kernel_names

    for s in spec.select(["06", "07"]):
        assert set(s.backward_versions) == {v for _, v, _ in s.versions_graded if v is not None}
        for v in s.backward_versions:
            names = set(s.backward_kernel_names(v))
            for _, graded, kernel in s.versions_graded:
                if graded == v or (v in s.tf32_versions and graded == s.autograd_version):
                    assert set(kernel_names(kernel)) <= names, (s.exercise, v, kernel)
    six = spec.by_exercise("06")
    assert {"conv2d_kernel3", "conv2d_kernel2", "conv2d_depthwise_kernel"} <= set(six.backward_kernel_names(3))
