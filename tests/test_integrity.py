"""The integrity snapshot notices a patched grader or PyTorch function, and nothing else."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import grader.verify.checks
from grader.run import gate
from grader.verify.integrity import Snapshot


def test_an_untouched_process_has_no_changes():
    snap = Snapshot().take()
    torch.randn(3).abs().max()  # ordinary use changes nothing
    assert snap.changed() == []


def test_what_a_grading_process_does_changes_nothing(tmp_path):
    """In a process of its own, the grading process's own work after the snapshot: a library with a
    fake and an autograd formula registered (as an exercise's wrapper does), outputs saved for the judge
    (pickle caches __slotnames__ on torch.Tensor), the profiler, opcheck, gradcheck, a dispatch mode, the
    gate's turn (its wait, its end, its wait to exit)."""
    import subprocess
    import sys

    for word in ("go", "exit"):  # the parent's words, given already
        (tmp_path / f"turn.{word}").touch()
    code = ("import importlib, io, torch\n"
            "from grader.verify.integrity import Snapshot, WATCHED_MODULES\n"
            "from grader.run import gate\n"
            "for n in WATCHED_MODULES:\n"
            "    importlib.import_module(n)\n"
            "snap = Snapshot().take()\n"
            "gate.wait_for_gpu()\n"
            "gate.timing_over()\n"
            "gate.hold_exit()\n"
            "lib = torch.library.Library('integrity_probe', 'DEF')\n"
            "lib.define('f(Tensor x) -> Tensor')\n"
            "torch.library.impl('integrity_probe::f', 'CPU')(lambda x: x * 2)\n"
            "torch.library.register_fake('integrity_probe::f')(lambda x: torch.empty_like(x))\n"
            "torch.library.register_autograd('integrity_probe::f', lambda ctx, g: g * 2)\n"
            "x = torch.randn(3, dtype=torch.float64, requires_grad=True)\n"
            "torch.ops.integrity_probe.f(x).sum().backward()\n"
            "torch.save({'y': torch.randn(4), 'z': [torch.ones(2)]}, io.BytesIO())\n"
            "torch.library.opcheck(torch.ops.integrity_probe.f, (torch.randn(3),), "
            "test_utils=('test_schema', 'test_faketensor'))\n"
            "torch.autograd.gradcheck(torch.ops.integrity_probe.f, (x,))\n"
            "from grader.verify.checks import ops_called\n"
            "ops_called(lambda: torch.randn(2) + 1)\n"
            "with torch.profiler.profile() as p:\n"
            "    torch.randn(3) + 1\n"
            "p.events()\n"
            "print(snap.changed(deep=True))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(grader.verify.checks.__file__).parents[2],
                         env=dict(os.environ, **{gate.GATE_ENV: str(tmp_path / "turn")}))
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
    assert (tmp_path / "turn.timed").exists(), "the turn's end was not said"


def test_pytorch_rebinding_its_own_functions_is_not_reported(tmp_path):
    """torch._dynamo, imported mid-run by torch.library.opcheck, wraps torch.manual_seed: a process
    that had not imported it (or the other modules the checks load lazily) before the snapshot must
    still report no change."""
    import subprocess
    import sys

    code = ("import sys, torch; assert 'torch._dynamo' not in sys.modules\n"
            "from grader.verify.integrity import Snapshot\n"
            "snap = Snapshot().take()\n"
            "import torch._dynamo, torch.profiler, torch.autograd.gradcheck, torch.testing, torch.library\n"
            "torch.library.opcheck; print(snap.changed())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(grader.verify.checks.__file__).parents[2])
    assert out.stdout.strip() == "[]"


def test_patching_a_grader_function_is_named(monkeypatch):
    snap = Snapshot().take()
    monkeypatch.setattr(grader.verify.checks, "assert_close", lambda *a, **k: None)
    assert snap.changed() == ["grader.verify.checks.assert_close"]
    monkeypatch.undo()
    assert snap.changed() == []


def test_patching_torch_is_named(monkeypatch):
    snap = Snapshot().take()
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch.Tensor, "__eq__", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda *a, **k: 1e-3)
    assert snap.changed() == ["torch.Tensor (its members): +__eq__", "torch.allclose", "torch.cuda.Event.elapsed_time"]


def test_patching_a_grader_class_method_is_named(monkeypatch):
    from grader.verify.results import ResultsRecorder

    snap = Snapshot().take()
    monkeypatch.setattr(ResultsRecorder, "_flush", lambda self: None)
    assert "grader.verify.results.ResultsRecorder._flush" in snap.changed()


def test_the_recorder_still_reports_when_the_detector_is_patched(tmp_path, monkeypatch):
    import json

    from grader.verify.integrity import Snapshot as Snap
    from grader.verify.results import ResultsRecorder

    recorder = ResultsRecorder(tmp_path / "r.json")
    recorder.snapshot = Snap().take()
    monkeypatch.setattr(Snap, "changed", lambda self: [])  # the cheat hides itself ...
    monkeypatch.setattr(grader.verify.checks, "assert_close", lambda *a, **k: None)
    recorder._flush(check=True)
    tampered = json.loads((tmp_path / "r.json").read_text())["tampered"]
    assert "grader.verify.integrity.Snapshot.changed" in tampered and "grader.verify.checks.assert_close" in tampered


@pytest.mark.parametrize("timing_last", [True, False], ids=["timing last", "a test after the timing"])
def test_the_snapshot_is_checked_deeply_at_the_first_test_around_the_timing_and_at_the_end(tmp_path, timing_last):
    """The recorder's deep checks: after the first test, before and after the timing, and at the session's
    end; after the timing only where a test follows it (else the end's check comes next, in the GPU's turn)."""
    import pytest as pytest_module

    from grader.verify.results import ResultsRecorder

    deep_checks: list[str] = []

    class Counting(ResultsRecorder):
        where = ""

        def pytest_runtest_logstart(self, nodeid, location):
            self.where = "before " + nodeid.split("::")[-1]
            super().pytest_runtest_logstart(nodeid, location)

        def pytest_runtest_logfinish(self, nodeid, location):
            self.where = "after " + nodeid.split("::")[-1]
            super().pytest_runtest_logfinish(nodeid, location)

        def pytest_sessionfinish(self, session, exitstatus):
            self.where = "end"
            super().pytest_sessionfinish(session, exitstatus)

        def _flush(self, check=False, deep=False, **kwargs):
            if check and deep:
                deep_checks.append(self.where)
            return super()._flush(check=check, deep=deep, **kwargs)

    tests = ["def test_a():\n    pass\n", "def test_b():\n    pass\n", "def test_performance():\n    pass\n"]
    if not timing_last:
        tests.append("def test_z():\n    pass\n")
    flow = tmp_path / f"test_flow_{len(tests)}.py"  # a module name of its own: pytest runs twice in one process
    flow.write_text("".join(tests))
    recorder = Counting(tmp_path / "r.json")
    recorder.snapshot = Snapshot().take()
    assert pytest_module.main([str(flow), "-q", "-p", "no:cacheprovider"], plugins=[recorder]) == 0
    after_timing = [] if timing_last else ["after test_performance"]
    assert deep_checks == ["after test_a", "before test_performance", *after_timing, "end"]


def test_patching_the_seed_function_is_named(monkeypatch):
    snap = Snapshot().take()
    monkeypatch.setattr(torch.random, "manual_seed", lambda seed: None)
    assert snap.changed() == ["torch.random.manual_seed"]


def test_swapped_code_edited_data_and_defaults_are_named(monkeypatch):
    import grader.verify.scoring

    snap = Snapshot().take()
    monkeypatch.setattr(grader.verify.checks.assert_close, "__code__", (lambda *a, **k: None).__code__)
    monkeypatch.setitem(grader.verify.checks.ELEMENTWISE_TOL, torch.float32, grader.verify.checks.Tolerance(1.0, 1.0))
    monkeypatch.setitem(grader.verify.scoring.OVER_LIMIT, "B", 100.0)
    monkeypatch.setattr(grader.verify.checks.expect_error, "__defaults__", (("nothing",), "x"))
    changed = snap.changed()
    for name in ("grader.verify.checks.assert_close", "grader.verify.checks.ELEMENTWISE_TOL", "grader.verify.scoring.OVER_LIMIT",
                 "grader.verify.checks.expect_error"):
        assert name in changed, changed
    monkeypatch.undo()
    assert snap.changed() == []


def test_math_flags_modes_and_dispatcher_overrides_are_named():
    """Run in a process of its own: the changes cannot all be undone."""
    import subprocess
    import sys

    code = ("import torch, grader.verify.checks\n"
            "from grader.verify.integrity import Snapshot\n"
            "snap = Snapshot().take()\n"
            "torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32\n"
            "from torch.overrides import TorchFunctionMode\n"
            "TorchFunctionMode().__enter__()\n"
            "lib = torch.library.Library('aten', 'IMPL')\n"
            "lib.impl('abs', lambda x: x, 'CPU')\n"
            "print(snap.changed(deep=True))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(grader.verify.checks.__file__).parents[2])
    assert "torch math flags" in out.stdout and "torch mode stacks" in out.stdout, out.stdout
    assert "dispatcher aten::abs" in out.stdout, out.stdout


def test_a_c_function_re_pointed_without_a_python_change_is_named():
    """What a submission's C++ could do: re-point the C function behind a builtin (here math.sqrt's
    method table entry, pointed at math.floor's) without any Python attribute changing."""
    import subprocess
    import sys

    code = ("import ctypes, math\n"
            "from grader.verify.integrity import Snapshot\n"
            "snap = Snapshot().take()\n"
            "head = 2 * ctypes.sizeof(ctypes.c_void_p)\n"
            "floor_def = ctypes.c_void_p.from_address(id(math.floor) + head).value\n"
            "ctypes.c_void_p.from_address(id(math.sqrt) + head).value = floor_def\n"
            "print(math.sqrt(2.5), snap.changed(), snap.changed(deep=True))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(grader.verify.checks.__file__).parents[2])
    assert out.stdout.startswith("2 [] "), out.stdout  # re-pointed, and invisible to the quick check
    assert "C math.sqrt" in out.stdout, out.stdout


def _changed_after(code: str) -> list[str]:
    """What a fresh process's deep check reports after running `code` (the grader's spec modules
    imported before the snapshot, as in a grading process)."""
    import ast
    import subprocess
    import sys

    probe = ("import torch, grader.specs.ex06_conv2d\n"
             "from grader.verify.integrity import Snapshot\n"
             "snap = Snapshot().take()\n" + code + "\nprint(snap.changed(deep=True))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(grader.verify.checks.__file__).parents[2])
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_a_grader_module_s_alias_swapped_for_a_look_alike_is_reported():
    """`F` in a spec is looked up when a reference runs: a module put in its place that computes what
    the submission computes would pass it. The fast check (after every test) sees it too."""
    found = _changed_after("import types, torch.nn.functional as real\n"
                           "fake = types.ModuleType('F'); fake.__dict__.update(vars(real))\n"
                           "grader.specs.ex06_conv2d.F = fake")
    assert "grader.specs.ex06_conv2d.F" in found, found


def test_a_kernel_registered_on_any_dispatch_key_of_an_aten_operator_is_reported():
    """Not only CPU and CUDA: a kernel under BackendSelect (or ADInplaceOrView, Autocast...) runs
    before the backend's and can answer for it."""
    found = _changed_after("lib = torch.library.Library('aten', 'IMPL')\n"
                           "lib.impl('linalg_vector_norm', lambda *a, **k: torch.zeros(()), 'BackendSelect')")
    assert "dispatcher aten::linalg_vector_norm" in found, found


# Module-level caches the grader fills as it goes, which the snapshot does not flag only because no
# graded process fills them after the snapshot is taken (each with where it is filled).
FILLED_OUTSIDE_THE_WATCH = {
    "grader.env._fixed": "nvidia-smi's fixed facts: asked while building and gating, before the snapshot",
    "grader.run.same_code._solution_listings": "the mutants' parent process, which takes no snapshot",
    "grader.verify.speed._limits": "the yardstick's process, which runs no submitted code and takes no snapshot",
}


def test_every_lazily_filled_module_cache_is_ignored_or_filled_outside_the_watch():
    """A module-level container the grader fills after the snapshot reads as tampering and zeroes every
    grade (a per-process cache of stream ids once did, on the GPU only): each one must be in the snapshot's
    IGNORED set or be shown filled where no snapshot watches."""
    import ast

    from grader.verify.integrity import IGNORED

    found = set()
    for path in sorted(Path("grader").rglob("*.py")):
        module = ".".join(path.with_suffix("").parts).removesuffix(".__init__")
        if module.startswith("grader.run.suite"):  # its state is not watched (integrity._grader_entries)
            continue
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
            value = getattr(node, "value", None)
            if not isinstance(target, ast.Name) or value is None:
                continue
            empty_literal = isinstance(value, (ast.Dict, ast.List, ast.Set)) and not (
                getattr(value, "keys", None) or getattr(value, "elts", None))
            empty_call = (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args
                          and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict"))
            if empty_literal or empty_call:
                found.add(f"{module}.{target.id}")
    assert found, "the scan found no module cache at all: it no longer reads the grader"
    unexplained = sorted(found - IGNORED - set(FILLED_OUTSIDE_THE_WATCH))
    assert not unexplained, f"module caches the snapshot would report as tampering once filled: {unexplained}"
    stale = sorted(set(FILLED_OUTSIDE_THE_WATCH) - found)
    assert not stale, f"FILLED_OUTSIDE_THE_WATCH names caches that are gone: {stale}"
