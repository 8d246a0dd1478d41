"""Every solution and every stub compiles as a real CUDA extension and loads; on a machine
without a GPU, the checks that need none still run (a CPU tensor must be rejected clearly)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import env
from grader.toolchain import build
from grader.run import resources
from grader.run.grading import build_all
from grader.specs import capability_gated_kernels
from tests.conftest import HAS_GPU
from tests.grading import EXERCISES, SOLUTIONS, exercise_folders, explain, grade, quiet
from tests.known_wrong import all_variants

CORES = os.cpu_count() or 2  # CPU grading: every core (no timing to disturb)

FOLDERS = exercise_folders(SOLUTIONS) + exercise_folders(EXERCISES)


@pytest.fixture(scope="session")
def builds():
    return build_all(FOLDERS, CORES, log=quiet)  # two builds at once fill the cores better than one using both


@pytest.mark.parametrize("folder", FOLDERS, ids=[f"{p.parent.name}/{p.name}" for p in FOLDERS])
def test_compiles_and_loads(builds, folder):
    result = builds[folder]
    assert result["ok"], f"{folder} failed to build:\n{result.get('error')}"
    lib = build.load_library(folder)  # cached: loads the library into this process
    import torch

    registered = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith(lib.namespace + "::")]
    assert registered, f"{folder}: the library registered no op under {lib.namespace}"


@pytest.mark.parametrize("folder", FOLDERS, ids=[f"{p.parent.name}/{p.name}" for p in FOLDERS])
def test_the_resource_report_covers_every_kernel(builds, folder):
    """The grade's resource report (grader.run.resources) has ptxas's numbers for every kernel of every
    build, for each architecture built; a solution's kernels all have an evaluated launch and an
    occupancy on every architecture that may launch them (a kernel that only a tensor-core version
    runs is refused below compute capability 8.0: `make test` on a T4 builds for sm_75). A stub's
    kernel that nothing instantiates yet (its launch is the student's) is named as not compiled."""
    assert builds[folder]["ok"], builds[folder].get("error")
    report = resources.exercise_report(folder)
    defined = {k.name for k in resources.scan_sources(folder)[0]}
    compiled = {k["kernel"] for k in report["kernels"]}
    assert compiled | set(report["missing"]) == defined and not report["unknown_logs"], report
    for arch in report["archs"]:
        assert {k["kernel"] for k in report["kernels"] if k["arch"] == arch} == compiled, arch
    if folder.parent == SOLUTIONS:
        assert compiled == defined, report["missing"]
        gated = capability_gated_kernels(folder.name)
        for k in report["kernels"]:
            assert k["launches"] and all(l["block"] for l in k["launches"]), k
            if resources.arch_capability(k["arch"]) < gated.get(k["kernel"], (0, 0)):
                # never launched on this architecture (a TF32 kernel's 96 KiB ring on sm_75): said so
                assert k["needs_capability"] == gated[k["kernel"]] and not k["occupancy"], k
                continue
            assert not k.get("needs_capability"), k
            assert k["occupancy"] and all(o["blocks_per_sm"] > 0 for o in k["occupancy"]), k


@pytest.mark.skipif(HAS_GPU, reason="covered with the GPU checks by test_gpu_grading")
def test_solutions_pass_every_check_that_runs_without_a_gpu(builds):
    rows = grade(SOLUTIONS, parallel=CORES)
    for row in rows.values():
        assert row.status == "graded", explain(rows)
        assert all(t.outcome in ("passed", "skipped") for t in row.tests), explain(rows)
        assert any(t.outcome == "passed" for t in row.tests), f"{row.exercise}: no check ran on CPU"


@pytest.mark.skipif(HAS_GPU, reason="covered with the GPU checks by test_gpu_grading")
def test_stubs_earn_nothing_without_a_gpu(builds):
    rows = grade(EXERCISES, parallel=CORES)
    for row in rows.values():
        assert row.points == 0, explain(rows)
        assert not any(g.state == "passed" for g in row.groups.values()), explain(rows)


def test_compile_error_shows_file_and_line(tmp_path):
    """A first build that fails (torch's build path); the grade's "build failed" row with the same
    message: tests/test_containment.py's failed-build test."""
    variant = next(v for v in all_variants() if v.name == "compile_error")
    folder = variant.materialize(tmp_path)
    result = build.build(folder, load=False)
    assert not result.ok
    first = result.error.splitlines()[0]
    assert "leaky_relu.cu" in first and "error" in first, result.error


def test_stale_torch_lock_does_not_block_a_build(first_build):
    """A build killed mid-way leaves torch's lock file behind; the next build must not wait on it (the
    first build of the edit tests' copy, below, is made over such a lock: one build for both)."""
    _, result = first_build
    assert result.ok and not result.extra["ninja_only"], result.error  # torch's way, the one that took the lock


def test_builds_in_threads_of_one_process_write_the_precompiled_header_together(tmp_path, monkeypatch):
    """Builds run in processes and in threads (a grade's pool, a test's): each writes the header under a name
    of its own before putting it in place, so none renames another's file away. Eight threads make a new
    folder's header at once, twenty times. (Its .gch is marked failed, so no compile runs: the header is what
    threads race on.)"""
    import threading

    rounds, current = iter(range(20)), []

    def next_folder():  # run by one thread once all eight wait: the next round's empty folder
        folder = tmp_path / f"pch{next(rounds, 'done')}"
        folder.mkdir()
        (folder / "failed").write_text("not made in this test")
        current[:] = [folder / build.PCH_NAME]

    monkeypatch.setattr(build, "pch_header", lambda: current[0])
    start, errors = threading.Barrier(8, action=next_folder), []

    def make():
        for _ in range(20):
            start.wait()
            try:
                build.ensure_pch()
            except OSError as e:
                errors.append(e)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert all((tmp_path / f"pch{r}" / build.PCH_NAME).read_text() == build._pch_text() for r in range(20))


def test_the_binding_files_compile_with_the_precompiled_header(builds):
    """The torch headers every .cpp includes come precompiled (grader.toolchain.build.ensure_pch), made with the
    flags torch gives a real build but the build's own (its macro, namespace and include folders), so
    GCC takes the .gch (`-H` marks it `!`) instead of reading the headers as text."""
    folder = SOLUTIONS / "01_leaky_relu"
    assert builds[folder]["ok"], builds[folder].get("error")
    out = build.build_dir_for(folder)
    ninja = (out / "build.ninja").read_text()
    cflags = shlex.split(next(l for l in ninja.splitlines() if l.startswith("cflags = ")).removeprefix("cflags = "))
    pch = build.pch_header()
    per_build = [f"-DTORCH_EXTENSION_NAME={build.namespace_for(folder)}", f"-DCOURSE_NS={build.namespace_for(folder)}",
                 f"-I{env.INCLUDE_DIR}", f"-I{folder.resolve()}", "-include", str(pch)]
    assert all(f in cflags for f in per_build), cflags
    assert [f for f in cflags if f not in per_build] == [*build.torch_cxx_flags(), *build.CXX_FLAGS]
    gch = pch.with_name(pch.name + ".gch")
    assert gch.is_file(), list(pch.parent.iterdir())
    command = subprocess.run([build._ninja(), "-t", "commands", "leaky_relu.o"], cwd=out, capture_output=True,
                             text=True, check=True).stdout.splitlines()[-1]
    words = shlex.split(command)
    words = words[:words.index("-c")] + ["-fsyntax-only", "-H", words[words.index("-c") + 1]]
    del words[words.index("-MMD"):words.index("-MMD") + 3]  # -MMD -MF <depfile>: ninja's, not ours
    proc = subprocess.run(words, cwd=out, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"! {gch}" in proc.stderr.splitlines(), [l for l in proc.stderr.splitlines() if "course_pch" in l]


# --- rebuilding after an edit: ninja alone, without torch -------------------------------------------

# What grader.toolchain.build relies on in torch.utils.cpp_extension, which is private and may change in any
# release: pattern -> what breaks if it goes. The behavioural tests below would mostly still pass
# (a renamed lock file is simply never in the way; a new message prefix only loses the file and line).
TORCH_BUILD_INTERNALS = {
    r"os\.path\.join\(build_directory, 'build\.ninja'\)":
        "the ninja-only rebuild runs torch's build.ninja from the build folder",
    r"os\.path\.join\(build_directory, 'lock'\)":
        "a killed build's lock file (torch before its OS-level lock) is removed by that name",
    r"error_prefix=f\"Error building extension '\{name\}'\"":
        "a compiler error is told from a broken build folder by torch's message prefix",
    r"f\"\{module_name\}\{LIB_EXT\}\"": "the built library is <namespace>.so in the build folder",
}


def test_the_torch_build_internals_the_fast_rebuild_relies_on_are_there():
    import inspect

    from torch.utils import cpp_extension

    source = inspect.getsource(cpp_extension)
    missing = [why for pattern, why in TORCH_BUILD_INTERNALS.items() if not re.search(pattern, source)]
    assert not missing, "torch.utils.cpp_extension changed; grader/toolchain/build.py needs a look: " + "; ".join(missing)


# `python -m grader.toolchain.build`, failing if it imported torch
BUILD_WITHOUT_TORCH = """
import json, sys
from grader.toolchain.build import main
rc = main(sys.argv[1:])
if "torch" in sys.modules:
    raise SystemExit("grader.toolchain.build imported torch")
raise SystemExit(rc)
"""


def _build_in_subprocess(folder, tmp_path, *, without_torch: bool = False):
    """Build `folder` the way the grader does (its own process); returns (process, result dict)."""
    out = tmp_path / "build.json"
    out.unlink(missing_ok=True)
    code = BUILD_WITHOUT_TORCH if without_torch else "import sys; from grader.toolchain.build import main; sys.exit(main(sys.argv[1:]))"
    child = dict(os.environ, PYTHONPATH=str(env.REPO))
    proc = subprocess.run([sys.executable, "-c", code, str(folder), "--json", str(out)], env=child,
                          capture_output=True, text=True, timeout=600)
    return proc, (json.loads(out.read_text())[0] if out.exists() else None)


def _compiled(log: str) -> list[str]:
    """The sources a build's ninja output shows compiled, by file name."""
    return sorted(set(re.findall(r" -c \S*/([\w.]+\.(?:cu|cpp)) ", log)))


@pytest.fixture(scope="module")
def first_build(tmp_path_factory):
    """A copy of solution 01 and its first build (the full way, through torch.utils.cpp_extension), made
    where a build killed mid-way left torch's lock file behind."""
    folder = tmp_path_factory.mktemp("edit") / "01_leaky_relu"
    shutil.copytree(SOLUTIONS / "01_leaky_relu", folder)
    out = build.build_dir_for(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lock").write_text("")
    return folder, build.build(folder, load=False)


@pytest.fixture(scope="module")
def edited(first_build):
    """The copy of solution 01, built once; each test edits it and puts the sources back."""
    folder, result = first_build
    assert result.ok and not result.extra["ninja_only"], result.error
    originals = {p: p.read_text() for p in folder.iterdir() if p.suffix in (".cu", ".cpp", ".h")}
    yield folder
    for p, text in originals.items():
        p.write_text(text)


@pytest.fixture
def restore(edited):
    originals = {p: p.read_text() for p in edited.iterdir() if p.suffix in (".cu", ".cpp", ".h")}
    yield edited
    for p, text in originals.items():
        p.write_text(text)


def test_an_edit_rebuilds_only_the_edited_file_with_ninja_alone_and_without_torch(restore, tmp_path):
    folder = restore
    cu, cpp = folder / "leaky_relu.cu", folder / "leaky_relu.cpp"
    cu.write_text(cu.read_text() + "// an edit\n")
    proc, result = _build_in_subprocess(folder, tmp_path, without_torch=True)
    assert proc.returncode == 0 and result["ok"], proc.stderr
    assert result["extra"]["ninja_only"] and _compiled(result["log"]) == ["leaky_relu.cu"], result["log"]

    # a changed message in the C++ front end: the rebuilt library says the new one
    cpp.write_text(cpp.read_text().replace('check_input(x, "x");', 'check_input(x, "x_edited");', 1))
    proc, result = _build_in_subprocess(folder, tmp_path, without_torch=True)
    assert proc.returncode == 0 and result["ok"], proc.stderr
    assert result["extra"]["ninja_only"] and _compiled(result["log"]) == ["leaky_relu.cpp"], result["log"]
    call = (f"import torch; torch.ops.load_library({result['library']!r})\n"
            f"try:\n    torch.ops.{result['namespace']}.leaky_relu(torch.randn(3), 0.1)\n"
            f"except RuntimeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", call], capture_output=True, text=True, timeout=300)
    assert "x_edited" in out.stdout, out.stdout + out.stderr


def test_a_compile_error_after_a_good_build_shows_file_and_line_then_the_fix_builds(restore, tmp_path):
    folder = restore
    cu = folder / "leaky_relu.cu"
    good = cu.read_text()
    cu.write_text(good + "int broken = ;\n")
    line = len(good.splitlines()) + 1
    proc, result = _build_in_subprocess(folder, tmp_path, without_torch=True)
    assert proc.returncode == 1 and not result["ok"]
    first = result["error"].splitlines()[0]
    assert f"leaky_relu.cu({line}): error" in first, result["error"]
    cu.write_text(good)
    proc, result = _build_in_subprocess(folder, tmp_path, without_torch=True)
    assert proc.returncode == 0 and result["ok"] and result["extra"]["ninja_only"], proc.stderr
    assert build.cached(folder) is not None


def _session(sid: int) -> dict[int, bytes]:
    """The processes of session `sid` (ninja runs each compiler in a process group of its own):
    pid -> command line."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                found[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_a_rebuild_killed_mid_way_leaves_no_lock(restore, tmp_path):
    folder = restore
    cu = folder / "leaky_relu.cu"
    cu.write_text(cu.read_text() + "// killed while this compiles\n")
    child = dict(os.environ, PYTHONPATH=str(env.REPO))
    proc = subprocess.Popen([sys.executable, "-m", "grader.toolchain.build", str(folder)], env=child, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not any(b"nvcc" in c for c in _session(proc.pid).values()) and time.monotonic() < deadline:
        assert proc.poll() is None, "the build ended before it could be killed"
        time.sleep(0.05)
    time.sleep(0.3)
    for pid in _session(proc.pid):  # the build, ninja and the compilers
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    assert build.cached(folder) is None  # no stamp of a build that never finished
    start = time.monotonic()
    proc, result = _build_in_subprocess(folder, tmp_path, without_torch=True)
    assert proc.returncode == 0 and result["ok"] and result["extra"]["ninja_only"], proc.stderr
    assert time.monotonic() - start < 120


def test_the_compilers_module_waits_for_a_thread_importing_torch():
    """A build in the process that imports the specs in a thread (grader.specs.Selection: `make mutants`'
    same-code check) asks for torch.utils.cpp_extension while that thread is inside torch's import:
    importing the submodule first ran it against a half-initialized torch.utils ("cannot import name
    'set_module' from partially initialized module"); cpp_extension_module() waits for torch. A fresh
    interpreter, so that torch is not imported yet."""
    script = ("import time\nfrom grader.specs import Selection\nchosen = Selection.start(['02'])\ntime.sleep(0.3)\n"
              "from grader.toolchain.build import cpp_extension_module\n"
              "print(cpp_extension_module().__name__)\nchosen.specs()\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=env.REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "torch.utils.cpp_extension" in done.stdout, done.stderr[-2000:]
