"""Where a grade's time goes, on the CPU: the yardstick times only the exercises whose timing ran (a
stub's timing never runs: its checks fail first), and the log can tell a grading process's own
checks from its start-up and exit."""
from __future__ import annotations

import json

import pytest

from grader.run import grading


@pytest.mark.parametrize("outcome, timed", [("passed", True), ("failed", True), ("skipped", False),
                                            ("not run", False), (None, False)])
def test_the_reference_is_timed_only_where_the_timing_ran(tmp_path, outcome, timed):
    tests = [{"name": "forward[0]", "group": "forward", "outcome": "failed"}]
    if outcome is not None:
        tests.append({"name": "performance", "group": "performance", "outcome": outcome})
    grading._results_path(tmp_path, "09_x").write_text(json.dumps({"tests": tests, "running": None}))
    assert grading._timing_ran(tmp_path, "09_x") is timed
    assert grading._timing_ran(tmp_path, "10_missing") is False  # the process saved nothing


def test_pytest_s_session_time_is_read_from_a_grading_log():
    log = "....F\n0.50s call     grader/run/suite/test_exercise.py::test_check[a]\n3 failed, 80 passed in 28.03s\n"
    assert grading.pytest_session_s(log) == 28.03
    assert grading.pytest_session_s("=== 1 passed, 2 skipped in 1.99s (0:00:01) ===") == 1.99
    assert grading.pytest_session_s("Fatal Python error: Segmentation fault") is None


def test_the_yardstick_is_a_last_job_told_its_builds(tmp_path):
    """A grade's yardstick is a `last` job of the grading run (grader.run.gate: it times once every grading
    process has ended); the references' builds are said to its process, which (here, without a GPU)
    answers that it cannot time, and its numbers come back by exercise."""
    from concurrent.futures import Future

    from grader.run import gate
    from tests.grading import SOLUTIONS

    built: Future = Future()
    built.set_result({"ok": True})
    ref = SOLUTIONS / "01_leaky_relu"
    stick = grading.yardstick_job({"01_leaky_relu": ref}, tmp_path, None, last=True)
    assert stick.last and not stick.light and grading.yardstick_job({}, tmp_path).light
    stick.held = True
    grading.release_when_built({stick.name: stick}, [(stick.name, {"01_leaky_relu": built},
                                                      grading._build_result_path(tmp_path, grading.YARDSTICK))])
    gate.run([stick], tmp_path, parallel=1, timeout=120)
    assert json.loads(grading._build_result_path(tmp_path, grading.YARDSTICK).read_text())["ok"] is True
    measured = grading.read_yardstick(stick, tmp_path)
    assert "01_leaky_relu" in measured and "no CUDA GPU" in measured["01_leaky_relu"]["error"], measured


def test_a_reports_check_time_is_summed_by_exercise_and_kind(tmp_path, capsys):
    """scripts/grade_time.py: wall and CPU seconds per exercise and per kind of check (a property's bracketed
    kind; a dtype or size in brackets is not a kind), the timing left out."""
    import importlib.util

    from grader import env

    spec = importlib.util.spec_from_file_location("grade_time", env.REPO / "scripts" / "grade_time.py")
    grade_time = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grade_time)
    assert grade_time.kind("forward[float32-1]") == "forward"
    assert grade_time.kind("conv2d [non-contiguous arguments]") == "non-contiguous arguments"
    tests = [{"name": "forward[float32-1]", "seconds": 2.0, "cpu_seconds": 0.5},
             {"name": "conv2d [state between calls]", "seconds": 4.0, "cpu_seconds": 1.0},
             {"name": "performance", "seconds": 9.0, "cpu_seconds": 9.0}]
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"exercises": [{"exercise": "09_x", "tests": tests}]}))
    grade_time.main([str(path)])
    out = capsys.readouterr().out
    assert "09_x" in out and "     6.0      1.5     0.25" in out, out
    assert "4.0 s wall     1.0 s CPU     1 checks  state between calls" in out, out


def test_the_cuda_sync_mode_is_one_of_cudas_and_off_unless_asked(monkeypatch):
    """COURSE_CUDA_SYNC sets how a grading process waits for the GPU (grader.env.set_cuda_sync): unset,
    nothing is changed; a name CUDA has no flag for is refused, naming the variable. (Whether the driver
    takes the flag only a GPU can say: cuDevicePrimaryCtxGetState reads it back.)"""
    from grader import env

    monkeypatch.delenv(env.CUDA_SYNC_ENV, raising=False)
    assert env.set_cuda_sync() is None
    monkeypatch.setenv(env.CUDA_SYNC_ENV, "sleepy")
    with pytest.raises(ValueError, match="COURSE_CUDA_SYNC='sleepy'"):
        env.set_cuda_sync()
    assert set(env.CUDA_SYNC_FLAGS) == {"auto", "spin", "yield", "blocking"}


def test_course_profile_writes_one_loadable_profile_per_grading_process(tmp_path):
    """COURSE_PROFILE=<folder>: the grading suite's process leaves its cProfile there, named as its part
    (`<exercise>.part<i>.prof`), even though a grading process ends with os._exit (no interpreter teardown)."""
    import os
    import pstats
    import subprocess
    import sys

    from grader import env

    out = tmp_path / "prof"
    cmd = [sys.executable, "-m", "pytest", str(env.REPO / "grader" / "run" / "suite"), "-q", "-p", "no:cacheprovider",
           f"--rootdir={env.REPO}", f"--exercise-dir={env.REPO / 'solutions' / '01_leaky_relu'}", "--seed=1",
           f"--results={tmp_path / 'results.json'}", "--shard=1/2", "-k", "input_checks"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=env.REPO, timeout=600,
                          env={**os.environ, "COURSE_PROFILE": str(out), "PYTHONPATH": str(env.REPO),
                               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert (tmp_path / "results.json").exists(), done.stdout[-2000:] + done.stderr[-2000:]
    profile = out / "01_leaky_relu.part1.prof"
    assert profile.exists(), f"no profile in {sorted(p.name for p in out.iterdir()) if out.exists() else out}"
    assert pstats.Stats(str(profile)).total_calls > 0
