"""Every solution and every stub compiles as a real CUDA extension and loads; on a machine
without a GPU, the checks that need none still run (a CPU tensor must be rejected clearly)."""
from __future__ import annotations

import pytest

from grader import build
from grader.cli import build_all
from tests.conftest import HAS_GPU
from tests.grading import EXERCISES, JOBS, SOLUTIONS, exercise_folders, explain, grade, quiet
from tests.known_wrong import all_variants

FOLDERS = exercise_folders(SOLUTIONS) + exercise_folders(EXERCISES)


@pytest.fixture(scope="session")
def builds():
    return build_all(FOLDERS, JOBS, log=quiet)


@pytest.mark.parametrize("folder", FOLDERS, ids=[f"{p.parent.name}/{p.name}" for p in FOLDERS])
def test_compiles_and_loads(builds, folder):
    result = builds[folder]
    assert result["ok"], f"{folder} failed to build:\n{result.get('error')}"
    lib = build.load_library(folder)  # cached: loads the library into this process
    import torch

    registered = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith(lib.namespace + "::")]
    assert registered, f"{folder}: the library registered no op under {lib.namespace}"


@pytest.mark.skipif(HAS_GPU, reason="covered with the GPU checks by test_gpu_grading")
def test_solutions_pass_every_check_that_runs_without_a_gpu(builds):
    rows = grade(SOLUTIONS)
    for row in rows.values():
        assert row["status"] == "graded", explain(rows)
        assert all(t["outcome"] in ("passed", "skipped") for t in row["tests"]), explain(rows)
        assert any(t["outcome"] == "passed" for t in row["tests"]), f"{row['exercise']}: no check ran on CPU"


@pytest.mark.skipif(HAS_GPU, reason="covered with the GPU checks by test_gpu_grading")
def test_stubs_earn_nothing_without_a_gpu(builds):
    rows = grade(EXERCISES)
    for row in rows.values():
        assert row["points"] == 0, explain(rows)
        assert not any(g["state"] == "passed" for g in row["groups"].values()), explain(rows)


def test_compile_error_shows_file_and_line(tmp_path):
    variant = next(v for v in all_variants() if v.name == "compile_error")
    folder = variant.materialize(tmp_path)
    result = build.build(folder, load=False)
    assert not result.ok
    first = result.error.splitlines()[0]
    assert "leaky_relu.cu" in first and "error" in first, result.error
    rows = grade(tmp_path, [variant.exercise], timeout=300)
    row = rows[variant.exercise]
    assert row["status"] == "build failed" and row["points"] == 0 and "leaky_relu.cu" in row["error"]


def test_stale_torch_lock_does_not_block_a_build(tmp_path):
    """A build killed mid-way leaves torch's lock file behind; the next build must not wait on it."""
    folder = tmp_path / "01_leaky_relu"
    import shutil

    shutil.copytree(SOLUTIONS / "01_leaky_relu", folder)
    out = build.build_dir_for(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lock").write_text("")
    result = build.build(folder, load=False)
    assert result.ok, result.error
