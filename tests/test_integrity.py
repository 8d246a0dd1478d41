"""The integrity snapshot notices a patched grader or PyTorch function, and nothing else."""
from __future__ import annotations

import torch

import grader.checks
from grader.integrity import Snapshot


def test_an_untouched_process_has_no_changes():
    snap = Snapshot().take()
    torch.randn(3).abs().max()  # ordinary use changes nothing
    assert snap.changed() == []


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
