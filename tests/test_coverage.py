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
    (in the first dtype), and every module option's edges."""
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
                out |= {(call.label, call.names[i], frozen_edge(call.names[i]), d) for i in call.grad_args}
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
