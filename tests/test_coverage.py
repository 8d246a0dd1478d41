"""Every declared edge of every op's arguments, and of every module entry point's options, is reached
by a check: on the CPU, the generated checks run in a dry run (grader.verify.properties.dry_run), which calls
no op and records each edge each check would try. `pytest tests/test_coverage.py -s` prints the list."""
from __future__ import annotations

import pytest
import torch

from grader.verify import properties
from grader.verify.properties import Device, dry_run, dtype_of, edge_dtypes, property_checks
from grader.specs import Context, all_specs, audit_seed, frozen_edge

SPECS = all_specs()
GENERATED = ("[every declared edge]", "[gradients]", "every option's edges]")


@pytest.fixture(autouse=True)
def cpu(monkeypatch):
    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))


def declared(spec) -> set[tuple]:
    """(call label or entry point, argument, edge, dtype) for every edge the spec declares: each call's
    edges in every dtype the edges are tried in, their gradients and each differentiable argument frozen
    and alone (in the first dtype, in every mode), and every module option's edges."""
    out = set()
    first = properties._dtypes(spec)[0]
    labels = set()
    for dtype in edge_dtypes(spec):
        with audit_seed(0):
            calls = [c for c in spec.audit_calls("cpu", dtype) if c.reference is not None]
        for call in calls:
            labels.add(call.label)
            d = str(dtype_of(call)).replace("torch.", "")
            for i, edge in call.edges():
                out.add((call.label, call.names[i], edge.name, d))
                if dtype == first and call.grad_args and not edge.refused:
                    out.add((call.label, call.names[i], f"{edge.name} (gradients)", d))
            if dtype == first and len(call.grad_args) > 1:
                modes = [None] + [edge.name for _, edge in call.edges() if edge.is_mode]
                alone = (False, True) if len(call.grad_args) > 2 else (False,)
                out |= {(call.label, call.names[i], frozen_edge(call.names[i], m, a), d) for i in call.grad_args
                        for m in modes for a in alone}
    for entry in spec.module_options():
        out |= {(entry.name, option, edge.name, "module") for option, edges in entry.options.items() for edge in edges}
    return out


def reached(spec) -> set[tuple]:
    ctx = Context(module=None, seed=0, exercise_dir=None)
    with dry_run() as found:
        for check in property_checks(spec):
            if any(g in check.name for g in GENERATED):
                check.run(ctx)
    return set(found)


def _listing(spec, edges: set[tuple], missing: set[tuple]) -> str:
    lines = [f"{spec.exercise}: {len(edges)} declared edges"]
    by_where: dict[str, list] = {}
    for where, arg, edge, dtype in sorted(edges, key=str):
        by_where.setdefault(where, []).append((arg, edge, dtype))
    for where, items in by_where.items():
        lines.append(f"  {where}")
        args: dict[tuple, list] = {}
        for arg, edge, dtype in items:
            args.setdefault((arg, edge), []).append(dtype)
        for (arg, edge), dtypes in args.items():
            mark = "  MISSED" if any((where, arg, edge, d) in missing for d in dtypes) else ""
            lines.append(f"    {arg}: {edge} [{', '.join(sorted(dtypes))}]{mark}")
    return "\n".join(lines)


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_every_declared_edge_is_reached(spec):
    edges = declared(spec)
    missing = edges - reached(spec)
    print("\n" + _listing(spec, edges, missing))
    assert not missing, "edges no check reaches:\n" + _listing(spec, edges, missing)


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_every_float_parameter_declares_its_edges(spec):
    """A float argument (a slope, alpha, eps, momentum) of any call has a domain: its edges are tried."""
    with audit_seed(0):
        calls = spec.audit_calls("cpu", torch.float32)
    bare = sorted({f"{c.label}: {c.names[i]}" for c in calls if c.reference is not None
                   for i, a in enumerate(c.args) if isinstance(a, float) and i not in {j for j, _ in c.edges()}})
    assert not bare, f"float arguments with no declared edges: {bare}"


# gradient ops whose grad_output is shaped by the geometry: only a call at PyTorch's default geometry can
# leave it out, so one such call of each must declare the defaults (the others cannot)
SHAPED_BY_THE_GEOMETRY = ("conv2d_backward_input", "conv2d_backward_weight")


def _signature_defaults(spec) -> dict[str, dict[str, object]]:
    """{function: {parameter: its default}} of the solution module's top-level functions, read from the
    source (importing it would build the extension)."""
    import ast

    from tests.grading import SOLUTIONS

    tree = ast.parse((SOLUTIONS / spec.exercise / spec.module).read_text())
    out = {}
    for f in tree.body:
        if isinstance(f, ast.FunctionDef) and not f.name.startswith("_"):
            params = f.args.args[len(f.args.args) - len(f.args.defaults):]
            out[f.name] = {}
            for a, d in zip(params, f.args.defaults):
                try:
                    out[f.name][a.arg] = ast.literal_eval(d)
                except ValueError:  # not a literal (dtype=torch.float32): no PyTorch default to compare
                    pass
    return out


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_every_pytorch_default_of_an_op_is_declared_and_valid(spec):
    """Every parameter of an op that PyTorch's counterpart lets a caller leave out (grader.verify.spec
    TORCH_DEFAULTS; an activation's scalar) and the solution gives that default is declared in the op's
    calls' `defaults` with the same value (the "PyTorch's defaults" property then leaves it out), and
    every call label with defaults has a call whose arguments PyTorch accepts at them (else the
    property fails every submission)."""
    import torch.nn.functional as F

    from grader.verify.spec import TORCH_DEFAULTS

    with audit_seed(0):
        calls = [c for c in spec.audit_calls("cpu", torch.float32) if c.reference is not None]
    signatures = _signature_defaults(spec)
    scalar = getattr(spec, "param", "")
    if scalar:  # the activation's scalar: PyTorch's functional op's default (F.leaky_relu, F.elu)
        torch_default = __import__("inspect").signature(getattr(F, spec.op)).parameters[scalar].default
        assert signatures[spec.op][scalar] == torch_default
    missing, valid = [], {}
    for op in SHAPED_BY_THE_GEOMETRY:
        if op in signatures and not any(c.op == op and c.defaults for c in calls):
            missing.append(f"{op}: no call at PyTorch's default geometry declares its defaults")
    for call in calls:
        if call.op not in signatures or (call.op in SHAPED_BY_THE_GEOMETRY and not call.defaults):
            continue
        for i, name in enumerate(call.names):
            if name in signatures[call.op] and (name in TORCH_DEFAULTS or name == scalar):
                if call.defaults.get(i, ...) != signatures[call.op][name] and not (
                        name == "groups" and call.args[i] != 1):  # a grouped weight keeps its groups
                    missing.append(f"{call.label}: {name}")
        if call.defaults:
            args = properties._fresh(call.args)
            for i, v in call.defaults.items():
                args[i] = v
            try:
                properties._reference(call, args)
                valid[call.label] = True
            except (RuntimeError, ValueError):
                valid.setdefault(call.label, False)
    assert not missing, f"defaults not declared (or not the solution's): {sorted(set(missing))}"
    assert all(valid.values()), f"labels with no call valid at PyTorch's defaults: {[k for k, v in valid.items() if not v]}"
