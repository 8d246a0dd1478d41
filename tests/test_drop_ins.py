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


def test_an_inplace_construction_must_overwrite_and_return_its_input(monkeypatch):
    """The drop-in check on toy classes: one that takes `inplace` and ignores it (a new tensor, the input left
    as it was) fails where torch.nn's overwrites its input; one that honours it passes, gradients included."""
    import types

    from grader.verify.checks import CheckFailure
    from grader.verify.spec import DropIn

    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))

    class Ignores(torch.nn.Module):
        extra_repr = torch.nn.LeakyReLU.extra_repr

        def __init__(self, negative_slope=0.01, inplace=False):
            super().__init__()
            self.negative_slope, self.inplace = negative_slope, inplace

        def forward(self, x):
            return F.leaky_relu(x, self.negative_slope)

    class Honours(Ignores):
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
