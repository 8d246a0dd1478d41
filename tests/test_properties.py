"""The generated properties (grader.verify.properties), on the CPU: a correct op passes every one, and each
kind of wrong op fails the property made for it, whatever its name. The ops here are small PyTorch
ops registered with torch.library, so the fake-tensor and autograd properties run for real; the GPU
grade applies the same checks to the exercises' own ops."""
from __future__ import annotations

import re
import threading
import types
from dataclasses import dataclass

import pytest
import torch

from grader.verify import properties
from grader.verify.checks import CheckFailure
from grader.verify.properties import Device, property_checks
from grader.verify.spec import AuditCall, Context, Edge, Spec, audit_randn, random_shape, values

LIB = torch.library.Library("course_props_test", "DEF")  # noqa: TOR901 (kept alive for the module's lifetime)
LIB.define("scale(Tensor x, float a) -> Tensor")
LIB.define("scale_transposed_fake(Tensor x, float a) -> Tensor")


def _scale(x, a):
    return torch.where(x > 0, x, x * a)


@torch.library.impl("course_props_test::scale", "CPU")
def _scale_cpu(x, a):
    return _scale(x, a).contiguous()  # as its fake says (torch.where follows a transposed input's layout)


@torch.library.impl("course_props_test::scale_transposed_fake", "CPU")
def _scale_other_cpu(x, a):
    return _scale(x, a).contiguous()


@torch.library.register_fake("course_props_test::scale")
def _scale_fake(x, a):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("course_props_test::scale_transposed_fake")
def _other_fake(x, a):  # a fake that lays its result out otherwise than the real op does
    return torch.empty(tuple(reversed(x.shape)), dtype=x.dtype).t() if x.dim() == 2 else torch.empty_like(x)


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.where(x > 0, grad, grad * ctx.a), None


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.a = inputs[1]


torch.library.register_autograd("course_props_test::scale", _backward, setup_context=_setup)


@dataclass
class ScaleSpec(Spec):
    registered: str = "lib.ops.scale"

    def audit_calls(self, device, dtype):
        x = audit_randn(4, 7, device=device, dtype=dtype, seed=1, scale=2.0)
        return [self._call(x, 0.3)]

    def _call(self, x, a):
        return AuditCall("scale", (x, a), ("x", "a"), lambda x, a: _scale(x.double(), a), grad_args=(0,),
                         registered=self.registered, nonfinite=(0,), scalars={1: (0.0, -0.5, 1.7)},
                         defaults={1: DEFAULT_A})

    def random_calls(self, g, device, dtype):
        seed = int(torch.randint(0, 2**31, (1,), generator=g))
        return [self._call(audit_randn(*random_shape(g, max_numel=1 << 12), device=device, dtype=dtype, seed=seed), 0.3)]


DEFAULT_A = 0.25  # "PyTorch's default" of the toy op's scalar


SPEC = ScaleSpec(exercise="99_scale", title="scale", module="scale.py",
                 points={"forward": 1, "autograd": 1}, property_dtypes=("float32", "float64"))


def _module(scale, ops=None):
    lib = types.SimpleNamespace(ops=ops or torch.ops.course_props_test)
    return types.SimpleNamespace(scale=scale, lib=lib)


def _right(x, a=DEFAULT_A):
    return torch.ops.course_props_test.scale(x, float(a))


def _another_default(x, a=0.3):
    return torch.ops.course_props_test.scale(x, float(a))


def _no_default(x, a):
    return torch.ops.course_props_test.scale(x, float(a))


def _ignores_negative_scales(x, a):
    return torch.ops.course_props_test.scale(x, abs(float(a)))


def _reads_strided_as_contiguous(x, a):
    flat = torch.as_strided(x, x.shape, torch.empty(x.shape).stride()) if not x.is_contiguous() else x
    return torch.ops.course_props_test.scale(flat, float(a))


def _drops_nan(x, a):
    return torch.nan_to_num(torch.ops.course_props_test.scale(x, float(a)), nan=0.0)


_kept = {}


def _keeps_one_buffer_per_shape(x, a):
    out = _kept.setdefault((tuple(x.shape), x.dtype), torch.empty_like(x))
    with torch.no_grad():
        out.copy_(_scale(x, float(a)))
    return out


def _writes_its_input(x, a):
    with torch.no_grad():
        x.mul_(1.0)
        x.add_(0.0).nan_to_num_()
        x[..., :1] = x[..., :1] + 0.0  # a write that changes nothing
        if x.numel():
            x.view(-1)[0] = x.view(-1)[0] * 1.0000001 + 1e-3
    return torch.ops.course_props_test.scale(x, float(a))


class Deferred(torch.Tensor):
    pass


def _returns_a_subclass(x, a):
    return torch.ops.course_props_test.scale(x, float(a)).as_subclass(Deferred)


def _leaves_a_thread(x, a):
    threading.Thread(target=threading.Event().wait, args=(5,), daemon=True).start()
    return torch.ops.course_props_test.scale(x, float(a))


def _no_gradient(x, a):
    return _scale(x.detach(), float(a))


def _offset_under_autograd(x, a):
    """Right without autograd; under it, every value off by 1e-3 and every gradient still right."""
    y = torch.ops.course_props_test.scale(x, float(a))
    return y + 1e-3 if x.requires_grad else y


def _column_major(x, a):
    y = torch.ops.course_props_test.scale(x, float(a))
    return y.t().contiguous().t() if y.dim() == 2 else y  # the right values, laid out column by column


_memo = {}


def _memo_without_copy(x, a):
    """Keeps x alive and its result under x's address, shape and version: the same result object comes
    back for an unchanged x (a caller that overwrote it gets the overwritten values)."""
    key = (x.data_ptr(), tuple(x.shape), x._version, float(a))
    if key not in _memo:
        _memo[key] = (x, torch.ops.course_props_test.scale(x, float(a)))
    return _memo[key][1]


def _memo_by_address(x, a):
    """A copy of the result kept under x's address and shape: stale once x changes in place."""
    key = (x.data_ptr(), tuple(x.shape), float(a))
    if key not in _memo:
        _memo[key] = (x, torch.ops.course_props_test.scale(x, float(a)))
    return _memo[key][1].clone()


@pytest.fixture(autouse=True)
def cpu(monkeypatch):
    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))
    _kept.clear()
    _memo.clear()


def _run(spec, module, only=None, seed=7, own_kernels: bool = False) -> dict[str, str]:
    """{check name: failure or ""} for every generated check (but the profiler's, unless `own_kernels`:
    then under the spec's kernel rule), or those named `only`."""
    ctx = Context(module=module, seed=seed, exercise_dir=None, kernel_rule=spec.kernel_rule() if own_kernels else None)
    found = {}
    for check in property_checks(spec):
        if ("own kernels" in check.name and not own_kernels) or (only and not any(o in check.name for o in only)):
            continue
        try:
            check.run(ctx)
            found[check.name] = ""
        except CheckFailure as e:
            found[check.name] = str(e)
    return found


def test_every_property_is_generated_for_the_op():
    names = [c.name for c in property_checks(SPEC)]
    for what in ("random shapes", "non-contiguous arguments", "PyTorch's defaults", "NaN and infinities", "every declared edge",
                 "on the current stream", "two results held at once", "gradients", "output metadata",
                 properties.FAKE_REFUSES):
        assert any(what in n for n in names), (what, names)
    assert {c.group for c in property_checks(SPEC) if "gradients" in c.name} == {"autograd"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_right_op_passes_every_property(seed):
    failed = {k: v for k, v in _run(SPEC, _module(_right), seed=seed).items() if v}
    assert not failed, failed


@pytest.mark.parametrize("op, property_, words", [
    (_ignores_negative_scales, "every declared edge", "a=-0.5"),
    (_reads_strided_as_contiguous, "non-contiguous", "strided view"),
    (_returns_a_subclass, "non-contiguous", "plain torch.Tensor"),
    (_leaves_a_thread, "non-contiguous", "host thread"),
    (_drops_nan, "NaN and infinities", "NaN"),
    (_keeps_one_buffer_per_shape, "two results held at once", "shares memory with the first"),
    (_writes_its_input, "random shapes", "was modified"),
    (_returns_a_subclass, "random shapes", "plain torch.Tensor"),
    (_leaves_a_thread, "random shapes", "host thread"),
    (_no_gradient, "gradients", "does not require grad"),
    (_offset_under_autograd, "gradients", "the forward's result"),
    (_column_major, "output strides", "registered fake"),
    (_memo_without_copy, "state between calls", "filled the previous result with NaN"),
    (_memo_by_address, "state between calls", "changed in place"),
    (_another_default, "PyTorch's defaults", "a left out"),
    (_no_default, "PyTorch's defaults", "missing 1 required positional argument"),
])
def test_each_kind_of_wrong_op_fails_its_property(op, property_, words):
    found = _run(SPEC, _module(op), only=[property_])
    assert found and all(found.values()), found
    assert any(words in v for v in found.values()), found


def test_output_metadata_is_checked_against_the_registered_fake():
    spec = ScaleSpec(exercise="99_scale", title="scale", module="scale.py", points={"forward": 1, "autograd": 1},
                     registered="lib.ops.scale_transposed_fake")
    found = _run(spec, _module(_right), only=["output metadata"])
    assert found and all("registered fake" in v for v in found.values()), found
    assert not any(_run(SPEC, _module(_right), only=["output metadata"]).values())


# --- the registered fake refuses what the op refuses (shape checks the fake must make too) ---------------

LIB.define("scale_rows(Tensor x, Tensor w) -> Tensor")
LIB.define("scale_rows_unchecked_fake(Tensor x, Tensor w) -> Tensor")
LIB.define("scale_rows_strict_fake(Tensor x, Tensor w) -> Tensor")
LIB.define("scale_rows_rank_only_fake(Tensor x, Tensor w) -> Tensor")
LIB.define("scale_rows_limited(Tensor x, Tensor w) -> Tensor")
LIB.define("scale_rows_wrong_past_3(Tensor x, Tensor w) -> Tensor")


def _scale_rows(x, w):
    """x (N, C) times w (C,) along its rows: refuses any other shapes, naming the argument."""
    if x.dim() != 2:
        raise RuntimeError(f"x must have 2 dimensions, but has shape {list(x.shape)}")
    if w.dim() != 1 or w.shape[0] != x.shape[1]:
        raise RuntimeError(f"w must have shape [{x.shape[1]}], but has shape {list(w.shape)}")
    return (x * w).contiguous()


for _name in ("scale_rows", "scale_rows_unchecked_fake", "scale_rows_strict_fake", "scale_rows_rank_only_fake"):
    torch.library.impl(f"course_props_test::{_name}", "CPU")(_scale_rows)


@torch.library.impl("course_props_test::scale_rows_limited", "CPU")
def _scale_rows_limited(x, w):  # a limit of the op's own, which PyTorch does not have: at most 3 rows
    if x.dim() == 2 and x.shape[0] > 3:
        raise RuntimeError(f"x: at most 3 rows, but has shape {list(x.shape)}")
    return _scale_rows(x, w)


@torch.library.register_fake("course_props_test::scale_rows_limited")
def _scale_rows_limited_fake(x, w):  # PyTorch's checks only: the op refuses the 4-row x when it runs
    return _scale_rows_fake(x, w)


@torch.library.register_fake("course_props_test::scale_rows")
def _scale_rows_fake(x, w):  # the op's checks, made on the fake tensors' shapes
    torch._check(x.dim() == 2, lambda: f"x must have 2 dimensions, but has shape {list(x.shape)}")
    torch._check(w.dim() == 1 and w.shape[0] == x.shape[1],
                 lambda: f"w must have shape [{x.shape[1]}], but has {list(w.shape)}")
    return x.new_empty(x.shape)


@torch.library.register_fake("course_props_test::scale_rows_unchecked_fake")
def _scale_rows_unchecked(x, w):  # the output's shape alone: accepts a w of any length, an x of any rank
    return x.new_empty(x.shape)


@torch.library.register_fake("course_props_test::scale_rows_rank_only_fake")
def _scale_rows_rank_only(x, w):  # x's rank checked, w's length not
    torch._check(x.dim() == 2, lambda: f"x must have 2 dimensions, but has shape {list(x.shape)}")
    return x.new_empty(x.shape)


@torch.library.register_fake("course_props_test::scale_rows_strict_fake")
def _scale_rows_strict(x, w):  # stricter than the op: a limit of 3 rows the op does not have
    torch._check(x.dim() == 2 and x.shape[0] <= 3, lambda: f"x must have at most 3 rows, but has shape {list(x.shape)}")
    torch._check(w.dim() == 1 and w.shape[0] == x.shape[1],
                 lambda: f"w must have shape [{x.shape[1]}], but has {list(w.shape)}")
    return x.new_empty(x.shape)


@torch.library.impl("course_props_test::scale_rows_wrong_past_3", "CPU")
def _scale_rows_wrong_past_3(x, w):  # accepts x of 4 rows (a faulty limit check) and answers it wrong
    return _scale_rows(x, w) if x.dim() != 2 or x.shape[0] <= 3 else torch.zeros_like(x)


@torch.library.register_fake("course_props_test::scale_rows_wrong_past_3")
def _scale_rows_wrong_past_3_fake(x, w):
    return _scale_rows_strict(x, w)


@dataclass
class RowsSpec(Spec):
    registered: str = "lib.ops.scale_rows"
    four_rows_refused: bool = False  # declare x of 4 rows an edge the op may refuse (as 08's eps = 0)

    def audit_calls(self, device, dtype):
        x = audit_randn(3, 5, device=device, dtype=dtype, seed=1)
        w = audit_randn(5, device=device, dtype=dtype, seed=2)
        four_rows = Edge("4 rows", make=lambda t: torch.cat([t, t[:1]]), refused=True)
        domains = {0: (four_rows,)} if self.four_rows_refused else {}
        return [AuditCall("scale_rows", (x, w), ("x", "w"), lambda x, w: _scale_rows(x.double(), w.double()),
                          registered=self.registered, domains=domains)]


def test_the_registered_fake_must_refuse_what_the_op_refuses():
    rows = types.SimpleNamespace(scale_rows=lambda x, w: torch.ops.course_props_test.scale_rows(x, w),
                                 lib=types.SimpleNamespace(ops=torch.ops.course_props_test))
    only = [properties.FAKE_REFUSES]
    spec = RowsSpec(exercise="97_rows", title="rows", module="rows.py", points={"forward": 1})
    found = _run(spec, rows, only=only)
    assert list(found) == [f"scale_rows [{properties.FAKE_REFUSES}]"] and not any(found.values()), found
    assert [c.group for c in property_checks(spec) if properties.FAKE_REFUSES in c.name] == ["forward"]
    for fake, words in (("unchecked", "`x` [3, 5] with an extra leading dim: the op refuses it (x must have 2 dim"),
                        ("rank_only", "`x` [3, 5] with dim 1 5 -> 6: the op refuses it (w must have shape [6]"),
                        ("strict", "`x` [3, 5] with dim 0 3 -> 4: the op computes it, but its registered fake")):
        wrong = RowsSpec(exercise="97_rows", title="rows", module="rows.py", points={"forward": 1},
                         registered=f"lib.ops.scale_rows_{fake}_fake")
        found = _run(wrong, rows, only=only)
        assert found and all(words in v for v in found.values()), found
    # an op's own limit (PyTorch computes 4 rows): its fake may trace it, the op refusing it when it runs
    limited = types.SimpleNamespace(lib=types.SimpleNamespace(ops=torch.ops.course_props_test))
    found = _run(RowsSpec(exercise="97_rows", title="rows", module="rows.py", points={"forward": 1},
                          registered="lib.ops.scale_rows_limited"), limited, only=only)
    assert found and not any(found.values()), found
    # unless the spec declares that limit an edge the op may refuse: the op refusing it, its fake must too,
    # whatever PyTorch computes there
    found = _run(RowsSpec(exercise="97_rows", title="rows", module="rows.py", points={"forward": 1},
                          registered="lib.ops.scale_rows_limited", four_rows_refused=True), limited, only=only)
    assert found and all("`x` 4 rows: the op refuses it (x: at most 3 rows" in v for v in found.values()), found
    # an op that computes what its fake refuses, wrongly: its values (or input checks) judge that, not the fake
    found = _run(RowsSpec(exercise="97_rows", title="rows", module="rows.py", points={"forward": 1},
                          registered="lib.ops.scale_rows_wrong_past_3"), limited, only=only)
    assert found and not any(found.values()), found


LIB.define("add_sum(Tensor x, int[] by) -> Tensor")


@torch.library.impl("course_props_test::add_sum", "CPU")
def _add_sum(x, by):  # any length computed (a length check left out), as PyTorch's reference computes it
    return x + sum(by)


@torch.library.register_fake("course_props_test::add_sum")
def _add_sum_fake(x, by):  # the op's intended check: two values
    torch._check(len(by) == 2, lambda: f"by must be 2 values, got {list(by)}")
    return x.new_empty(x.shape)


@dataclass
class AddSumSpec(Spec):
    def audit_calls(self, device, dtype):
        x = audit_randn(3, 5, device=device, dtype=dtype, seed=1)
        return [AuditCall("add_sum", (x, [1, 2]), ("x", "by"), lambda x, by: x.double() + sum(by),
                          registered="lib.ops.add_sum")]


def test_a_list_accepted_at_another_length_is_judged_by_the_input_checks_not_the_fake():
    """An op whose length check is left out computes a padding of one value (rightly where what lies past
    the list happens to be 0, wrongly elsewhere): the list-components property of its input checks judges
    that; its fake, refusing the length as the exercise declares, is not at fault."""
    module = types.SimpleNamespace(lib=types.SimpleNamespace(ops=torch.ops.course_props_test))
    spec = AddSumSpec(exercise="97_rows", title="rows", module="rows.py", points={"forward": 1})
    found = _run(spec, module, only=[properties.FAKE_REFUSES])
    assert found and not any(found.values()), found


# --- declared domains (grader.verify.spec.Edge): every edge tried, the gradients frozen in turn, module options ---

def _wrong_derivative_at_zero(x, a):
    return torch.where(x >= 0, x, x * float(a))  # the same values; at 0 the derivative is 1, not a


class _Product(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        if not all(ctx.needs_input_grad):  # wrong: a frozen argument loses the other's gradient too
            return None, None
        return g * y, g * x


@dataclass
class ProductSpec(Spec):
    def audit_calls(self, device, dtype):
        x = audit_randn(3, 5, device=device, dtype=dtype, seed=1)
        y = audit_randn(3, 5, device=device, dtype=dtype, seed=2)
        return [AuditCall("product", (x, y), ("x", "y"), lambda x, y: x.double() * y.double(), grad_args=(0, 1))]


PRODUCT = ProductSpec(exercise="98_product", title="product", module="product.py", points={"forward": 1, "autograd": 1})


def _zeros_spec():
    from grader.verify.spec import EXACT_ZEROS

    class ZerosSpec(ScaleSpec):
        def _call(self, x, a):
            call = super()._call(x, a)
            call.domains = {0: (EXACT_ZEROS,), 1: (Edge("-7.0", -7.0, refused=True),)}
            return call
    return ZerosSpec(exercise="99_scale", title="scale", module="scale.py", points={"forward": 1, "autograd": 1},
                     property_dtypes=("float32", "float64"))


def test_the_gradients_at_an_edge_of_a_tensor_argument_are_checked():
    spec = _zeros_spec()
    assert not any(_run(spec, _module(_right), only=["gradients", "every declared edge"]).values())
    found = _run(spec, _module(_wrong_derivative_at_zero), only=["gradients"])
    assert any("exact zeros" in v for v in found.values()), found


def test_a_refused_edge_is_refused_or_right():
    spec = _zeros_spec()

    def refuses(x, a):
        if a == -7.0:
            raise ValueError(f"a={a} is not supported")
        return _right(x, a)

    def refuses_without_naming(x, a):
        if a == -7.0:
            raise ValueError("not supported")
        return _right(x, a)

    assert not any(_run(spec, _module(refuses), only=["every declared edge"]).values())
    found = _run(spec, _module(refuses_without_naming), only=["every declared edge"])
    assert found and all("a=-7.0" in v for v in found.values()), found


def test_each_differentiable_argument_is_frozen_in_turn():
    found = _run(PRODUCT, types.SimpleNamespace(product=lambda x, y: x * y), only=["gradients"])
    assert found and not any(found.values()), found
    found = _run(PRODUCT, types.SimpleNamespace(product=_Product.apply), only=["gradients"])
    assert any("requires_grad=False" in v for v in found.values()), found


class _SwitchedProduct(torch.autograd.Function):
    """x * y, or x * y + x when `shifted`. Off that mode it keeps x only when x itself needs a gradient,
    though y's gradient reads it: right in the base call (shifted), wrong with x frozen in the other mode
    (09's z kept only for gamma, which only eval's backward missed)."""

    @staticmethod
    def forward(ctx, x, y, shifted):
        keep = ctx.needs_input_grad[0] or shifted
        ctx.save_for_backward(x if keep else torch.zeros_like(x), y)
        ctx.shifted = shifted
        return x * y + (x if shifted else 0)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * (y + 1 if ctx.shifted else y), g * x, None


@dataclass
class SwitchedProductSpec(Spec):
    def audit_calls(self, device, dtype):
        x = audit_randn(3, 5, device=device, dtype=dtype, seed=1)
        y = audit_randn(3, 5, device=device, dtype=dtype, seed=2)
        return [AuditCall("product", (x, y, True), ("x", "y", "shifted"),
                          lambda x, y, s: x.double() * y.double() + (x.double() if s else 0),
                          grad_args=(0, 1), domains={2: values(False)})]


def test_each_differentiable_argument_is_frozen_in_every_mode():
    spec = SwitchedProductSpec(exercise="98_product", title="product", module="product.py",
                               points={"forward": 1, "autograd": 1})
    assert Edge("False", False).is_mode and not Edge("1.5", 1.5).is_mode and not Edge("r", "r", refused=True).is_mode
    right = types.SimpleNamespace(product=lambda x, y, s: x * y + (x if s else 0))
    found = _run(spec, right, only=["gradients"])
    assert found and not any(found.values()), found
    found = _run(spec, types.SimpleNamespace(product=_SwitchedProduct.apply), only=["gradients"])
    assert any("`x` with requires_grad=False" in v and "shifted=False" in v for v in found.values()), found


class _TripleProduct(torch.autograd.Function):
    """x * y * z, keeping x only when x or y needs a gradient, though z's reads it too: right with any one
    argument frozen, wrong with z alone differentiated (09's z kept only for x or the weight, met when
    only BatchNorm's affine parameters are trained)."""

    @staticmethod
    def forward(ctx, x, y, z):
        keep = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        ctx.save_for_backward(x if keep else torch.zeros_like(x), y, z)
        return x * y * z

    @staticmethod
    def backward(ctx, g):
        x, y, z = ctx.saved_tensors
        return g * y * z, g * x * z, g * x * y


@dataclass
class TripleProductSpec(Spec):
    def audit_calls(self, device, dtype):
        x, y, z = (audit_randn(3, 5, device=device, dtype=dtype, seed=s) for s in (1, 2, 3))
        return [AuditCall("product", (x, y, z), ("x", "y", "z"),
                          lambda x, y, z: x.double() * y.double() * z.double(), grad_args=(0, 1, 2))]


def test_each_differentiable_argument_is_differentiated_alone_where_there_are_three():
    spec = TripleProductSpec(exercise="98_product", title="product", module="product.py",
                             points={"forward": 1, "autograd": 1})
    found = _run(spec, types.SimpleNamespace(product=lambda x, y, z: x * y * z), only=["gradients"])
    assert found and not any(found.values()), found
    found = _run(spec, types.SimpleNamespace(product=_TripleProduct.apply), only=["gradients"])
    assert any("`z` alone differentiated" in v for v in found.values()), found


class _QuadProduct(torch.autograd.Function):
    """x * y * z * w, whose backward has a path of its own when exactly two arguments need a gradient (as a
    fused backward may for a frozen BatchNorm's affine parameters), wrong there: right with every argument
    differentiated, with one frozen and with one alone."""

    @staticmethod
    def forward(ctx, x, y, z, w):
        ctx.save_for_backward(x, y, z, w)
        return x * y * z * w

    @staticmethod
    def backward(ctx, g):
        x, y, z, w = ctx.saved_tensors
        grads = [g * y * z * w, g * x * z * w, g * x * y * w, g * x * y * z]
        if sum(ctx.needs_input_grad) == 2:
            grads = [t * 2 for t in grads]
        return tuple(grads)


@dataclass
class QuadProductSpec(Spec):
    def audit_calls(self, device, dtype):
        x, y, z, w = (audit_randn(3, 5, device=device, dtype=dtype, seed=s) for s in (1, 2, 3, 4))
        return [AuditCall("product", (x, y, z, w), ("x", "y", "z", "w"),
                          lambda *a: a[0].double() * a[1].double() * a[2].double() * a[3].double(),
                          grad_args=(0, 1, 2, 3))]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_subset_between_one_and_all_but_one_is_differentiated_where_there_are_four(seed):
    """With four or more differentiable arguments, each run differentiates one subset between those the
    frozen and alone checks cover, drawn from its seed: a backward wrong only there loses its gradients."""
    spec = QuadProductSpec(exercise="97_product", title="product", module="product.py",
                           points={"forward": 1, "autograd": 1})
    found = _run(spec, types.SimpleNamespace(product=lambda *a: a[0] * a[1] * a[2] * a[3]), only=["gradients"], seed=seed)
    assert found and not any(found.values()), found
    found = _run(spec, types.SimpleNamespace(product=_QuadProduct.apply), only=["gradients"], seed=seed)
    assert any("differentiated (the others with requires_grad=False)" in v and "only" in v
               for v in found.values()), found


def test_a_module_entry_point_tries_every_option_and_wants_a_refusal_named():
    from grader.verify.properties import module_checks
    from grader.verify.spec import ModuleOptions, values

    def check(ctx, options, what):
        if options["mode"] == "reflect":  # a module computing zeros' padding for it: wrong values
            if ctx.module.refuses:
                raise ValueError("mode='reflect' is not supported")
            raise CheckFailure(f"{what}: relative error 0.3")
        if options["scale"] != ctx.module.scale_used(options["scale"]):
            raise CheckFailure(f"{what}: wrong")

    entry = ModuleOptions("Thing.from_modules", "forward", base={"mode": "zeros", "scale": 1.0},
                          options={"mode": values("reflect", refused=("reflect",)), "scale": values(0.0, None)},
                          check=check)
    spec = ScaleSpec(exercise="99_scale", title="scale", module="scale.py", points={"forward": 1})
    spec.module_options = lambda: [entry]
    (only,) = module_checks(spec)
    right = types.SimpleNamespace(refuses=True, scale_used=lambda s: s)
    only.run(Context(module=right, seed=1, exercise_dir=None))
    for wrong, words in ((types.SimpleNamespace(refuses=False, scale_used=lambda s: s), "mode='reflect'"),
                         (types.SimpleNamespace(refuses=True, scale_used=lambda s: s or 0.1), "scale=0.0")):
        with pytest.raises(CheckFailure, match=words):
            only.run(Context(module=wrong, seed=1, exercise_dir=None))
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 5), (1, 2, 3)])
def test_the_batch_layouts_hold_the_same_values_with_larger_leading_strides(shape):
    """grader.verify.checks' batch layouts: the same values, the last dim packed, the batch stride (and for
    the narrowed view the channel stride too) larger than packed."""
    from grader.verify.checks import batch_slice_copy, narrowed_copy

    t = torch.randn(shape)
    packed = t.stride()
    sliced, narrowed = batch_slice_copy(t), narrowed_copy(t)
    if shape[0] == 1:  # a batch of one: no batch stride matters, and a 3-D narrowed view is contiguous
        assert sliced is None and narrowed is None
        return
    assert torch.equal(sliced, t) and sliced.stride()[1:] == packed[1:] and sliced.stride(0) == 2 * packed[0]
    assert torch.equal(narrowed, t) and narrowed.stride(-1) == 1 and narrowed.stride(-2) == packed[-2]
    assert all(narrowed.stride(d) > packed[d] for d in range(len(shape) - 2))  # batch and channel strides
    assert batch_slice_copy(torch.randn(4, 5)) is None and narrowed_copy(torch.randn(4, 5)) is None


# --- a convolution's geometry: list arguments component by component, the smallest input ---

def _conv_spec():
    from grader.verify.spec import conv_smallest_input

    class ConvSpec(Spec):
        def audit_calls(self, device, dtype):
            x = audit_randn(2, 3, 9, 8, device=device, dtype=dtype, seed=1)
            w = audit_randn(4, 3, 3, 2, device=device, dtype=dtype, seed=2)
            stride, padding, dilation = [1, 2], [1, 0], [2, 1]
            return [AuditCall("conv", (x, w, stride, padding, dilation), ("x", "weight", "stride", "padding", "dilation"),
                              lambda x, w, s, p, d: torch.nn.functional.conv2d(x.double(), w.double(), None, s, p, d),
                              domains={0: conv_smallest_input((9, 8), (3, 2), dilation, padding)})]
    return ConvSpec(exercise="97_conv", title="conv", module="conv.py", points={"forward": 1, "input_checks": 1})


def _checked_conv(x, w, stride, padding, dilation, size_check=">="):
    for name, v, least in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        if len(v) != 2 or v[0] < least or v[1] < least:
            raise ValueError(f"{name} must be 2 values >= {least}, got {list(v)}")
    for d in range(2):
        reach = dilation[d] * (w.shape[2 + d] - 1) + 1
        fits = x.shape[2 + d] + 2 * padding[d] >= reach if size_check == ">=" else x.shape[2 + d] + 2 * padding[d] > reach
        if not fits:
            raise ValueError(f"x of shape {list(x.shape)} is smaller than the dilated kernel plus padding")
    return torch.nn.functional.conv2d(x, w, None, stride, padding, dilation)


def test_each_component_of_a_list_argument_and_the_smallest_input_are_checked():
    spec = _conv_spec()
    names = [c.name for c in property_checks(spec)]
    assert any("each component of its list arguments" in n for n in names), names
    assert not any(_run(spec, types.SimpleNamespace(conv=_checked_conv)).values())

    def second_dilation_unchecked(x, w, stride, padding, dilation):  # `d[0] >= 1 && d[1] >= 1` as `d[0] >= 1 || ...`
        return _checked_conv(x, w, stride, padding, [dilation[0], max(1, dilation[1])])

    def too_long_padding_accepted(x, w, stride, padding, dilation):
        return _checked_conv(x, w, stride, list(padding)[:2], dilation)

    def refuses_without_naming(x, w, stride, padding, dilation):
        if min(stride) < 1:
            raise ValueError("bad geometry")
        return _checked_conv(x, w, stride, padding, dilation)

    for op, words in ((second_dilation_unchecked, "`dilation` = [2, -1]"), (too_long_padding_accepted, "3 values"),
                      (refuses_without_naming, "does not name `stride`")):
        found = _run(spec, types.SimpleNamespace(conv=op), only=["list arguments"])
        assert any(words in v for v in found.values()), found
    # the input checks judge argument handling, the call's own group its values: an op wrong on every call
    # (a dropped bias, ignored groups) loses its own group, not the input checks too; one wrong only where
    # a component changes to a value PyTorch computes loses its own group there, not the input checks
    def wrong_everywhere(x, w, stride, padding, dilation):
        return _checked_conv(x, w, stride, padding, dilation) + 1.0

    def first_padding_of_0_taken_as_1(x, w, stride, padding, dilation):  # right as declared ([1, 0])
        _checked_conv(x, w, stride, padding, dilation)  # its checks are right
        return _checked_conv(x, w, stride, [padding[0] or 1, padding[1]], dilation)

    found = _run(spec, types.SimpleNamespace(conv=wrong_everywhere))
    assert not found[next(n for n in found if "list arguments" in n)], found
    assert any(v for n, v in found.items() if "list arguments" not in n), found
    list_check = next(c for c in property_checks(spec) if "list arguments" in c.name)
    assert list_check.group == "input_checks"
    values_check = next(c for c in property_checks(spec) if "list arguments, where PyTorch computes" in c.name)
    assert values_check.group == "forward"
    found = _run(spec, types.SimpleNamespace(conv=first_padding_of_0_taken_as_1), only=["list arguments"])
    assert "`padding` = [0, 0]" in found[values_check.name] and not found[list_check.name], found
    # a size check off by one (`>` for `>=`) refuses the smallest input PyTorch computes
    found = _run(spec, types.SimpleNamespace(conv=lambda *a: _checked_conv(*a, size_check=">")),
                 only=["every declared edge"])
    assert any("smallest input" in v for v in found.values()), found


# --- every tensor argument at the edge of mapped memory (grader.verify.guard; faults need a GPU) ----

def _placed_on_the_cpu(monkeypatch) -> dict[int, str]:
    """grader.verify.guard.at_memory_edge stood in for on the CPU: a copy, whose placement ("end" or
    "start") is recorded under its address (an op here "faults" by reading that record)."""
    placed: dict[int, str] = {}

    def at_memory_edge(t, where):
        if t.numel() == 0:
            return None
        out = t.detach().clone().requires_grad_(t.requires_grad)
        placed[out.data_ptr()] = where
        return out

    monkeypatch.setattr(properties, "at_memory_edge", at_memory_edge)
    return placed


def test_the_memory_edge_property_is_generated_for_every_op_and_checked_last():
    checks = property_checks(SPEC)
    edge = [c for c in checks if properties.MEMORY_EDGE in c.name]
    assert [c.name for c in edge] == [f"scale [{properties.MEMORY_EDGE}]"]
    assert edge[0].group == "forward" and not edge[0].slow
    # last of all: a fault there (the CUDA context lost) leaves no other check unrun
    assert checks[-len(edge):] == edge


def test_the_memory_edge_property_places_every_argument_at_both_edges_and_passes_a_right_op(monkeypatch):
    placed = _placed_on_the_cpu(monkeypatch)
    seen = []

    def right(x, a):
        seen.append(placed.get(x.data_ptr()))
        return _right(x, a)

    assert not any(_run(SPEC, _module(right), only=[properties.MEMORY_EDGE]).values())
    # two calls per call of the op (its fixed one, and this run's random shape): at the end, at the start
    assert seen[:2] == ["end", "start"] and len(seen) >= 4 and set(seen) == {"end", "start"}


@pytest.mark.parametrize("where, words", [("end", "past the end of an argument's memory"),
                                          ("start", "before the start of an argument's memory")])
def test_an_op_faulting_at_an_edge_fails_saying_it_accessed_outside_an_argument(monkeypatch, where, words):
    from grader.verify.checks import cuda_context_lost

    placed = _placed_on_the_cpu(monkeypatch)

    def reads_outside(x, a):
        if placed.get(x.data_ptr()) == where:
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might "
                               "be asynchronously reported at some other API call")
        return _right(x, a)

    failure = _run(SPEC, _module(reads_outside), only=[properties.MEMORY_EDGE])[f"scale [{properties.MEMORY_EDGE}]"]
    assert words in failure and "`x`" in failure and properties.MEMORY_EDGE in failure, failure
    assert cuda_context_lost(failure), failure  # the suite then marks the checks after it "not run"


def test_a_misaligned_vector_access_at_the_edge_is_named_so(monkeypatch):
    placed = _placed_on_the_cpu(monkeypatch)

    def assumes_16_byte_alignment(x, a):
        if placed.get(x.data_ptr()) == "end":
            raise RuntimeError("CUDA error: misaligned address")
        return _right(x, a)

    failure = _run(SPEC, _module(assumes_16_byte_alignment), only=[properties.MEMORY_EDGE])
    assert "a misaligned access" in failure[f"scale [{properties.MEMORY_EDGE}]"], failure


def test_a_wrong_answer_at_the_edge_is_a_wrong_answer(monkeypatch):
    placed = _placed_on_the_cpu(monkeypatch)

    def wrong_there(x, a):
        y = _right(x, a)
        return y + 1 if placed.get(x.data_ptr()) == "start" else y

    failure = _run(SPEC, _module(wrong_there), only=[properties.MEMORY_EDGE])[f"scale [{properties.MEMORY_EDGE}]"]
    assert "starting at the first byte of mapped GPU memory" in failure and "memory" in failure, failure


def test_arguments_the_op_updates_in_place_are_not_moved(monkeypatch):
    placed = _placed_on_the_cpu(monkeypatch)
    call = SPEC._call(torch.randn(3, 4), 0.3)
    updated = AuditCall("scale", call.args, call.names, call.reference, mutates=(0,))

    class Updating(ScaleSpec):
        def audit_calls(self, device, dtype):
            return [updated]

        def random_calls(self, g, device, dtype):
            return []

    spec = Updating(exercise="99_scale", title="scale", module="scale.py", points={"forward": 1},
                    property_dtypes=("float32",))
    assert not any(_run(spec, _module(_right), only=[properties.MEMORY_EDGE]).values())
    assert not placed  # its only tensor is updated in place by design: nothing to place, no call


class _LeakyReLU(torch.nn.Module):
    """A drop-in for torch.nn.LeakyReLU; `default` and `positional` spoil it."""
    default = 0.01
    extra_repr = torch.nn.LeakyReLU.extra_repr
    inplace = False

    def __init__(self, negative_slope=None):
        super().__init__()
        self.negative_slope = type(self).default if negative_slope is None else negative_slope

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, self.negative_slope)


class _Conv2d(torch.nn.Conv2d):
    """torch.nn.Conv2d itself; below, with two of its arguments swapped, its weight a buffer, half its gradients."""


class _ConvDilationBeforePadding(torch.nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1, padding=0, groups=1, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)


class _ConvWeightAsBuffer(torch.nn.Conv2d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        weight = self.weight.detach()
        del self.weight
        self.register_buffer("weight", weight)


class _ConvUnscaledGradient(torch.nn.Conv2d):
    def forward(self, x):
        y = super().forward(x)
        return y.detach() + (y - y.detach()) * 0.5  # right values, half the gradients


@pytest.mark.parametrize("wrong, words", [
    (types.SimpleNamespace(LeakyReLU=type("L", (_LeakyReLU,), {"default": 1.01}), Conv2d=_Conv2d),
     r"LeakyReLU\(\) .*extra_repr\(\) gives 'negative_slope=1.01'"),  # print(model) shows the wrong default first
    (types.SimpleNamespace(LeakyReLU=_LeakyReLU, Conv2d=_ConvDilationBeforePadding), r"Conv2d\(6, 9, .*extra_repr"),  # its arguments taken in another order
    (types.SimpleNamespace(LeakyReLU=_LeakyReLU, Conv2d=_ConvWeightAsBuffer), "expected .*parameters"),
    (types.SimpleNamespace(LeakyReLU=_LeakyReLU, Conv2d=_ConvUnscaledGradient), "gradient of the input"),
    (types.SimpleNamespace(LeakyReLU=_LeakyReLU), "no class Conv2d"),
])
def test_a_drop_in_module_is_built_and_run_as_torch_nn_s(wrong, words):
    """torch.nn's defaults, its argument order, its parameters and its gradients: each spoiled alone fails,
    and the right classes pass."""
    from grader.verify.properties import drop_in_checks
    from grader.verify.spec import DropIn

    spec = ScaleSpec(exercise="99_scale", title="scale", module="scale.py", points={"forward": 1})
    spec.drop_ins = lambda: [
        DropIn("LeakyReLU", torch.nn.LeakyReLU, (((), {}), ((0.2,), {}), ((), {"negative_slope": -0.5})),
               input_shape=lambda args, kwargs: (3, 37, 19)),
        DropIn("Conv2d", torch.nn.Conv2d, (((5, 8, 3), {}), ((6, 9, (3, 2), 2, 1, 2, 3, False), {})),
               input_shape=lambda args, kwargs: (2, args[0], 13, 11), tol=1e-5, grad_tol=1e-4)]
    checks = drop_in_checks(spec)
    right = types.SimpleNamespace(LeakyReLU=_LeakyReLU, Conv2d=_Conv2d)
    ctx = Context(module=right, seed=3, exercise_dir=None)
    for check in checks:
        check.run(ctx)
    ctx = Context(module=wrong, seed=3, exercise_dir=None)
    failures = []
    for check in checks:
        try:
            check.run(ctx)
        except CheckFailure as e:
            failures.append(str(e))
    # the outputs' check comes first: a module wrong in its gradients alone fails the gradients' check only
    assert failures and re.search(words, failures[0]), failures
    if "gradient" in words:
        assert len(failures) == 1, failures


def test_the_stream_property_calls_again_on_the_same_tensors_with_new_values():
    """The second pass of "on the current stream" reuses the first's tensors (new values, arriving late on a
    GPU): an op that answers calls on addresses it has seen otherwise (on a stream of its own, or from a memo,
    as the variant below) meets it every run, not only where the allocator happens to reuse an address."""
    spec = _conv_spec()
    memo = {}

    def memo_by_address(x, w, stride, padding, dilation):
        key = (x.data_ptr(), w.data_ptr())
        if key not in memo:
            memo[key] = _checked_conv(x, w, stride, padding, dilation)
        return memo[key].clone()

    found = _run(spec, types.SimpleNamespace(conv=memo_by_address), only=["on the current stream"])
    assert any("the same tensors again with new values" in v for v in found.values()), found
    assert not any(_run(spec, types.SimpleNamespace(conv=_checked_conv), only=["on the current stream"]).values())


class _PackedGradProduct(_Product):
    """x * y whose backward reads the gradient as packed (its storage in row-major order, as a kernel given
    a raw pointer without .contiguous() would): right for a dense gradient only."""

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        packed = g.as_strided(g.shape, [g.shape[1], 1], g.storage_offset())
        return packed * y, packed * x


def test_the_gradient_flowing_back_strided_and_expanded_is_checked():
    """The gradients property hands the op's backward a gradient with gaps and one expanded from a single
    value (every stride 0, as `y.sum()` gives): a backward that takes it as packed computes from the wrong
    elements in both, and a right one passes."""
    right = types.SimpleNamespace(product=lambda x, y: x * y)
    assert not any(_run(PRODUCT, right, only=["gradients"]).values())
    found = _run(PRODUCT, types.SimpleNamespace(product=_PackedGradProduct.apply), only=["gradients"])
    failure = next(iter(found.values()))
    assert "the gradient flowing back as a strided view" in failure, found
    # the dense passes come first and pass: only the laid-out gradient tells this backward from a right one
    from grader.verify.properties import check_gradients

    ctx = Context(module=types.SimpleNamespace(product=_PackedGradProduct.apply), seed=7, exercise_dir=None)
    call = PRODUCT.audit_calls("cpu", torch.float32)[0]
    check_gradients(ctx, call, list(call.args), "dense")
    with pytest.raises(CheckFailure):
        check_gradients(ctx, call, list(call.args), "expanded", flowing="expanded")


# --- the state an op updates in place (running statistics): judged in its own group, the outputs in theirs ---

def _tracked(x, total, out_scale=2.0, state_scale=1.0):
    total.add_(x.sum() * state_scale)  # the running state, updated in place by design
    return x * out_scale


@dataclass
class TrackSpec(Spec):
    def audit_calls(self, device, dtype):
        x = audit_randn(3, 4, device=device, dtype=dtype, seed=1)
        total = torch.zeros((), device=device, dtype=dtype)
        return [AuditCall("track", (x, total), ("x", "total"), lambda x, total: x * 2.0,
                          updates=lambda x, total: {1: total + x.sum()}, updates_group="state", mutates=(1,),
                          domains={0: (Edge("negative", make=lambda t: -t.abs()),)})]


@pytest.mark.parametrize("out_scale, state_scale, failing", [
    (2.0, 1.0, set()),
    (3.0, 1.0, {"forward"}),  # wrong outputs, the state right: forward's properties alone
    (2.0, 2.0, {"state"}),  # the outputs right, the state wrong: the state's property alone
])
def test_the_state_an_op_updates_is_judged_in_its_group_and_its_outputs_in_theirs(out_scale, state_scale, failing):
    spec = TrackSpec(exercise="96_track", title="track", module="track.py", points={"forward": 1, "state": 1})
    module = types.SimpleNamespace(track=lambda x, total: _tracked(x, total, out_scale, state_scale))
    found = _run(spec, module, only=["non-contiguous arguments", "every declared edge", "the state it updates"])
    groups = {c.name: c.group for c in property_checks(spec)}
    assert "track [the state it updates, at every edge]" in found, found
    assert {groups[name] for name, why in found.items() if why} == failing, found


def test_a_call_is_judged_in_one_copy_to_the_host(monkeypatch, host_copies):
    """check_call brings whether its inputs were modified and every output's numbers to the host in one
    copy (each copy from a GPU waits for it, and the grading processes share the GPU), and still names
    the first fault: an input written before any output's value."""
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    call = AuditCall("pair", (x, y), ("x", "y"), lambda x, y: (x.double() * y.double(), x.double() + y.double(),
                                                                 x.double() - y.double()))

    def right(x, y):
        return x * y, x + y, x - y

    def writes_y(x, y):
        out = right(x, y)
        y.mul_(2)
        return out[0], out[1] + 1, out[2]

    properties.check_call(Context(module=types.SimpleNamespace(pair=right), seed=1, exercise_dir=None),
                          call, [x.clone(), y.clone()], "pair")
    assert host_copies[0] == 1
    with pytest.raises(CheckFailure, match="the input `y` was modified"):
        properties.check_call(Context(module=types.SimpleNamespace(pair=writes_y), seed=1, exercise_dir=None),
                              call, [x.clone(), y.clone()], "pair")
    with pytest.raises(CheckFailure, match=r"pair\[1\]: relative error"):
        properties.check_call(Context(module=types.SimpleNamespace(pair=lambda x, y: writes_y(x, y.clone())), seed=1,
                                      exercise_dir=None), call, [x.clone(), y.clone()], "pair")


def test_gradients_are_judged_in_one_copy_and_in_order(monkeypatch, host_copies):
    """check_gradients brings every gradient's numbers to the host in one copy, and fails on the first
    wrong or missing one in the arguments' order."""
    call = AuditCall("product", (torch.randn(3, 4), torch.randn(3, 4)), ("x", "y"),
                     lambda x, y: x.double() * y.double(), grad_args=(0, 1))

    class Product(_Product):  # its forward; a backward wrong in x or missing y's gradient
        wrong_x = no_y = False

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y * (2 if Product.wrong_x else 1), None if Product.no_y else g * x

    ctx = Context(module=types.SimpleNamespace(product=Product.apply), seed=1, exercise_dir=None)
    properties.check_gradients(ctx, call, list(call.args), "product")
    assert host_copies[0] == 1
    Product.wrong_x = Product.no_y = True
    with pytest.raises(CheckFailure, match="d/dx: relative error"):
        properties.check_gradients(ctx, call, list(call.args), "product")
    Product.wrong_x = False
    with pytest.raises(CheckFailure, match="no gradient reached `y`"):
        properties.check_gradients(ctx, call, list(call.args), "product")


@pytest.mark.parametrize("batch_bytes", [1, properties.BATCH_BYTES])
def test_the_layouts_of_a_call_are_judged_together_and_alike_in_batches_of_any_size(monkeypatch, host_copies, batch_bytes):
    """The non-contiguous property makes a call's layouts back to back and judges them together
    (check_calls): one copy to the host per batch, where a batch holds at most BATCH_BYTES of arguments,
    and the same verdicts whatever the batches' size."""
    monkeypatch.setattr(properties, "BATCH_BYTES", batch_bytes)

    assert not any(_run(SPEC, _module(_right), only=["non-contiguous"]).values())
    calls = len([c for c in SPEC.audit_calls("cpu", torch.float32)]) + len(SPEC.random_calls(torch.Generator().manual_seed(0), "cpu", torch.float32))
    if batch_bytes > 1:
        assert 0 < host_copies[0] <= calls, (host_copies[0], calls)
    else:
        assert host_copies[0] > calls  # one batch per layout
    def restores_x(x, a):  # right values, but its input written (and put back to within rounding)
        with torch.no_grad():
            x.add_(1.0)
            out = torch.ops.course_props_test.scale(x - 1.0, float(a))
        return out

    for op, words in ((_reads_strided_as_contiguous, "strided view"), (restores_x, "was modified")):
        found = _run(SPEC, _module(op), only=["non-contiguous"])
        assert found and all(found.values()) and any(words in v for v in found.values()), found


def test_a_result_a_later_call_of_the_batch_writes_over_is_named_as_shared_memory():
    """check_calls holds a batch's results until it judges them: an op that returns one buffer per shape
    (a second call writes over the first's result) fails for the memory the two share, not for the
    wrong value the first result then holds."""
    buffers = {}

    def one_buffer_per_shape(x, a):
        y = _right(x, a)
        return buffers.setdefault((tuple(y.shape), y.dtype, y.device), torch.empty_like(y)).copy_(y)

    found = _run(SPEC, _module(one_buffer_per_shape), only=["every declared edge", "NaN and infinities"])
    reasons = [v for v in found.values() if v]
    assert reasons and all("shares memory with the result of an earlier call" in v for v in reasons), found


def test_later_judges_a_checks_values_in_one_copy_and_the_first_failure_first(monkeypatch, host_copies):
    """check_call(later=...): the values of a check's calls come to the host together (the own-kernel
    property's calls, each in its own window), and the first wrong call in order fails the check, even
    when a later call fails otherwise (an error, a kernel) before the values are judged."""
    call = SPEC._call(torch.randn(3, 4), 0.3)

    right = Context(module=_module(_right), seed=1, exercise_dir=None)
    later = properties.Later()
    for k in range(4):
        properties.check_call(right, call, properties._fresh(call.args), f"call {k}", later=later)
    assert host_copies[0] == 0
    later.judge()
    assert host_copies[0] == 1

    def fails_after_the_first(x, a):
        fails_after_the_first.calls += 1
        if fails_after_the_first.calls > 1:
            raise RuntimeError("an internal error")
        return _right(x, a) * 1.5

    fails_after_the_first.calls = 0
    later = properties.Later()
    wrong = Context(module=_module(fails_after_the_first), seed=1, exercise_dir=None)
    properties.check_call(wrong, call, properties._fresh(call.args), "call 0", later=later)
    with pytest.raises(CheckFailure, match="call 0: relative error"):
        properties.check_call(wrong, call, properties._fresh(call.args), "call 1", later=later)


def test_a_fake_refusing_a_grown_dim_shows_the_size_it_refused():
    """A refusal that names the misshapen tensor quotes the size it refused, not another of its figures
    (the message-figure mutants of 06's and 10's fakes, each printing a neighbouring dim); one naming
    another argument (a bias checked against the grown weight) may quote what that one needed."""
    call = types.SimpleNamespace(names=("x", "weight", "bias"), reference=None)
    shows = ("weight", 7)
    assert properties.fake_refusal_problem(call, [], "groups (2) must divide weight's 7 output channels", shows) is None
    wrong = properties.fake_refusal_problem(call, [], "groups (2) must divide weight's 2 output channels", shows)
    assert wrong and "without showing 7" in wrong
    assert properties.fake_refusal_problem(call, [], "bias must have shape (6,), but has [5]", shows) is None
    assert properties.fake_refusal_problem(call, [], "weight must have 4 dims, got 17", None) is None
    spoils = {which: grown for which, _, grown in properties.shape_spoils(torch.empty(6, 2, 3))}
    assert spoils["[6, 2, 3] with dim 0 6 -> 7"] == 7 and spoils["[6, 2, 3] with dim 0 6 -> 1"] is None


class _OwnStreamBackwardProduct(_Product):
    """x * y whose backward runs on a stream of its own that waits for the current one; `joined`: the
    current stream waits for it back, as a right op does."""
    joined = False
    _own: list = []

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        if not _OwnStreamBackwardProduct._own:
            _OwnStreamBackwardProduct._own.append(torch.cuda.Stream())
        own, current = _OwnStreamBackwardProduct._own[0], torch.cuda.current_stream()
        own.wait_stream(current)
        with torch.cuda.stream(own):
            grads = g * y, g * x
        if _OwnStreamBackwardProduct.joined:
            current.wait_stream(own)
        return grads


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the join of a backward's own stream")
def test_a_backward_never_joined_back_to_the_callers_stream_fails_every_time():
    """The gradients on a side stream: a backward whose own stream the caller's never waits for (tiny
    kernels, which end within microseconds of the hold) fails each run with the join's reason (the
    window's timeline or the gradients read early); the same backward joined back passes each run."""
    ctx = Context(module=types.SimpleNamespace(product=_OwnStreamBackwardProduct.apply), seed=3, exercise_dir=None)
    call = PRODUCT.audit_calls("cuda", torch.float32)[0]
    side = torch.cuda.Stream()
    try:
        for joined in (False, True):
            _OwnStreamBackwardProduct.joined = joined
            for run in range(5):
                args = [a.clone() for a in call.args]
                if joined:
                    properties.check_gradients(ctx, call, args, "product", stream=side)
                else:
                    with pytest.raises(CheckFailure, match="the current stream's next work started"):
                        properties.check_gradients(ctx, call, args, "product", stream=side)
    finally:
        _OwnStreamBackwardProduct.joined = False
