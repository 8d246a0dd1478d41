"""The nbgrader notebooks: valid, in sync with solutions/, released by real nbgrader without solutions
or hidden tests, and runnable end to end on a CPU (their GPU cells skip and say why).

Generic over units: every notebooks/source/<unit>/*.ipynb is checked. Tests that need nbgrader or
nbclient skip, with the reason, where those are not installed (the GPU machine may lack them).
"""
from __future__ import annotations

import ast
import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest

from grader import notebooks as nb

NOTEBOOKS = [p for unit in nb.units() for p in nb.notebooks_of(unit)]
IDS = [p.parent.name for p in NOTEBOOKS]


def need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not importable here (pip install -e '.[notebooks]')")


def read(path: Path):
    need("nbformat")
    import nbformat

    return nbformat.read(path, as_version=4)


def test_there_are_source_notebooks():
    assert NOTEBOOKS, f"no notebooks under {nb.SOURCE}"
    assert "unit1_scalar_kernels" in nb.units()
    generators = {p.stem for p in nb.GENERATORS.glob("*.py") if not p.name.startswith("_")}
    assert generators - set(nb.units()) == set(), "a generator whose notebook was never generated"


def course_calls(source: str) -> list[tuple[str, str, str, list[str] | None]]:
    """(method, exercise, group, only) of each course.check / course.performance call in a cell."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "course"
                and node.func.attr in ("check", "performance")):
            continue
        args = [ast.literal_eval(a) for a in node.args]
        only = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "only"), None)
        if node.func.attr == "check":
            calls.append(("check", args[1], args[0], only))
        else:
            calls.append(("performance", args[0], "performance", None))
    return calls


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_source_notebook_is_valid_and_in_sync_with_solutions(path):
    need("nbformat")
    assert nb.check_notebook(path) == []
    assert nb.uncovered_regions(path) == []


def test_whole_check_passes():
    """What `python -m grader.notebooks check` runs: also that each generator reproduces its notebook."""
    need("nbformat")
    assert nb.check() == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_graded_cells_carry_points_and_hidden_tests_stay_in_them(path):
    notebook = read(path)
    graded = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded, "a source notebook without autograded cells"
    for cell in graded:
        meta = cell.metadata["nbgrader"]
        assert meta["points"] > 0 and meta["locked"] and not meta["solution"], meta
    answers = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers and all(nb.NB_BEGIN in c.source for c in answers)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_graded_cells_run_real_checks_for_the_specs_points(path):
    """Each GPU-graded cell grades one group of one exercise: the visible cases it names exist in the
    grader's spec (without a GPU the checks skip before they would notice a typo), its hidden part runs
    the whole group, and its points are the spec's. Every group of every exercise the notebook builds
    is graded exactly once."""
    from grader import spec as specs

    notebook = read(path)
    graded_groups = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        calls = course_calls(cell.source) if cell.cell_type == "code" and not cell.source.startswith("%%") else []
        if not meta.get("grade"):
            assert not calls, f"{cell.id}: course.check/performance outside a graded cell"
            continue
        if not calls:
            continue  # graded on the CPU (a warm-up)
        assert len({(ex, group) for _, ex, group, _ in calls}) == 1, f"{meta['grade_id']}: one group per cell"
        method, exercise, group, _ = calls[0]
        spec = specs.by_exercise(exercise)
        assert meta["points"] == spec.points.get(group), (meta["grade_id"], meta["points"], spec.points)
        if method == "check":
            known = {c.name for c in spec.checks() if c.group == group}
            assert known, f"{meta['grade_id']}: {exercise} has no check group {group!r}"
            for *_, only in calls:
                assert only is None or (only and set(only) <= known), (meta["grade_id"], set(only or []) - known)
            hidden = cell.source.split(nb.NB_HIDDEN_BEGIN, 1)[-1] if nb.NB_HIDDEN_BEGIN in cell.source else ""
            assert any(only is None for *_, only in course_calls(hidden.split(nb.NB_HIDDEN_END)[0])), \
                f"{meta['grade_id']}: its hidden tests do not run the whole group"
        graded_groups.append((exercise, group))
    built = {c.exercise for c in (nb.parse_solution_cell(c.source) for c in notebook.cells if c.cell_type == "code") if c}
    expected = sorted((ex, g) for ex in built for g in specs.by_exercise(ex).points)
    assert sorted(graded_groups) == expected


def test_sync_check_catches_an_edited_region(tmp_path):
    """The one-source-of-truth test is not vacuous: change one line of kernel code and it fails."""
    need("nbformat")
    import nbformat

    path = nb.SOURCE / "unit1_scalar_kernels" / "unit1_scalar_kernels.ipynb"
    notebook = read(path)
    first_line = f"{nb.MAGIC} 01_leaky_relu/leaky_relu.cu leaky_relu_kernel"
    cell = next(c for c in notebook.cells if c.source.splitlines()[0:1] == [first_line])
    assert "const int64_t stride = int64_t(gridDim.x) * blockDim.x;" in cell.source
    cell.source = cell.source.replace("int64_t(gridDim.x) * blockDim.x", "gridDim.x * blockDim.x")
    edited = tmp_path / path.name
    nbformat.write(notebook, edited)
    problems = nb.check_notebook(edited)
    assert len(problems) == 1 and "differs from the region in solutions/01_leaky_relu/leaky_relu.cu" in problems[0]
    assert "gridDim.x * blockDim.x" in problems[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_cells_assemble_into_the_solution(path):
    """Course.build() compiles the exercise folder with the notebook's cells in its regions: in the
    source notebook, that must be the reference solution's code, region by region."""
    need("nbformat")
    course = nb.Course(path.parent.name, seed=1, quiet=True)
    course.record_notebook(path)
    exercises = sorted({ex for ex, _, _ in course.cells})
    assert exercises
    for exercise in exercises:
        folder = course.assemble(exercise)
        for solution in sorted((nb.SOLUTIONS / exercise).iterdir()):
            if solution.suffix not in nb.COMMENT:
                continue
            built = nb.regions_of(folder / solution.name)
            expected = nb.regions_of(solution)
            assert [r.name for r in built] == [r.name for r in expected]
            for b, e in zip(built, expected):
                code = lambda r: [l.strip() for l in r.teaching_lines() if l.strip()]  # noqa: E731
                assert code(b) == code(e), f"{solution.name} {e.name}"


def test_unanswered_cell_keeps_the_student_stub():
    """In the release a cell holds nbgrader's stub: the build keeps the exercise's own stub there,
    which fails loudly ("not implemented yet") instead of failing to compile."""
    course = nb.Course("t", seed=1, quiet=True)
    cell = nb.parse_solution_cell(f"{nb.MAGIC} 01_leaky_relu/leaky_relu.cu leaky_relu_forward_cuda\n"
                                  "// TODO: launch it\n# YOUR CODE HERE\nraise NotImplementedError()\n")
    assert cell.unanswered
    course.record(cell)
    text = (course.assemble("01_leaky_relu") / "leaky_relu.cu").read_text()
    assert 'TORCH_CHECK(false, "leaky_relu_forward_cuda (leaky_relu.cu) is not implemented yet");' in text
    assert "NotImplementedError" not in text


def test_a_misnamed_region_fails_when_its_cell_runs():
    course = nb.Course("t", seed=1, quiet=True)
    with pytest.raises(KeyError, match="leaky_relu_kernel"):
        course.record(nb.parse_solution_cell(f"{nb.MAGIC} 01_leaky_relu/leaky_relu.cu leaky_relu_kernl\nint x;\n"))


def test_heavy_cells_skip_under_validate_and_autograde_needs_a_gpu(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    assert "nbgrader validate" in nb.heavy_skip_reason()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the no-GPU paths are not reachable in this process")
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert "no CUDA GPU" in nb.heavy_skip_reason()
    course = nb.Course("t", seed=1, quiet=True)
    assert course.check("forward", "01_leaky_relu") is None  # skipped, with a printed reason
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(nb.GradingUnavailable, match="no CUDA GPU"):
        course.check("forward", "01_leaky_relu")
    with pytest.raises(nb.GradingUnavailable):
        course.performance("01_leaky_relu")


@pytest.fixture
def inside_repo():
    """Temporary folders inside the repository (a notebook finds the grader above its folder),
    unique to this run: other test runs may share the tree."""
    made = []

    def make(tag: str) -> Path:
        (nb.BUILD_ROOT / "notebooks").mkdir(parents=True, exist_ok=True)
        made.append(Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=nb.BUILD_ROOT / "notebooks")))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


# --- real nbgrader -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def released(tmp_path_factory):
    need("nbgrader", "nbformat")
    root = tmp_path_factory.mktemp("course")
    return root, nb.release(root=root)


def test_generate_assignment_produces_the_release(released):
    root, paths = released
    assert {p.parent.name for p in paths} == set(nb.units())
    assert (root / "gradebook.db").exists()  # nbgrader's own gradebook, in the temporary course only
    assert not list((root / "release").rglob("*.so"))


def test_release_has_no_solution_code_and_no_hidden_tests(released):
    root, paths = released
    for path in paths:
        assert nb.release_leaks(path) == []
        source = read(nb.SOURCE / path.parent.name / path.name)
        release = read(path)
        assert len(source.cells) == len(release.cells)
        for src, rel in zip(source.cells, release.cells):
            meta = src.metadata.get("nbgrader", {})
            if meta.get("solution"):
                assert "raise NotImplementedError()" in rel.source
                assert rel.source.splitlines()[0] == src.source.splitlines()[0]  # the %%solution line stays
                assert all(l in rel.source for l in src.source.splitlines() if "// TODO" in l)  # the task stays
            elif meta.get("grade"):
                assert "HIDDEN TESTS" not in rel.source
                visible = src.source.split("### BEGIN HIDDEN TESTS")[0].rstrip()
                assert rel.source.rstrip() == visible
                assert rel.metadata["nbgrader"]["points"] == meta["points"]
            else:
                assert rel.source == src.source
            assert not rel.get("outputs")


def test_release_sync_check_still_passes(released):
    """The release's `%%solution` cells still name real regions of exercises/."""
    root, paths = released
    for path in paths:
        problems = [p for p in nb.check_notebook(path) if "does not exist" in p or "has no solution region" in p]
        assert problems == []


# --- a real Jupyter kernel ---------------------------------------------------------------------
def execute(path: Path, monkeypatch, allow_errors=False):
    need("nbclient", "nbformat", "ipykernel")
    from nbclient import NotebookClient

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, even on a GPU machine
    monkeypatch.setenv("COURSE_SEED", "1234")
    notebook = read(path)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", allow_errors=allow_errors,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


def outputs_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_source_notebook_runs_on_cpu_and_gpu_cells_skip(path, monkeypatch):
    notebook = execute(path, monkeypatch)  # raises CellExecutionError on any error
    code = [c for c in notebook.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "\n".join(outputs_text(c) for c in code)
    assert "no CUDA GPU on this machine" in text
    for cell in code:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            # nbgrader gives 0 to a graded cell that writes to stderr
            assert not [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"], meta["grade_id"]
            assert not [o for o in cell.outputs if o.output_type == "execute_result"], meta["grade_id"]
    skipped = [c for c in code if "skipped: no CUDA GPU" in outputs_text(c)]
    assert len(skipped) >= 5, "the build, the graded GPU checks and the benchmarks should say they skipped"


def cpu_graded(notebook) -> list[str]:
    """The grade_ids of the graded cells that run on a CPU: those that call none of the course's GPU checks."""
    return [c.metadata["nbgrader"]["grade_id"] for c in notebook.cells
            if c.metadata.get("nbgrader", {}).get("grade") and "course." not in c.source]


@pytest.mark.parametrize("unit", nb.units())
def test_release_notebook_runs_on_cpu_and_fails_the_cpu_graded_cell(unit, released, monkeypatch, inside_repo):
    """The student's copy runs too: the CPU-graded warm-ups fail (no answer yet), the %%solution
    cells say they are not written yet, nothing else errors."""
    root, paths = released
    path = next(p for p in paths if p.parent.name == unit)
    # the temporary course is outside the repository, which the notebook finds above its folder
    inside = inside_repo("release-run") / path.parent.name
    shutil.copytree(path.parent, inside)
    notebook = execute(inside / path.name, monkeypatch, allow_errors=True)
    erring = [c.metadata.get("nbgrader", {}).get("grade_id", c.id) for c in notebook.cells
              if c.cell_type == "code" and any(o.output_type == "error" for o in c.outputs)]
    assert erring == cpu_graded(notebook)
    assert "not written yet" in "".join(outputs_text(c) for c in notebook.cells if c.cell_type == "code")


@pytest.mark.slow
def test_notebook_build_compiles_and_loads_on_cpu():
    """Course.build(): the assembled folder compiles with the grader's build, under a namespace of its
    own, and a CPU tensor reaches the op's own input check."""
    need("nbformat")
    import torch

    path = nb.SOURCE / "unit1_scalar_kernels" / "unit1_scalar_kernels.ipynb"
    course = nb.Course("unit1_scalar_kernels", seed=1, quiet=True)
    course.record_notebook(path)
    module = course.build("01_leaky_relu")
    assert module.lib.namespace.startswith("ex01_leaky_relu_nb_")
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        module.leaky_relu(torch.randn(4), 0.1)


def test_autograde_round_trip_on_cpu(inside_repo):
    """Real nbgrader: release, two submissions (the solution notebook and the untouched release),
    autograde, feedback. Without a GPU the GPU-graded cells earn nothing and say why, the CPU-graded
    warm-up earns its point for the solution only; with one, the solution earns full marks. Hidden
    tests run at autograde but stay out of the feedback."""
    need("nbgrader", "nbformat", "nbclient", "ipykernel")
    import torch
    from nbgrader.api import Gradebook

    unit = "unit1_scalar_kernels"
    # inside the repository, so that the graded notebooks find the grader above their folders
    root = inside_repo("autograde")
    (released,) = nb.release([unit], root=root)
    for student, notebook in (("solution", nb.SOURCE / unit / released.name), ("blank", released)):
        folder = root / "submitted" / student / unit
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / released.name)
    env = {"COURSE_SEED": "7"} | ({} if torch.cuda.is_available() else {"CUDA_VISIBLE_DEVICES": ""})
    nb.run_nbgrader(["autograde", unit, "--force"], root, env=env)
    nb.run_nbgrader(["generate_feedback", unit, "--force"], root, env=env)

    source = read(nb.SOURCE / unit / released.name)
    total = sum(c.metadata["nbgrader"]["points"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade"))
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "cuda-kernels-for-pytorch") as gb:
        solution = gb.find_submission(unit, "solution")
        blank = gb.find_submission(unit, "blank")
        assert solution.max_score == total
        assert blank.score == 0
        if torch.cuda.is_available():
            assert solution.score == total
        else:
            assert solution.score == 1  # the warm-up, graded on the CPU
            warmup = gb.find_grade("warmup-test", released.stem, unit, "solution")
            forward = gb.find_grade("forward", released.stem, unit, "solution")
            assert warmup.score == 1 and forward.score == 0
    graded = read(root / "autograded" / "solution" / unit / released.name)
    forward_cell = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "forward")
    assert "BEGIN HIDDEN TESTS" in forward_cell.source  # autograde restored the hidden tests
    if not torch.cuda.is_available():
        assert "cannot be graded here" in str(forward_cell.outputs)
    html = (root / "feedback" / "solution" / unit / released.with_suffix(".html").name).read_text()
    assert "blocks_needed(2**31 + 7, 256)" not in html and "HIDDEN TESTS" not in html


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_grader_name_a_cell_imports_exists(path):
    """GPU cells never run on the CPU, so an import of a grader helper that was renamed or removed
    would first fail in front of a student: check every `from grader... import name` here."""
    import importlib

    for cell in read(path).cells:
        if cell.cell_type != "code" or cell.source.lstrip().startswith("%%"):  # %%: a C++/CUDA cell
            continue
        source = "\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "grader":
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{path.name}: {node.module} has no {alias.name}"
