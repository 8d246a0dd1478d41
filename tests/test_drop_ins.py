"""The solutions' drop-in module classes (Spec.drop_ins) on the CPU: each built as torch.nn's is, with its
defaults, by position and by keyword, holding torch.nn's state, against torch.nn's module
(grader.verify.properties.drop_in_checks), with the exercise's functional op played by PyTorch's. The GPU
grade runs the same check with the exercise's own op; this keeps the classes' signatures, parameters and
wiring honest where no GPU runs."""
from __future__ import annotations

import pytest

from grader import env

env.configure()  # before torch.utils.cpp_extension is imported (by the exercise modules' builds)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from grader import specs  # noqa: E402
from grader.verify import properties  # noqa: E402
from grader.verify.properties import Device, drop_in_checks  # noqa: E402
from grader.verify.spec import Context  # noqa: E402
from tests.grading import SOLUTIONS  # noqa: E402

# each exercise's functional op as PyTorch computes it (the classes call it with torch.nn's argument order)
PYTORCH_OPS = {"leaky_relu": F.leaky_relu, "elu": F.elu, "conv2d": F.conv2d, "conv_transpose2d": F.conv_transpose2d}
# and the backward ops the in-place classes call themselves (inplace=True: their own autograd.Function)
PYTORCH_BACKWARDS = {
    "leaky_relu": lambda grad_output, x, negative_slope: torch.ops.aten.leaky_relu_backward(grad_output, x,
                                                                                            negative_slope, False),
    "elu": lambda grad_output, x, alpha: torch.ops.aten.elu_backward(grad_output, alpha, 1, 1, False, x),
}
SPECS = [s for s in specs.select([]) if s.drop_ins()]


def standing_in(module, name: str, op):
    """PyTorch's `op` in place of the exercise's functional `name`, except in place: an activation called with
    inplace=True (its third argument) runs the exercise's own in-place function (`name_`), whose out-of-place
    call comes back here."""
    own_inplace = getattr(module, f"{name}_", None)

    def call(*args, version=None, mode=None, inplace=False, **kwargs):
        if own_inplace is not None and len(args) == 3:
            *args, inplace = args
        return own_inplace(*args, **kwargs) if inplace else op(*args, **kwargs)
    return call


def test_the_drop_in_classes_are_declared_where_the_solutions_have_them():
    assert [s.exercise[:2] for s in SPECS] == ["01", "02", "06", "07", "10"]


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_each_solution_class_is_a_drop_in_for_torch_nn(spec, monkeypatch):
    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))
    try:
        module = specs.import_exercise_module(SOLUTIONS / spec.exercise, spec)
    except Exception as e:  # noqa: BLE001: no toolchain or build here
        pytest.skip(f"solutions/{spec.exercise}: its extension cannot load here: {str(e).splitlines()[0][:200]}")
    for name, op in PYTORCH_OPS.items():  # every op of the exercise's a class may call (10's two)
        if hasattr(module, name):
            monkeypatch.setattr(module, name, standing_in(module, name, op))
    for name, backward in PYTORCH_BACKWARDS.items():
        if hasattr(module, f"{name}_backward"):
            monkeypatch.setattr(module, f"{name}_backward", backward)
    checks = drop_in_checks(spec)
    assert checks
    for check in checks:
        check.run(Context(module=module, seed=11, exercise_dir=None))


class _ToyLeakyReLU(torch.nn.Module):
    """A LeakyReLU module built as torch.nn's is, computing out of place: the toy drop-ins' base."""
    extra_repr = torch.nn.LeakyReLU.extra_repr

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)


def test_an_inplace_construction_must_overwrite_and_return_its_input(monkeypatch):
    """The drop-in check on toy classes: one that takes `inplace` and ignores it (a new tensor, the input left
    as it was) fails where torch.nn's overwrites its input; one that honours it passes, gradients included."""
    import types

    from grader.verify.checks import CheckFailure
    from grader.verify.spec import DropIn

    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))

    class Ignores(_ToyLeakyReLU):  # inplace taken, and ignored
        pass

    class Honours(_ToyLeakyReLU):
        def forward(self, x):
            return F.leaky_relu(x, self.negative_slope, inplace=self.inplace)

    entry = DropIn("LeakyReLU", torch.nn.LeakyReLU, (((0.2, True), {}),), input_shape=lambda args, kwargs: (3, 5))
    for cls, right in ((Ignores, False), (Honours, True)):
        for gradients in (False, True):
            check = properties._drop_in(entry, gradients)
            ctx = Context(module=types.SimpleNamespace(LeakyReLU=cls), seed=3, exercise_dir=None)
            if right or gradients:  # the ignoring class's gradients are right: its outputs fail the other check
                check(ctx)
            else:
                with pytest.raises(CheckFailure, match="input after the call"):
                    check(ctx)
    # and what print(model) shows of it is torch.nn's
    silent = type("Silent", (Honours,), {"extra_repr": lambda self: ""})
    with pytest.raises(CheckFailure, match="extra_repr"):
        properties._drop_in(entry, False)(Context(module=types.SimpleNamespace(LeakyReLU=silent), seed=3,
                                                  exercise_dir=None))


class _InPlaceReadingItsResult(torch.autograd.Function):
    """LeakyReLU in place whose backward reads its result, as PyTorch's does, without PyTorch's refusal of a
    negative slope: where x < 0 the result is positive, and the gradient is taken as 1."""

    @staticmethod
    def forward(ctx, x, slope):
        x.copy_(F.leaky_relu(x, slope))
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        ctx.slope = slope
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.where(y > 0, grad, grad * ctx.slope), None


class _InPlaceKeepingItsInput(torch.autograd.Function):
    """LeakyReLU in place whose backward reads a copy of x kept for it: right at any slope."""

    @staticmethod
    def forward(ctx, x, slope):
        ctx.save_for_backward(x.clone())
        x.copy_(F.leaky_relu(x, slope))
        ctx.mark_dirty(x)
        ctx.slope = slope
        return x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad, grad * ctx.slope), None


class _InPlaceRefusing(_InPlaceReadingItsResult):
    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(f"leaky_relu_: an in-place backward with negative_slope {ctx.slope} < 0")


@pytest.mark.parametrize("function, right", [(_InPlaceReadingItsResult, False), (_InPlaceKeepingItsInput, True),
                                             (_InPlaceRefusing, True)], ids=["reads_result", "keeps_input", "refuses"])
def test_where_torch_nn_refuses_a_backward_the_drop_in_refuses_it_or_gives_the_out_of_place_gradients(
        function, right, monkeypatch):
    """An in-place LeakyReLU at a negative slope: torch.nn's backward refuses it (it reads the result). A drop-in
    that refuses passes, one that keeps x and computes the gradient passes against torch.nn's out-of-place
    module, and one that reads its result without refusing (the right gradient's sign lost) fails."""
    import types

    from grader.verify.checks import CheckFailure
    from grader.verify.spec import DropIn

    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))

    class InPlace(_ToyLeakyReLU):
        def forward(self, x):
            if self.inplace:
                return function.apply(x, self.negative_slope)
            return F.leaky_relu(x, self.negative_slope)

    entry = DropIn("LeakyReLU", torch.nn.LeakyReLU, (((-0.5, True), {}), ((), {"negative_slope": -0.5,
                                                                                "inplace": True})),
                   input_shape=lambda args, kwargs: (3, 5))
    ctx = Context(module=types.SimpleNamespace(LeakyReLU=InPlace), seed=3, exercise_dir=None)
    properties._drop_in(entry, False)(ctx)  # the outputs are right in every case
    check = properties._drop_in(entry, True)
    if right:
        check(ctx)
    else:
        with pytest.raises(CheckFailure, match="whose backward torch.nn's refuses .*the gradient of the input"):
            check(ctx)


def test_the_activations_drop_ins_are_built_in_place_at_a_negative_value():
    """Every activation with a negative parameter value declares its in-place construction there (where
    torch.nn's backward refuses), so a drop-in's in-place backward is judged on both sides of zero."""
    for spec in SPECS:
        values = getattr(spec, "param_values", ())
        negative = [p for p in values if p < 0]
        if not negative:
            continue
        built = [kwargs.get(spec.param) for args, kwargs in spec.drop_ins()[0].constructions if kwargs.get("inplace")]
        assert set(negative) <= set(built), spec.exercise


@pytest.mark.parametrize("exercise", ["01_leaky_relu", "02_elu"])
def test_the_in_place_function_takes_pytorchs_default(exercise, monkeypatch):
    """The activations' `op_(x)` check (grader.specs.activation) on the CPU: an in-place function with
    PyTorch's default passes, one with another default fails, and one that returns a new tensor fails."""
    import types

    from grader.verify.checks import CheckFailure

    spec = specs.by_exercise(exercise)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(spec, "_rand", lambda ctx, name, shape, dtype, scale=None: torch.randn(shape, dtype=dtype) * 3)
    F_inplace = getattr(F, f"{spec.op}_")
    default = spec.param_values[0]

    def with_default(value):
        return lambda x, p=value: F_inplace(x, p)

    ctx = Context(module=types.SimpleNamespace(**{f"{spec.op}_": with_default(default)}), seed=1, exercise_dir=None)
    spec._check_inplace_defaults(ctx)
    for wrong in (with_default(default + 1.0), lambda x, p=default: getattr(F, spec.op)(x, p)):
        ctx = Context(module=types.SimpleNamespace(**{f"{spec.op}_": wrong}), seed=1, exercise_dir=None)
        with pytest.raises(CheckFailure, match="left out"):
            spec._check_inplace_defaults(ctx)
