"""The solutions' drop-in module classes (Spec.drop_ins) on the CPU: each built as torch.nn's is, with its
defaults, by position and by keyword, holding torch.nn's state, against torch.nn's module
(grader.verify.properties.drop_in_checks), with the exercise's functional op played by PyTorch's. The GPU
grade runs the same check with the exercise's own op; this keeps the classes' signatures, parameters and
wiring honest where no GPU runs."""
from __future__ import annotations

import pytest

from grader import env

env.configure()  # before torch.utils.cpp_extension is imported (by the exercise modules' builds)

import torch.nn.functional as F  # noqa: E402

from grader import specs  # noqa: E402
from grader.verify import properties  # noqa: E402
from grader.verify.properties import Device, drop_in_checks  # noqa: E402
from grader.verify.spec import Context  # noqa: E402
from tests.grading import SOLUTIONS  # noqa: E402

# each exercise's functional op as PyTorch computes it (the classes call it with torch.nn's argument order)
PYTORCH_OPS = {"leaky_relu": F.leaky_relu, "elu": F.elu, "conv2d": F.conv2d, "conv_transpose2d": F.conv_transpose2d}
SPECS = [s for s in specs.select([]) if s.drop_ins()]


def test_the_drop_in_classes_are_declared_where_the_solutions_have_them():
    assert [s.exercise[:2] for s in SPECS] == ["01", "02", "06", "07"]


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_each_solution_class_is_a_drop_in_for_torch_nn(spec, monkeypatch):
    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))
    try:
        module = specs.import_exercise_module(SOLUTIONS / spec.exercise, spec)
    except Exception as e:  # noqa: BLE001: no toolchain or build here
        pytest.skip(f"solutions/{spec.exercise}: its extension cannot load here: {str(e).splitlines()[0][:200]}")
    op = PYTORCH_OPS[spec.op]
    monkeypatch.setattr(module, spec.op, lambda *args, version=None, **kwargs: op(*args, **kwargs))
    checks = drop_in_checks(spec)
    assert checks
    for check in checks:
        check.run(Context(module=module, seed=11, exercise_dir=None))
