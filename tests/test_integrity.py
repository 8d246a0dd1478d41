"""The integrity snapshot notices a patched grader or PyTorch function, and nothing else."""
from __future__ import annotations

from pathlib import Path

import torch

import grader.checks
from grader.integrity import Snapshot


def test_an_untouched_process_has_no_changes():
    snap = Snapshot().take()
    torch.randn(3).abs().max()  # ordinary use changes nothing
    assert snap.changed() == []


def test_pytorch_rebinding_its_own_functions_is_not_reported(tmp_path):
    """torch._dynamo, imported mid-run by torch.library.opcheck, wraps torch.manual_seed: a process
    that had not imported it (or the other modules the checks load lazily) before the snapshot must
    still report no change."""
    import subprocess
    import sys

    code = ("import sys, torch; assert 'torch._dynamo' not in sys.modules\n"
            "from grader.integrity import Snapshot\n"
            "snap = Snapshot().take()\n"
            "import torch._dynamo, torch.profiler, torch.autograd.gradcheck, torch.testing, torch.library\n"
            "torch.library.opcheck; print(snap.changed())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(grader.checks.__file__).parent.parent)
    assert out.stdout.strip() == "[]"


def test_patching_a_grader_function_is_named(monkeypatch):
    snap = Snapshot().take()
    monkeypatch.setattr(grader.checks, "assert_close", lambda *a, **k: None)
    assert snap.changed() == ["grader.checks.assert_close"]
    monkeypatch.undo()
    assert snap.changed() == []


def test_patching_torch_is_named(monkeypatch):
    snap = Snapshot().take()
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch.Tensor, "__eq__", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda *a, **k: 1e-3)
    assert snap.changed() == ["torch.Tensor.__eq__", "torch.allclose", "torch.cuda.Event.elapsed_time"]


def test_patching_a_grader_class_method_is_named(monkeypatch):
    from grader.results import ResultsRecorder

    snap = Snapshot().take()
    monkeypatch.setattr(ResultsRecorder, "_flush", lambda self: None)
    assert "grader.results.ResultsRecorder._flush" in snap.changed()


def test_the_recorder_still_reports_when_the_detector_is_patched(tmp_path, monkeypatch):
    import json

    from grader.integrity import Snapshot as Snap
    from grader.results import ResultsRecorder

    recorder = ResultsRecorder(tmp_path / "r.json")
    recorder.snapshot = Snap().take()
    monkeypatch.setattr(Snap, "changed", lambda self: [])  # the cheat hides itself ...
    monkeypatch.setattr(grader.checks, "assert_close", lambda *a, **k: None)
    recorder._flush()
    tampered = json.loads((tmp_path / "r.json").read_text())["tampered"]
    assert "grader.integrity.Snapshot.changed" in tampered and "grader.checks.assert_close" in tampered


def test_patching_the_seed_function_is_named(monkeypatch):
    snap = Snapshot().take()
    monkeypatch.setattr(torch.random, "manual_seed", lambda seed: None)
    assert snap.changed() == ["torch.random.manual_seed"]
