"""What the course says to a person: usage errors, the no-GPU summary's footer, the defaults that the
Makefile, the README and `--help` state, and a clean exit. All on the CPU, without builds."""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader.run import archs, cli, report
from grader.env import REPO


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_a_math_mode_never_left_prints_nothing_at_exit(tmp_path):
    """The grading process enters its math state at collection for its whole life (as
    grader/run/suite/conftest.py does): pytest ending with it entered must print nothing (as a generator,
    math_mode printed "Exception ignored in: <generator object math_mode> ... 'NoneType' object has
    no attribute 'allow_tf32'" at the end of every grading process)."""
    (tmp_path / "conftest.py").write_text(
        "from grader.verify import spec  # noqa: F401 (as the suite's conftest)\n"
        "_state = []\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    from grader.verify.timer import tuned_strict_fp32\n"
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


def _exercise_like(tmp_path: Path):
    """A folder laid out like an exercise: a .cpp registering op `scale` as `scale_front`, and a Python
    wrapper whose op raises what PyTorch raises when a CPU tensor reaches c10::cuda::CUDAGuard."""
    import importlib.util

    (tmp_path / "scale.cpp").write_text('COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {\n'
                                        '  m.impl("scale", &scale_front);\n}\n')
    (tmp_path / "scale.py").write_text(
        "class _Ops:\n"
        "    def scale(self, x):\n"
        "        raise RuntimeError('CUDAGuardImpl initialized with non-CUDA DeviceType: cpu')\n"
        "class lib:\n"
        "    ops = _Ops()\n"
        "def scale(x):\n"
        "    return lib.ops.scale(x)\n")
    spec = importlib.util.spec_from_file_location("scale_under_test", tmp_path / "scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cpu_tensor_at_the_cuda_guard_points_to_the_students_check(tmp_path):
    from grader.verify.checks import CheckFailure, error_message, expect_error

    module = _exercise_like(tmp_path)
    with pytest.raises(CheckFailure) as caught:
        expect_error(lambda m: m.scale(0), module, names=("x must", "`x`"), what="a CPU tensor")
    text = str(caught.value)
    assert text.startswith("a CPU tensor: scale.cpp: scale_front(): a CPU tensor reached the CUDA guard"), text
    assert "course::check_*" in text and "x must" not in text  # no list of patterns
    # the judge's direct call of lib.ops.<op> (no `ops.<op>(` line in the traceback): by the op's name
    try:
        getattr(module.lib.ops, "scale")(0)
    except RuntimeError as e:
        assert error_message(e, module, op="lib.ops.scale").startswith("scale.cpp: scale_front(): ")
    # and it names no argument: the judge requires a refusal that names one
    from grader.verify.judge import names_one_of

    assert not names_one_of(text.split(": ", 1)[1], ("x", "A", "input", "weight", "bias", "grad_output"))


def test_an_error_that_names_no_argument_says_which_argument_it_should_name():
    from grader.verify.checks import CheckFailure, expect_error

    def refuse():
        raise RuntimeError("expected a CUDA tensor")

    with pytest.raises(CheckFailure) as caught:
        expect_error(refuse, names=("A must", "A is", "`A`", "A's"), what="a CPU A")
    assert str(caught.value) == "a CPU A: raised an error that does not name A: expected a CUDA tensor"


def _no_gpu_rows():
    from grader.verify.outcomes import TestOutcome
    from grader.verify.scoring import score_exercise
    from grader.specs import by_exercise

    leaky = by_exercise("01_leaky_relu")
    gpu_skip = "Skipped: no CUDA GPU on this machine: GPU checks skipped"
    tests = [{"name": f"forward[{i}]", "group": "forward", "outcome": "skipped", "reason": gpu_skip,
              "properties": {}} for i in range(3)]
    tests += [{"name": "input_checks[cpu x]", "group": "input_checks", "outcome": "passed", "reason": "",
               "properties": {}},
              {"name": "input_checks[cpu grad]", "group": "input_checks", "outcome": "failed",
               "reason": "was accepted", "properties": {}}]
    ok = score_exercise(leaky, [TestOutcome.from_json(t) for t in tests])
    broken = score_exercise(leaky, [], "build failed", "leaky_relu.cu(97): error: expected a \";\"")
    broken = replace(broken, exercise="02_elu")
    return ok, broken


@pytest.mark.parametrize("state", ["all compiled", "one failed", "none compiled", "no GPU check"])
def test_the_no_gpu_footer_says_what_happened(state):
    """After a build failure the footer said "everything above was compiled ... the 0 checks that need
    a GPU": it must be true in every state."""
    ok, broken = _no_gpu_rows()
    rows = {"all compiled": [ok], "one failed": [ok, broken], "none compiled": [broken],
            "no GPU check": [replace(ok, tests=tuple(t for t in ok.tests if "GPU" not in t.reason))]}[state]
    text = report.no_gpu_summary(rows)
    footer = " ".join(text.split("\n\n")[-1].split())
    assert ("everything above was compiled" in footer) == (state in ("all compiled", "no GPU check")), footer
    assert "0 checks" not in footer
    if state == "one failed":
        assert "1 of 2 exercises compiled" in footer and "02_elu (build failed) did not" in footer
        assert "the 3 checks that need a GPU" in footer
    if state == "none compiled":
        assert "no exercise compiled" in footer and "need a GPU (" not in footer
    if state == "no GPU check":
        assert "no check that needs a GPU was selected" in footer
    # each exercise names the CPU checks that ran, and how each went
    if state != "none compiled":
        first = " ".join(text.split("\n")[0:2])
        assert "input_checks[cpu x] passed" in first and "input_checks[cpu grad] FAILED" in first, text


def test_verbose_says_fresh_or_cached_and_no_warnings():
    """VERBOSE=1: whether the build was compiled now or cached, and "no compiler warnings" when the
    compiler gave none (it printed nothing then); the kernel-less stub does not contradict "compiled"."""
    stub = {"arch": "sm_90a", "archs": ["sm_90a"], "arch_why": "no GPU here", "kernels": [], "warnings": [],
            "missing": ["leaky_relu_kernel"], "notes": []}
    text = report.resources_text("01_leaky_relu", stub, verbose=True, build={"cached": True, "wall_s": 0.0})
    assert "build: cached" in text and "no compiler warnings about 01_leaky_relu's files" in text
    assert "no kernel compiled" not in text and "compiled, but no kernel is instantiated yet" in text
    text = report.resources_text("01_leaky_relu", dict(stub, warnings=["a.cu(1): warning #177-D: x"]), verbose=True,
                                 build={"cached": False, "wall_s": 12.3})
    assert "build: fresh (compiled in this run, 12.3 s)" in text and "warning #177-D" in text
    assert "no compiler warnings" not in text
    assert report.resources_text("01_leaky_relu", stub, full=False) == "01_leaky_relu: compiled, but no kernel is instantiated yet"


@pytest.mark.parametrize("args", [
    ["-m", "grader", "--frobnicate"],
    ["-m", "grader", "--ex", "99"],
    ["-m", "grader", "--ex", "01,99"],
    ["-m", "grader", "--target", "/no/such/folder"],
    ["-m", "grader.classroom.grade", "/no/such/class"],
    ["-m", "grader.classroom.grade", "{empty}"],
    ["-m", "grader.classroom.grade", "{class}", "--ex", "99"],
    ["-m", "grader.classroom.grade", "{class}", "--frobnicate"],
    ["-m", "grader.authoring.stubs", "--level", "hard"],
    ["-m", "grader.authoring.notebook_release", "publish"],
    ["-m", "grader.bench.benchmarks", "--frobnicate"],
    ["-m", "grader.run.mutants", "--n", "many"],
    ["-m", "grader.run.archs", "--frobnicate"],
], ids=["unknown option", "unknown EX", "unknown EX in a list", "missing TARGET", "missing SUBMISSIONS",
        "empty class", "class with an unknown EX", "class with an unknown option", "make exercises LEVEL=hard",
        "make notebooks: an unknown command", "make bench: an unknown option", "make mutants N=many",
        "make archs: an unknown option"])
def test_a_wrong_usage_is_one_line_on_stderr(args, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "class" / "student1").mkdir(parents=True)
    args = [a.format(empty=tmp_path / "empty", **{"class": tmp_path / "class"}) for a in args]
    proc = _run(*args, "--out", str(tmp_path / "out"))
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_comma_list_of_exercises_is_a_list():
    assert cli.exercise_names(["04,09,10"]) == cli.exercise_names(["04", "09", "10"]) == ["04", "09", "10"]
    assert cli.exercise_names(["04, 09", ""]) == ["04", "09"]


# ------------------------------------------------------------------ the same defaults everywhere

def _norm(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def _makefile_help() -> str:
    """The Makefile's help block: its leading comment lines."""
    lines = []
    for line in (REPO / "Makefile").read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#"))
    return _norm("\n".join(lines))


def _help(module: str) -> str:
    proc = _run("-m", module, "--help")
    assert proc.returncode == 0, proc.stderr
    return _norm(proc.stdout)


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {"Makefile": _makefile_help(), "README.md": _norm((REPO / "README.md").read_text()),
            "python -m grader --help": _help("grader"), "python -m grader.run.archs --help": _help("grader.run.archs")}


def test_parallel_has_one_default_everywhere(texts):
    from grader.run.grading import PARALLEL_DEFAULT

    for where in ("Makefile", "README.md", "python -m grader --help"):
        assert _norm(PARALLEL_DEFAULT) in texts[where], f"{where} does not state PARALLEL's default as {PARALLEL_DEFAULT!r}"


NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}


def test_the_architectures_are_counted_and_listed_as_grader_archs_has_them(texts):
    listed = " ".join(archs.ARCHS)
    assert listed in texts["Makefile"] and listed in texts["python -m grader.run.archs --help"], listed
    assert ", ".join(archs.ARCHS[:-1]) + " and " + archs.ARCHS[-1] in texts["README.md"]
    for where, text in texts.items():
        for m in re.finditer(r"\b(?:all|each of the|the) (\w+) (?:supported |GPU )*architectures", text):
            count = NUMBER_WORDS.get(m.group(1), int(m.group(1)) if m.group(1).isdigit() else None)
            assert count in (None, len(archs.ARCHS)), f"{where}: {m.group(0)!r}, but grader.run.archs has {len(archs.ARCHS)}"
    # make test's one architecture without a GPU, as the Makefile sets it and the README says
    test_arch = re.search(r"^TEST_ARCH = (\S+)$", (REPO / "Makefile").read_text(), re.M).group(1)
    assert test_arch in archs.ARCHS
    assert f"one architecture, {test_arch}" in texts["README.md"] and f"architecture, {test_arch}" in texts["Makefile"]
    assert "TORCH_CUDA_ARCH_LIST" not in (REPO / ".ci" / "run").read_text().split("set -euo")[1]  # CI: make test's


def test_switching_hint_levels_says_it_needs_force_everywhere(texts):
    for where in ("Makefile", "README.md"):
        sentence = next((s for s in re.split(r"(?<=[.;)])\s", texts[where]) if "Switching a level" in s), "")
        assert "needs FORCE=1" in sentence, f"{where} does not say that switching a hint level needs FORCE=1"


def test_a_list_of_exercises_is_shown_both_ways(texts):
    for where in ("Makefile", "README.md"):
        assert 'EX="04 09 10"' in texts[where] and "EX=04,09,10" in texts[where], where


def test_the_levels_are_stated_alike_everywhere(texts):
    """`make exercises LEVEL=...`: the Makefile, the README and `python -m grader.authoring.stubs --help` name
    every level of grader.authoring.stubs.LEVELS and say that HINTS= (--hints) is another name for it."""
    from grader.authoring.stubs import LEVELS

    stated = {"Makefile": texts["Makefile"], "README.md": texts["README.md"],
              "python -m grader.authoring.stubs --help": _help("grader.authoring.stubs")}
    for where, text in stated.items():
        flag = "--level" if where.startswith("python") else "LEVEL="
        for level in LEVELS:
            assert f"{level} (" in text or f"{flag}{level}" in text or f"{level}:" in text, f"{where} does not state {level}"
        alias = "--hints is another name for --level" if flag == "--level" else "HINTS= is another name for LEVEL="
        assert alias in text, f"{where} does not say {alias!r}"
