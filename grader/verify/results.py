"""Recording test outcomes as they happen, and writing JSON files atomically."""
from __future__ import annotations

import json
import os
import sys
import time
import tempfile
from pathlib import Path
from typing import Sequence

from dataclasses import replace

from grader.verify.integrity import Snapshot
from grader.verify.outcomes import TestOutcome


def _write_atomic(path: Path, write) -> None:
    """`write(binary file)` into a temporary file in the same folder, then rename: a reader (or a
    run interrupted mid-write) never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data) -> None:
    _write_atomic(path, lambda f: f.write(json.dumps(data, indent=1, default=str).encode()))


def write_text_atomic(path: Path, text: str) -> None:
    _write_atomic(path, lambda f: f.write(text.encode()))


def save_atomic(path: Path, data) -> None:
    """torch.save, atomically (tensors for grader.verify.judge)."""
    import torch

    _write_atomic(path, lambda f: torch.save(data, f))


def recorded_name(nodeid: str) -> str:
    """`forward[float32-257]` for a check, `performance` for the timing test."""
    name = nodeid.split("::")[-1]
    if name.startswith("test_check["):
        return name[len("test_check[") : -1]
    return name.removeprefix("test_")


class ResultsRecorder:
    """A pytest plugin: after every test, rewrite the results file. If the process then dies (a
    segfault, an illegal memory access, a time limit), the file still holds every finished test
    and names the one that was running. From `watch()` on (called right before the submission is
    imported), it also asks the integrity snapshot what changed after every test: deeply at the
    first test, around the timing and at the end (grader.verify.integrity)."""

    def __init__(self, path: Path, config=None, earlier: dict | None = None, resumed_after: Sequence[str] = ()):
        """`earlier`: the file as an earlier image of this process left it (grader/run/suite/resume.py),
        whose tests (and any tampering found) this one keeps, adding its own; `resumed_after`: the checks
        whose faults the earlier images ended on, marked so (extra "resumed": the judge's answers recorded
        after them were recorded by a fresh process, so their fault excuses no missing answer)."""
        self.path = path
        self.config = config
        self.tests: dict[str, TestOutcome] = {}
        self.running: str | None = None
        self.snapshot: Snapshot | None = None  # taken before any submitted code runs
        self.tampered: list[str] = []
        self.finished = 0
        self.file_s = self.integrity_s = 0.0  # this recorder's own time, in the log
        self._encoded: dict[str, str] = {}  # each test's entry as JSON, encoded again only when it changed
        self._changed: set[str] = set()
        self._cpu_began: float | None = None  # the process's CPU time when the running test started
        self.last_nodeid: str | None = None  # the session's last test, once collected
        for entry in (earlier or {}).get("tests", []):
            outcome = TestOutcome.from_json(entry)
            if outcome.name in resumed_after:
                outcome = replace(outcome, extra={**outcome.extra, "resumed": True})
            self.tests[outcome.name] = outcome
        self.tampered = list((earlier or {}).get("tampered") or [])
        self._changed.update(self.tests)

    def watch(self) -> None:
        manager = self.config.pluginmanager if self.config is not None else None
        self.snapshot = Snapshot(plugins=manager.get_plugins if manager is not None else None).take()

    # The check and the writer are bound when this module is imported, before any submitted code
    # runs: replacing Snapshot.changed or write_text_atomic later does not change what is called
    # here (and is itself reported, both being in the snapshot).
    def _flush(self, check: bool = False, deep: bool = False, _changed=Snapshot.changed, _write=write_text_atomic,
               _clock=time.perf_counter, _dumps=json.dumps):
        began = _clock()
        if check and self.snapshot is not None and not self.tampered:
            self.tampered = _changed(self.snapshot, deep=deep)
        checked = _clock()
        # the file is rewritten several times per test: each entry is encoded once per change (a whole
        # file re-encoded every time cost 5-13 s of a 600-check grade)
        encoded = self._encoded
        for name in self._changed:
            encoded[name] = _dumps(self.tests[name].to_json(), default=str)
        self._changed.clear()
        _write(self.path, '{"tests": [' + ",\n".join(encoded[n] for n in self.tests) + '],\n"running": '
               + _dumps(self.running) + ', "tampered": ' + _dumps(self.tampered) + "}")
        self.integrity_s += checked - began
        self.file_s += _clock() - checked

    def pytest_runtest_logstart(self, nodeid, location):
        self.running = nodeid.split("::")[-1]
        self._cpu_began = time.process_time()
        self._flush(check=self.running == "test_performance", deep=True)  # nothing changed before the timing
        torch = _cuda_torch()
        if torch is not None:
            torch.cuda.reset_peak_memory_stats()

    def _record_peak(self, nodeid: str) -> None:
        """The GPU memory PyTorch held at most during the test (how many grading processes fit beside
        one another: `python -m grader` prints each exercise's largest)."""
        torch = _cuda_torch()
        name = recorded_name(nodeid)
        if torch is not None and name in self.tests:
            self.tests[name] = replace(self.tests[name], gpu_peak_mib=round(torch.cuda.max_memory_reserved() / 2**20))
            self._changed.add(name)

    def pytest_runtest_logreport(self, report):
        name = recorded_name(report.nodeid)
        entry = self.tests.get(name) or TestOutcome(name, None, "not run")
        outcome, reason = entry.outcome, entry.reason
        if report.failed and outcome != "failed":  # a failure in setup counts too
            outcome, reason = "failed", _reason(report)
        elif report.skipped:
            outcome = "skipped"
            # pytest reports pytest.skip("why") as (file, line, "Skipped: why"): the scorer reads "why"
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
        elif report.when == "call" and report.passed and outcome == "not run":
            outcome = "passed"
        self.tests[name] = replace(
            entry, outcome=outcome, reason=reason, properties={**entry.properties, **dict(report.user_properties)},
            seconds=round((entry.seconds or 0.0) + report.duration, 3))  # setup, call and teardown
        self._changed.add(name)
        self._flush()

    def pytest_runtest_logfinish(self, nodeid, location):
        self._record_peak(nodeid)
        name = recorded_name(nodeid)
        if name in self.tests and self._cpu_began is not None:
            self.tests[name] = replace(self.tests[name], cpu_seconds=round(time.process_time() - self._cpu_began, 3))
            self._changed.add(name)
        self.running = None
        self.finished += 1
        # after the timing, unless it was the last test: the session's end checks deeply next, with no
        # test between (each deep check of a grading process takes about 0.1 s of the GPU's turn)
        deep = self.finished == 1 or (nodeid.endswith("test_performance") and nodeid != self.last_nodeid)
        self._flush(check=True, deep=deep)

    def pytest_sessionfinish(self, session, exitstatus):
        self._flush(check=True, deep=True)

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line(f"results file: {self.file_s:.1f} s, integrity checks: {self.integrity_s:.1f} s")

    def pytest_collection_finish(self, session):
        self.last_nodeid = session.items[-1].nodeid if session.items else None
        # the group of each selected check (after -k/-m), so the scorer needs no spec import
        for item in session.items:
            check = getattr(item, "callspec", None) and item.callspec.params.get("check")
            if check is not None:
                self.tests[check.name] = TestOutcome(check.name, check.group, "not run", huge=bool(check.huge))
            elif item.name == "test_performance":
                self.tests["performance"] = TestOutcome("performance", "performance", "not run")
        self._changed.update(self.tests)
        self._flush()


def _cuda_torch():
    """torch, when this process has started CUDA (never starts it)."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and torch.cuda.is_initialized() else None


def peak_check_mib(results: dict) -> int:
    """The most GPU memory one check of a results file (its JSON) held, but the huge checks (one at a
    time) and the timing (alone on the GPU)."""
    tests = [TestOutcome.from_json(t) for t in results.get("tests", [])]
    return max((t.gpu_peak_mib or 0 for t in tests if not t.huge and t.name != "performance"), default=0)


def _reason(report) -> str:
    text = report.longreprtext or ""
    lines = [l for l in text.splitlines() if l.strip()]
    # pytest.fail(..., pytrace=False) gives just the message; a traceback ends with "E   ..." lines
    e_lines = [l[4:] if l.startswith("E   ") else l for l in lines if l.startswith("E   ")]
    if e_lines:
        return "\n".join(e_lines)[:2000]
    return "\n".join(lines[-6:])[:2000]
