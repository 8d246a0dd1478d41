"""What the course says to a person: usage errors, the no-GPU summary's footer, the defaults that the
Makefile, the README and `--help` state, and a clean exit. All on the CPU, without builds."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader import archs, cli, report
from grader.env import REPO


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_a_math_mode_never_left_prints_nothing_at_exit(tmp_path):
    """The grading process enters its math state at collection for its whole life (as
    grader/suite/conftest.py does): pytest ending with it entered must print nothing (as a generator,
    math_mode printed "Exception ignored in: <generator object math_mode> ... 'NoneType' object has
    no attribute 'allow_tf32'" at the end of every grading process)."""
    (tmp_path / "conftest.py").write_text(
        "from grader import spec  # noqa: F401 (as the suite's conftest)\n"
        "_state = []\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    from grader.timer import tuned_strict_fp32\n"
        "    _state.append(tuned_strict_fp32())\n"
        "    _state[0].__enter__()\n")
    (tmp_path / "test_it.py").write_text(
        "import torch\n"
        "def test_it():\n"
        "    assert torch.backends.cudnn.benchmark and not torch.backends.cuda.matmul.allow_tf32\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr + proc.stdout, proc.stderr
