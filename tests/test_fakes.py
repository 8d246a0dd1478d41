"""The solutions' registered fakes (the shape functions torch.compile and opcheck trace with), on the CPU
under FakeTensorMode, against PyTorch's reference of each call with `registered=` (Spec.audit_calls and
random_calls):

- a valid call is accepted, with the reference's output shapes (a fake stricter than the op fails
  torch.library.opcheck in the GPU grade);
- every refusal probe (grader.verify.properties.refusal_probes: each tensor argument misshapen, each
  declared edge, each integer list out of its domain, and again with the optional tensors left out)
  that the reference refuses is refused by the fake too (else torch.compile traces a wrong shape), each
  refusal naming an argument or being PyTorch's own (properties.fake_refusal_problem);
  one the reference computes, where the fake computes it too, has the reference's shapes.

The GPU grade's property "the registered fake refuses what the op refuses" (grader.verify.properties)
holds each fake to its own op; this holds it to PyTorch where no GPU runs the op.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from grader import env

env.configure()  # before torch.utils.cpp_extension is imported (by the exercise modules' builds)

import torch  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from grader import specs  # noqa: E402
from grader.verify.judge import resolve  # noqa: E402
from grader.verify.properties import fake_refusal_problem, optional_tensors, reference_result, refusal_probes  # noqa: E402
from grader.verify.spec import audit_seed  # noqa: E402
from tests.grading import SOLUTIONS, selected  # noqa: E402

SPECS = selected()
SEEDS = (1, 2, 3)  # random geometries drawn per exercise, each accepted with the reference's shapes
PROBED_SEEDS = SEEDS[:1]  # refused where PyTorch refuses: the declared edges and one seed's geometries (each
# probe changes one argument, and the declared edges hold every kind of geometry: groups, depthwise, strides,
# padding words; two more seeds' probes cost a minute of CI)


def _fake(op, args: list):
    with FakeTensorMode() as mode:
        return op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])


def _shapes(value) -> list[list[int]]:
    if isinstance(value, torch.Tensor):
        return [list(value.shape)]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _shapes(v)]
    return []


def _registered_calls(spec) -> list[tuple[object, bool]]:
    """(call, whether its refusal probes run) for each call naming a registered op."""
    with audit_seed(0):
        calls = [(c, True) for c in spec.audit_calls("cpu", torch.float32)]
        for seed in SEEDS:
            calls += [(c, seed in PROBED_SEEDS)
                      for c in spec.random_calls(torch.Generator().manual_seed(seed), "cpu", torch.float32)]
    return [(c, probed) for c, probed in calls if c.registered and c.reference is not None]


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_the_registered_fakes_accept_valid_calls_and_refuse_what_pytorch_refuses(spec):
    calls = _registered_calls(spec)
    if not calls:
        pytest.skip(f"{spec.exercise}: no call names a registered op")
    try:
        module = specs.import_exercise_module(SOLUTIONS / spec.exercise, spec)
    except Exception as e:  # noqa: BLE001: no toolchain or build here
        pytest.skip(f"solutions/{spec.exercise}: its extension cannot load here: {str(e).splitlines()[0][:200]}")
    problems = []
    for call, probed in calls:
        op = resolve(module, call.registered)
        expected = _shapes(reference_result(call, list(call.args)))
        try:
            got = _shapes(_fake(op, list(call.args)))
            # (a fake may return more outputs than the reference compares: 09's saved statistics)
            if got[:len(expected)] != expected:
                problems.append(f"{call.label}: the fake gives {got}, the reference {expected}")
        except Exception as e:  # noqa: BLE001: a refusal, however the fake says it
            problems.append(f"{call.label}: the fake refuses a valid call: {str(e).splitlines()[0][:200]}")
        # (an edge the spec declares refused, as 08's eps = 0, the op may refuse or compute: which it does,
        # and so whether its fake must refuse it, only the GPU grade sees)
        for args, which, _, shows in refusal_probes(call, optional_tensors(op)) if probed else ():
            try:
                wanted = _shapes(reference_result(call, args))
            except Exception:  # noqa: BLE001: refused by the reference, however it says so
                wanted = None
            try:
                got = _shapes(_fake(op, args))
            except Exception as e:  # noqa: BLE001: a refusal, however the fake says it
                # (one the reference computes the op may refuse: a limit of the exercise's), naming its argument
                problem = fake_refusal_problem(call, args, str(e), shows)
                if problem is not None:
                    problems.append(f"{call.label}: {which}: {problem}")
                continue
            if wanted is None:
                problems.append(f"{call.label}: {which}: PyTorch refuses it, the fake gives {got}")
            elif got[:len(wanted)] != wanted:
                problems.append(f"{call.label}: {which}: the fake gives {got}, the reference {wanted}")
    assert not problems, f"solutions/{spec.exercise}: {len(problems)} problem(s):\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_every_tensor_op_of_a_library_has_a_fake_that_an_audit_call_probes(spec):
    """Each op the solution's library registers that takes a tensor has a registered fake (torch.compile
    traces through it), and some audit call names it as its `registered` op: the fake property probes
    only the ops the audit calls name, so an op reached only through a Python function of another
    signature (10's conv_transpose2d, which takes the output's size) would keep an unprobed fake."""
    from torch._library import simple_registry

    try:
        module = specs.import_exercise_module(SOLUTIONS / spec.exercise, spec)
    except Exception as e:  # noqa: BLE001: no toolchain or build here
        pytest.skip(f"solutions/{spec.exercise}: its extension cannot load here: {str(e).splitlines()[0][:200]}")
    namespace = module.lib.namespace
    ops = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith(namespace + "::")]
    assert ops, f"{spec.exercise}: no op registered in {namespace}"
    with audit_seed(0):
        probed = {c.registered for c in spec.audit_calls("cpu", torch.float32) if c.registered}
    problems = []
    for qualname in ops:
        name = qualname.split("::", 1)[1]
        schema = torch._C._get_schema(qualname, "")
        takes_tensor = any("Tensor" in str(a.type) for a in schema.arguments)
        has_fake = simple_registry.singleton.find(qualname).fake_impl.kernel is not None
        if takes_tensor and not has_fake:
            problems.append(f"{name} takes a tensor but has no registered fake")
        if has_fake and f"lib.ops.{name}" not in probed:
            problems.append(f"{name}'s fake is named by no audit call (registered=\"lib.ops.{name}\")")
    assert not problems, f"solutions/{spec.exercise}: " + "; ".join(problems)
