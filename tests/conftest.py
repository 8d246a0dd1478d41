"""Repository tests. GPU tests carry the `gpu` marker and are skipped, with the reason printed at
the end of the run, on a machine without a CUDA GPU."""
from __future__ import annotations

import pytest

from grader import env

env.configure()

import torch  # noqa: E402

HAS_GPU = torch.cuda.is_available()
NO_GPU_REASON = "no CUDA GPU on this machine"


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason=NO_GPU_REASON)
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_GPU_REASON in str(r.longrepr)]
    if skipped:
        terminalreporter.section("GPU tests skipped")
        for r in skipped:
            terminalreporter.write_line(f"  {r.nodeid}")
        terminalreporter.write_line(f"{len(skipped)} GPU test(s) skipped: {NO_GPU_REASON}. Run `make test` on a GPU machine.")
    elif HAS_GPU:
        terminalreporter.section("GPU")
        terminalreporter.write_line(f"GPU tests ran on {torch.cuda.get_device_name()}")


@pytest.fixture
def host_copies(monkeypatch):
    """How many copies to the host (`Tensor.tolist`) the test's body makes: on a GPU each waits for the
    grading process's turn on the shared GPU, so a check's copies are counted on the CPU too."""
    count = [0]
    real = torch.Tensor.tolist

    def counting(self):
        count[0] += 1
        return real(self)

    monkeypatch.setattr(torch.Tensor, "tolist", counting)
    return count

