"""The nbgrader notebooks: valid, in sync with solutions/, released by real nbgrader without solutions
or hidden tests, and runnable end to end on a CPU (their GPU cells skip and say why); on a GPU,
autograded by real nbgrader: the solutions earn every point, the releases none.

Generic over units: the notebook of every notebooks/source/<unit>.py is generated (jupytext and the
filling step, into a temporary folder) and checked, and the committed student release,
notebooks/release/, must be what nbgrader makes of them. Tests that need nbgrader, jupytext or nbclient
skip, with the reason, where those are not installed (the GPU machine may lack them).
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from grader.authoring import notebook_authoring, notebook_prebuild, notebook_release
from grader.authoring import notebooks as nb
from grader.authoring import regions
from tests.grading import grader_import_graph, pythonpath_outside_the_checkout

UNITS = notebook_authoring.units()


def need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not importable here (pip install -e '.[notebooks]')")


def read(path: Path):
    need("nbformat")
    import nbformat

    return nbformat.read(path, as_version=4)


@pytest.fixture(scope="module")
def sources(inside_repo) -> dict[str, Path]:
    """unit -> the instructor's notebook generated from notebooks/source/<unit>.py, in a folder inside
    the repository (the notebook finds the grader above it), never in notebooks/ (other test runs may
    share the tree)."""
    need("nbformat", "jupytext")
    return {p.parent.name: p for p in notebook_authoring.write(root=inside_repo("source"))}


@pytest.fixture(params=UNITS)
def path(request, sources) -> Path:
    """Each unit's instructor notebook in turn."""
    return sources[request.param]


def test_there_are_source_notebooks(sources):
    assert "unit1_scalar_kernels" in UNITS
    assert sorted(sources) == UNITS == notebook_release.units()
    assert sorted(p.parent.name for p in notebook_release.RELEASE.glob("*/*.ipynb")) == UNITS, \
        "every unit's student notebook is committed under notebooks/release/ (make notebooks)"


NOTEBOOK_MODULES = ("authoring.regions", "authoring.notebooks", "authoring.notebook_authoring",
                    "authoring.notebook_release", "authoring.notebook_prebuild", "classroom.nbgrader_feedback",
                    "authoring.stubs")


def test_notebook_modules_build_on_the_runtime_without_a_cycle():
    """One job per module: grader/authoring/notebooks.py is the runtime the notebooks import and needs only the
    region parser; authoring, release, prebuild and feedback build on it, and no import goes round."""
    whole = grader_import_graph()
    graph = {m: whole[m] & set(NOTEBOOK_MODULES) for m in NOTEBOOK_MODULES}
    assert graph["authoring.regions"] == set() and graph["authoring.notebooks"] == {"authoring.regions"}

    def reach(start: str, seen: set[str]) -> set[str]:
        for m in graph[start] - seen:
            seen.add(m)
            reach(m, seen)
        return seen

    assert [m for m in graph if m in reach(m, set())] == []


def test_source_notebook_is_valid_and_in_sync_with_solutions(path):
    need("nbformat")
    assert notebook_release.check_notebook(path) == []
    assert notebook_release.uncovered_regions(path) == []


def test_generation_is_deterministic(sources):
    """Two runs of jupytext and the filling step write the same bytes (the release is committed)."""
    again = notebook_authoring.notebooks()
    for unit, path in sources.items():
        assert notebook_authoring.dumps(again[unit]) == path.read_text(), unit


def test_filling_names_every_cell_and_refuses_what_it_cannot_fill():
    """A cell is named by id= or its grade_id; a %%solution cell gets its region from solutions/ and
    may hold nothing else; an unknown directive is an error, not text for the students."""
    need("nbformat")
    import nbformat

    def notebook(*cells):
        return nbformat.v4.new_notebook(cells=list(cells))

    solution = nbformat.v4.new_code_cell(f"{nb.MAGIC} 01_leaky_relu/leaky_relu.cu leaky_relu_kernel",
                                         metadata={"nbgrader": {"grade_id": "kernel", "solution": True}})
    context = nbformat.v4.new_markdown_cell("Given:\n\n@@context 01_leaky_relu/leaky_relu.cu leaky_relu_kernel@@",
                                            metadata={"id": "given"})
    setup = nbformat.v4.new_code_cell(notebook_authoring.SETUP_DIRECTIVE, metadata={"id": "setup"})
    colab = nbformat.v4.new_markdown_cell(notebook_authoring.COLAB_DIRECTIVE, metadata={"id": "colab"})
    filled = notebook(solution, context, setup, colab)
    notebook_authoring.fill(filled, "unit9_test")
    assert [c.id for c in filled.cells] == ["kernel", "given", "setup", "colab"]
    assert notebook_authoring.clone_url() in filled.cells[2].source
    assert filled.cells[3].source.startswith(notebook_authoring.colab_badge("unit9_test"))
    assert "/notebooks/release/unit9_test/unit9_test.ipynb)" in filled.cells[3].source
    assert "id" not in filled.cells[1].metadata
    region = regions.find_region(nb.SOLUTIONS / "01_leaky_relu" / "leaky_relu.cu", "leaky_relu_kernel")
    assert filled.cells[0].source.splitlines()[1:] == [*region.teaching_lines()[:len(region.todo)], f"### {nb.NB_BEGIN}",
                                                      *region.teaching_lines()[len(region.todo):], f"### {nb.NB_END}"]
    assert filled.cells[1].source.startswith("Given:\n\n```cpp\n") and "your code (the cell below)" in filled.cells[1].source
    assert 'nb.Course("unit9_test")' in filled.cells[2].source

    with pytest.raises(notebook_authoring.AuthoringError, match="no name"):
        notebook_authoring.fill(notebook(nbformat.v4.new_markdown_cell("text")), "unit9_test")
    with_body = nbformat.v4.new_code_cell(solution.source + "\nint x;", metadata={"id": "x"})
    with pytest.raises(notebook_authoring.AuthoringError, match="first line only"):
        notebook_authoring.fill(notebook(with_body), "unit9_test")
    typo = nbformat.v4.new_markdown_cell("@@contxt 01_leaky_relu/leaky_relu.cu leaky_relu_kernel@@", metadata={"id": "x"})
    with pytest.raises(notebook_authoring.AuthoringError, match="directive"):
        notebook_authoring.fill(notebook(typo), "unit9_test")
    missing = nbformat.v4.new_markdown_cell("@@context 01_leaky_relu/leaky_relu.cu no_such_function@@",
                                            metadata={"id": "x"})
    with pytest.raises(notebook_authoring.AuthoringError, match="no_such_function"):
        notebook_authoring.fill(notebook(missing), "unit9_test")


def test_whole_check_passes():
    """What `python -m grader.authoring.notebook_release check` runs (and `make notebooks` first)."""
    need("nbformat")
    assert notebook_release.check() == []


def test_graded_cells_carry_points_and_hidden_tests_stay_in_them(path):
    notebook = read(path)
    graded = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded, "a source notebook without autograded cells"
    for cell in graded:
        meta = cell.metadata["nbgrader"]
        assert meta["points"] > 0 and meta["locked"] and not meta["solution"], meta
    answers = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers and all(nb.NB_BEGIN in c.source for c in answers)


def graded_calls(source: str) -> list[notebook_prebuild.CourseCall]:
    """The course.check / course.performance calls of a cell (the calls that award points)."""
    return [c for c in notebook_prebuild.course_calls(source) if c.method in ("check", "performance")]


def test_graded_cells_run_real_checks_for_the_specs_points(path):
    """Each GPU-graded cell grades one group of one exercise: the visible cases it names exist in the
    grader's spec (without a GPU the checks skip before they would notice a typo), its hidden part runs
    the whole group, and its points are the spec's. Every group of every exercise the notebook builds
    is graded exactly once."""
    from grader import specs

    notebook = read(path)
    graded_groups = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        calls = graded_calls(cell.source) if cell.cell_type == "code" and not cell.source.startswith("%%") else []
        if not meta.get("grade"):
            assert not calls, f"{cell.id}: course.check/performance outside a graded cell"
            continue
        if not calls:
            continue  # graded on the CPU (a warm-up)
        assert len({(c.exercise, c.group) for c in calls}) == 1, f"{meta['grade_id']}: one group per cell"
        method, exercise, group = calls[0].method, calls[0].exercise, calls[0].group or "performance"
        spec = specs.by_exercise(exercise)
        assert meta["points"] == spec.points.get(group), (meta["grade_id"], meta["points"], spec.points)
        if method == "check":
            known = {c.name for c in spec.checks() if c.group == group}
            assert known, f"{meta['grade_id']}: {exercise} has no check group {group!r}"
            for call in calls:
                assert call.only is None or (call.only and set(call.only) <= known), \
                    (meta["grade_id"], set(call.only or []) - known)
            hidden = cell.source.split(nb.NB_HIDDEN_BEGIN, 1)[-1] if nb.NB_HIDDEN_BEGIN in cell.source else ""
            assert any(c.only is None for c in graded_calls(hidden.split(nb.NB_HIDDEN_END)[0])), \
                f"{meta['grade_id']}: its hidden tests do not run the whole group"
        graded_groups.append((exercise, group))
    built = {c.exercise for c in (nb.parse_solution_cell(c.source) for c in notebook.cells if c.cell_type == "code") if c}
    expected = sorted((ex, g) for ex in built for g in specs.by_exercise(ex).points)
    assert sorted(graded_groups) == expected


def test_a_graded_cell_comes_after_every_cell_its_grade_depends_on(path):
    """A notebook runs top to bottom, and a graded cell builds the exercise from the solution cells run so
    far (the rest stay the student's stubs). So each graded cell comes after the cells of every kernel
    its group runs (the spec's versions_graded: 06's implicit_gemm runs the depthwise kernel where
    groups == in_channels), after the graded cells of the groups it waits for (spec.requires) and, for
    speed, after those of perf_requires: else the solution notebook itself loses points."""
    from grader import specs

    notebook = read(path)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    solutions = [nb.parse_solution_cell(cell.source) for cell in code]
    taught = {(c.exercise, c.name.split("#")[0]) for c in solutions if c}
    graded_cells = [cell for cell, sol in zip(code, solutions)
                    if sol is None and cell.metadata.get("nbgrader", {}).get("grade")]
    graded_anywhere = {(c.exercise, c.group or "performance") for cell in graded_cells for c in graded_calls(cell.source)}
    seen_functions: set[tuple[str, str]] = set()
    graded_before: set[tuple[str, str]] = set()
    problems = []
    for cell, solution in zip(code, solutions):
        if solution is not None:
            seen_functions.add((solution.exercise, solution.name.split("#")[0]))
            continue
        if not cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        for call in graded_calls(cell.source):
            spec = specs.by_exercise(call.exercise)
            group = call.group or "performance"
            if group == "performance":
                needed = list(spec.perf_requires)
            else:
                needed = [n for n in spec.requires.get(group, ()) if n in spec.points]
                for graded_group, _, kernels in getattr(spec, "versions_graded", ()):
                    for kernel in ((kernels,) if isinstance(kernels, str) else kernels) if graded_group == group else ():
                        if (call.exercise, kernel) in taught and (call.exercise, kernel) not in seen_functions:
                            problems.append(f"{call.exercise} {group}: graded before the cells of {kernel}")
            problems += [f"{call.exercise} {group}: graded before {n}" for n in needed
                         if (call.exercise, n) in graded_anywhere and (call.exercise, n) not in graded_before]
            graded_before.add((call.exercise, group))
    assert not problems, sorted(set(problems))


def test_graded_cells_on_a_partly_written_exercise_check_one_numbered_version(path):
    """A graded cell builds the `%%solution` cells above it: one that checks its exercise before all of
    that exercise's cells are written runs on the student copy's stubs ("not implemented yet") in the
    rest. Only a group that calls one numbered version of the op (the spec's versions_graded) may do
    that; input checks, registration (opcheck calls every version) and speed wait for the whole exercise."""
    from grader import specs

    cells = read(path).cells
    last_answer = {}
    for i, cell in enumerate(cells):
        parsed = nb.parse_solution_cell(cell.source) if cell.cell_type == "code" else None
        if parsed:
            last_answer[parsed.exercise] = i
    for i, cell in enumerate(cells):
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        for call in graded_calls(cell.source):
            if i < last_answer.get(call.exercise, -1):
                spec = specs.by_exercise(call.exercise)
                alone = {g for g, version, _ in getattr(spec, "versions_graded", ()) if version is not None}
                what = f"{call.exercise} {call.group or 'performance'}"
                assert call.method == "check" and call.group in alone, \
                    f"{grade_id(cell)} checks {what} before all of its exercise's cells are written"


def test_sync_check_catches_an_edited_region(tmp_path, sources):
    """The one-source-of-truth test is not vacuous: change one line of kernel code and it fails."""
    need("nbformat")
    import nbformat

    path = sources["unit1_scalar_kernels"]
    notebook = read(path)
    first_line = f"{nb.MAGIC} 01_leaky_relu/leaky_relu.cu leaky_relu_kernel"
    cell = next(c for c in notebook.cells if c.source.splitlines()[0:1] == [first_line])
    assert "const int64_t stride = int64_t(gridDim.x) * blockDim.x;" in cell.source
    cell.source = cell.source.replace("int64_t(gridDim.x) * blockDim.x", "gridDim.x * blockDim.x")
    edited = tmp_path / path.name
    nbformat.write(notebook, edited)
    problems = notebook_release.check_notebook(edited)
    assert len(problems) == 1 and "differs from the region in solutions/01_leaky_relu/leaky_relu.cu" in problems[0]
    assert "gridDim.x * blockDim.x" in problems[0]


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
            if solution.suffix not in regions.COMMENT:
                continue
            built = regions.regions_of(folder / solution.name)
            expected = regions.regions_of(solution)
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
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    assert "no CUDA GPU" in nb.heavy_skip_reason() and "Colab" not in nb.heavy_skip_reason()
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_test")
    assert "in Colab: Runtime > Change runtime type > T4 GPU" in nb.heavy_skip_reason()
    monkeypatch.delenv("COLAB_RELEASE_TAG")
    course = nb.Course("t", seed=1, quiet=True)
    assert course.check("forward", "01_leaky_relu") is None  # skipped, with a printed reason
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(nb.GradingUnavailable, match="no CUDA GPU"):
        course.check("forward", "01_leaky_relu")
    with pytest.raises(nb.GradingUnavailable):
        course.performance("01_leaky_relu")


def test_prebuild_plans_every_state_a_notebook_builds(sources):
    """Unit 2 checks kernel 1 of 05 before kernels 2 to 6 are written: running it builds 05 once per
    state, and its speed cells load the reference solutions. `prebuild` must build all of them."""
    folders = notebook_prebuild.builds_of(sources["unit2_2d_grids"])
    states = [f for f in folders if f.name == "05_matmul" and f.parent.parent == nb.BUILD_ROOT / "notebooks"]
    assert len(states) == 7, folders  # kernel 5's cells add one, kernel 6's another
    assert {nb.SOLUTIONS / ex for ex in ("03_transpose", "04_stencil2d", "05_matmul")} <= set(folders)
    kernel_files = sorted(p.name for p in (nb.SOLUTIONS / "05_matmul").glob("*.cu"))

    def code(folder):
        return [[l.strip() for l in r.teaching_lines() if l.strip()]
                for name in kernel_files for r in regions.regions_of(folder / name)]

    assert code(states[-1]) == code(nb.SOLUTIONS / "05_matmul")  # all written by then
    assert code(states[0]) != code(nb.SOLUTIONS / "05_matmul")


def test_prebuild_plans_the_student_copy_for_an_unanswered_release(released):
    _, paths = released
    path = next(p for p in paths if p.parent.name == "unit3_convolution")
    built = [f for f in notebook_prebuild.builds_of(path) if f.parent.parent == nb.BUILD_ROOT / "notebooks"]
    assert sorted(f.name for f in built) == ["06_conv2d", "07_conv_transpose2d"]  # one state each: nothing answered
    for folder in built:
        for f in (nb.EXERCISES / folder.name).iterdir():
            if f.is_file() and f.suffix in regions.COMMENT:
                assert (folder / f.name).read_text() == f.read_text(), f


@pytest.fixture(scope="module")
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
    return root, notebook_release.release(root=root)


def test_generate_assignment_produces_the_release(released):
    root, paths = released
    assert {p.parent.name for p in paths} == set(notebook_release.units())
    assert (root / "gradebook.db").exists()  # nbgrader's own gradebook, in the temporary course only
    assert not list((root / "release").rglob("*.so"))


def test_committed_release_is_what_nbgrader_makes(released):
    """notebooks/release/ (committed, so that a student notebook opens in Colab from GitHub) is, byte
    for byte, what nbgrader releases from notebooks/source/ now: `make notebooks` after any change."""
    root, _ = released
    assert notebook_release.release_differences(root / "release") == []


def test_release_has_no_solution_code_and_no_hidden_tests(released):
    root, paths = released
    for path in paths:
        assert notebook_release.release_leaks(path) == []
        source = read(root / "source" / path.parent.name / path.name)
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
        problems = [p for p in notebook_release.check_notebook(path) if "does not exist" in p or "has no solution region" in p]
        assert problems == []


# --- a real Jupyter kernel ---------------------------------------------------------------------
def execute(path: Path, monkeypatch, allow_errors=False, mode="", gpu=False, timeout=600):
    """Run a notebook in a real Jupyter kernel, in its folder; `mode`: nbgrader's NBGRADER_EXECUTION
    ("validate", "autograde", or "" as a person runs it); without `gpu`, CUDA hides any GPU."""
    need("nbclient", "nbformat", "ipykernel")
    from nbclient import NotebookClient

    if mode:
        monkeypatch.setenv("NBGRADER_EXECUTION", mode)
    else:
        monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    if not gpu:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, even on a GPU machine
    monkeypatch.setenv("COURSE_SEED", "1234")
    notebook = read(path)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=allow_errors,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


def outputs_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


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


@pytest.mark.parametrize("unit", notebook_release.units())
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


def test_notebook_build_compiles_and_loads_on_cpu(sources):
    """Course.build(): the assembled folder compiles with the grader's build, under a namespace of its
    own, and a CPU tensor reaches the op's own input check."""
    need("nbformat")
    import torch

    path = sources["unit1_scalar_kernels"]
    course = nb.Course("unit1_scalar_kernels", seed=1, quiet=True)
    course.record_notebook(path)
    module = course.build("01_leaky_relu")
    assert module.lib.namespace.startswith("ex01_leaky_relu_nb_")
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        module.leaky_relu(torch.randn(4), 0.1)


# --- nbgrader autograde: one course directory, helpers shared by the CPU and GPU round trips -----------
COURSE_ID = "cuda-kernels-for-pytorch"  # nbgrader_config.py's


def submit(root: Path, unit: str, student: str, notebook: Path) -> None:
    folder = root / "submitted" / student / unit
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, folder / f"{unit}.ipynb")


def autograde(root: Path, unit: str, env: dict[str, str]) -> None:
    """Real nbgrader: autograde every submission of `unit`, then write its feedback."""
    notebook_release.run_nbgrader(["autograde", unit, "--force"], root, env=env)
    notebook_release.run_nbgrader(["generate_feedback", unit, "--force"], root, env=env)


def cell_grades(root: Path, unit: str, student: str) -> dict[str, tuple[float, float]]:
    """grade_id -> (score, max score) of one student's autograded notebook, from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gb:
        (notebook,) = gb.find_submission(unit, student).notebooks
        return {g.name: (g.score, g.max_score) for g in notebook.grades}


def autograded(root: Path, unit: str, student: str):
    return read(root / "autograded" / student / unit / f"{unit}.ipynb")


def feedback(root: Path, unit: str, student: str) -> str:
    return (root / "feedback" / student / unit / f"{unit}.html").read_text()


def cell_outputs(cell, limit: int = 3000) -> str:
    """What a cell printed and raised, as a person reading the notebook would see it."""
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(f"[{o.name}] {o.text}")
        elif o.output_type == "error":
            parts.append(f"[error] {o.ename}: {o.evalue}")
    return _ANSI.sub("", "".join(parts))[-limit:]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def grade_id(cell) -> str:
    """nbgrader's name for a cell, else its id."""
    return cell.metadata.get("nbgrader", {}).get("grade_id", cell.get("id"))


def explain(root: Path, unit: str, student: str, grade_ids) -> str:
    cells = {grade_id(c): c for c in autograded(root, unit, student).cells}
    return "\n".join(f"--- {gid}:\n{cell_outputs(cells[gid])}" for gid in grade_ids if gid in cells)


def source_points(root: Path, unit: str) -> int:
    source = read(root / "source" / unit / f"{unit}.ipynb")
    return sum(c.metadata["nbgrader"]["points"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade"))


def test_autograde_round_trip_on_cpu(inside_repo):
    """Real nbgrader: release, two submissions (the solution notebook and the untouched release),
    autograde, feedback, with CUDA hiding any GPU. The GPU-graded cells earn nothing and say why, the
    CPU-graded warm-up earns its point for the solution only. Hidden tests run at autograde but stay
    out of the feedback. (test_autograde_on_gpu is the same round trip, on a GPU, for every unit.)"""
    need("nbgrader", "nbformat", "nbclient", "ipykernel")
    unit = "unit1_scalar_kernels"
    # inside the repository, so that the graded notebooks find the grader above their folders
    root = inside_repo("autograde")
    (released,) = notebook_release.release([unit], root=root)
    submit(root, unit, "solution", root / "source" / unit / released.name)  # the instructor's notebook
    submit(root, unit, "blank", released)
    autograde(root, unit, {"COURSE_SEED": "7", "CUDA_VISIBLE_DEVICES": ""})

    solution, blank = cell_grades(root, unit, "solution"), cell_grades(root, unit, "blank")
    assert sum(m for _, m in solution.values()) == source_points(root, unit)
    assert sum(s for s, _ in blank.values()) == 0
    assert sum(s for s, _ in solution.values()) == 1  # the warm-up, graded on the CPU
    assert solution["warmup-test"] == (1, 1) and solution["forward"][0] == 0
    forward_cell = next(c for c in autograded(root, unit, "solution").cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "forward")
    assert "BEGIN HIDDEN TESTS" in forward_cell.source  # autograde restored the hidden tests
    assert "cannot be graded here" in str(forward_cell.outputs)
    html = feedback(root, unit, "solution")
    assert "blocks_needed(2**31 + 7, 256)" not in html and "HIDDEN TESTS" not in html


@pytest.fixture(scope="module")
def gpu_course(request, inside_repo):
    """A course directory with the units under test released and two submissions per unit, the
    solution notebook and the untouched release, and every build their autograde will ask for made
    first, in parallel (`python -m grader.authoring.notebook_prebuild`): the cells then find their builds cached.
    Only the units whose test was selected (`-k unit1`) are prepared."""
    need("nbgrader", "nbformat", "nbclient", "ipykernel")
    units = sorted({item.callspec.params["unit"] for item in request.session.items
                    if getattr(item, "originalname", "") == "test_autograde_on_gpu"})
    root = inside_repo("autograde-gpu")
    released = notebook_release.release(units, root=root)
    for path in released:
        unit = path.parent.name
        submit(root, unit, "solution", root / "source" / unit / path.name)
        submit(root, unit, "blank", path)
    start = time.perf_counter()
    results = notebook_prebuild.prebuild(sorted((root / "submitted").glob("*/*/*.ipynb")))
    failed = {str(d): r.get("error", "")[-2000:] for d, r in results.items() if not r["ok"]}
    assert not failed, failed
    print(f"prebuilt {len(results)} exercise folders in {time.perf_counter() - start:.0f} s")
    return root


def keep_artifacts(root: Path, unit: str) -> None:
    """With COURSE_TEST_ARTIFACTS=DIR, keep each student's feedback HTML and a text digest of every
    cell's output there (to read what the students would get)."""
    out = os.environ.get("COURSE_TEST_ARTIFACTS")
    if not out:
        return
    Path(out).mkdir(parents=True, exist_ok=True)
    for student in ("solution", "blank"):
        shutil.copy(root / "feedback" / student / unit / f"{unit}.html", Path(out) / f"{unit}-{student}.html")
        digest = []
        for cell in autograded(root, unit, student).cells:
            if cell.cell_type == "code" and cell.get("outputs"):
                digest.append(f"--- {grade_id(cell)}\n{cell_outputs(cell, limit=4000)}")
        (Path(out) / f"{unit}-{student}.txt").write_text("\n".join(digest))


@pytest.mark.gpu
@pytest.mark.parametrize("unit", notebook_release.units())
def test_autograde_on_gpu(unit, gpu_course):
    """Real nbgrader autograde on a GPU: the solution notebook earns every point of every graded cell
    (checks and speed, timed against the reference in the same run) and runs every other cell (builds,
    load_inline, plots) without an error; the untouched release earns nothing, each graded cell saying
    why. The feedback shows the checks' results and no hidden tests."""
    root = gpu_course
    start = time.perf_counter()
    autograde(root, unit, {"COURSE_SEED": "7"})
    print(f"{unit}: autograde of two notebooks and their feedback in {time.perf_counter() - start:.0f} s")
    keep_artifacts(root, unit)

    solution, blank = cell_grades(root, unit, "solution"), cell_grades(root, unit, "blank")
    assert sum(m for _, m in solution.values()) == source_points(root, unit)
    lost = [gid for gid, (score, points) in solution.items() if score != points]
    assert not lost, f"the solution lost points in {lost}:\n" + explain(root, unit, "solution", lost)
    erring = [grade_id(c) for c in autograded(root, unit, "solution").cells
              if c.cell_type == "code" and any(o.output_type == "error" for o in c.get("outputs", []))]
    assert not erring, "cells of the solution raised:\n" + explain(root, unit, "solution", erring)
    earned = [gid for gid, (score, _) in blank.items() if score]
    assert not earned, f"the release earned points in {earned}:\n" + explain(root, unit, "blank", earned)

    html = feedback(root, unit, "solution")
    assert "HIDDEN TESTS" not in html and "\x1b[" not in html
    assert "passed (seed 7" in html and "Traceback (most recent call last)" not in html
    blank_html = feedback(root, unit, "blank")
    assert "HIDDEN TESTS" not in blank_html
    assert "not implemented yet" in blank_html  # the release's graded cells say why they earn nothing


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
                    assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), \
                        f"{path.name}: {node.module} has no {alias.name}"


def exercise_api(exercise: str) -> dict[str, inspect.Signature | None]:
    """The public functions, classes and methods of an exercise's Python module (read from
    solutions/, not imported: importing needs a build), with their signatures."""
    from grader import specs

    def signature(fn: ast.FunctionDef, bound: bool) -> inspect.Signature:
        args = copy.deepcopy(fn.args)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                a.annotation = None
        args.defaults = [ast.Constant(None) for _ in args.defaults]
        args.kw_defaults = [None if d is None else ast.Constant(None) for d in args.kw_defaults]
        scope: dict = {}
        exec(f"def f({ast.unparse(args)}): pass", scope)
        sig = inspect.signature(scope["f"])
        return sig.replace(parameters=list(sig.parameters.values())[1:]) if bound else sig

    tree = ast.parse((nb.SOLUTIONS / exercise / specs.by_exercise(exercise).module).read_text())
    api: dict[str, inspect.Signature | None] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            api[node.name] = signature(node, bound=False)
        elif isinstance(node, ast.ClassDef):
            api[node.name] = None  # the constructor's signature, if the class defines one
            for item in node.body:
                if not isinstance(item, ast.FunctionDef):
                    continue
                static = any(ast.unparse(d) == "staticmethod" for d in item.decorator_list)
                if item.name == "__init__":
                    api[node.name] = signature(item, bound=True)
                elif not item.name.startswith("_"):
                    api[f"{node.name}.{item.name}"] = signature(item, bound=not static)
    return api


def test_gpu_cells_call_what_the_exercise_modules_define(path):
    """The GPU cells never run on the CPU: check here that every call they make on a built module
    (`ext = course.build("NN_name")`, or the module a throughput sweep passes its `call`) names a
    function, class or method of that exercise's Python module, with arguments its signature accepts."""
    built: dict[str, str] = {}  # variable -> exercise, in the notebook's order (cells share variables)
    checked = 0
    for cell in read(path).cells:
        if cell.cell_type != "code" or cell.source.lstrip().startswith("%"):
            continue
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                calls = notebook_prebuild.course_calls(ast.unparse(node.value))
                if calls and calls[0].method == "build":
                    built.update({t.id: calls[0].exercise for t in node.targets if isinstance(t, ast.Name)})
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "course.throughput_sweep":
                (sweep,) = notebook_prebuild.course_calls(ast.unparse(node))
                for kw in node.keywords:
                    if kw.arg == "call" and isinstance(kw.value, ast.Lambda):
                        built[kw.value.args.args[0].arg] = sweep.exercise
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            chain, root = [node.func.attr], node.func.value
            while isinstance(root, ast.Attribute):
                chain.insert(0, root.attr)
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in built) or len(chain) > 2:
                continue
            api, name = exercise_api(built[root.id]), ".".join(chain)
            where = f"{path.name}, cell {cell.get('id')}: {ast.unparse(node)}"
            assert name in api, f"{where}: {built[root.id]} has no {name} (it has {sorted(api)})"
            if api[name] is not None and not any(isinstance(a, ast.Starred) for a in node.args):
                try:
                    api[name].bind(*node.args, **{k.arg: k.value for k in node.keywords if k.arg})
                except TypeError as e:
                    raise AssertionError(f"{where}: {e} (signature {name}{api[name]})") from None
            checked += 1
    assert checked, "no call on a built module found: is the notebook's build cell still there?"


# --- outside the repository: Colab, or a notebook downloaded alone ---------------------------------
def test_colab_badges_and_the_clone_url_come_from_github_repo(monkeypatch):
    """GITHUB_REPO (from pyproject.toml's [tool.course] repo) is the one place the repository is named: each unit's
    first cell is its Colab badge, its setup cell clones from there, and README.md's badges are what
    `make notebooks` writes."""
    need("nbformat", "jupytext")
    for unit in UNITS:
        notebook = read(notebook_release.RELEASE / unit / f"{unit}.ipynb")
        assert notebook.cells[0].cell_type == "markdown"
        assert notebook_authoring.colab_badge(unit) in notebook.cells[0].source
        assert notebook_authoring.colab_url(unit).startswith(
            f"https://colab.research.google.com/github/{notebook_authoring.GITHUB_REPO}/blob/")
        setup = next(c for c in notebook.cells if grade_id(c) == "setup")
        assert notebook_authoring.clone_url() in setup.source
        assert notebook_authoring.colab_badge(unit) in notebook_release.README.read_text()
    assert notebook_release.readme_differences() == []
    monkeypatch.setattr(notebook_authoring, "GITHUB_REPO", "a-fork/cuda-course")  # a fork that forgot make notebooks
    assert notebook_release.readme_differences() != []


def test_course_repo_reaches_every_badge_and_the_setup_cell(tmp_path, monkeypatch, capsys):
    """`make notebooks COURSE_REPO=<url>` (`release --repo`): every released notebook's badge and setup
    cell, and README.md's badges, name that repository and nothing names the placeholder; the
    repository is recorded in pyproject.toml's [tool.course], where the next release reads it."""
    need("nbgrader", "nbformat", "jupytext")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "a-course"\n\n[tool.course]\ntemplate = true\n')
    monkeypatch.setattr(notebook_authoring, "PYPROJECT", pyproject)
    monkeypatch.setattr(notebook_authoring, "GITHUB_REPO", notebook_authoring.GITHUB_REPO)  # main() sets it
    root = tmp_path / "course"
    # the first and the last unit (each released alone by the same code; README's block names every unit)
    units = [UNITS[0], UNITS[-1]]
    assert notebook_release.main(["release", *units, "--repo", "https://github.com/a-fork/my-course.git",
                                  "--root", str(root)]) == 0
    assert 'recorded repo = "a-fork/my-course"' in capsys.readouterr().out
    assert notebook_authoring.course_config(pyproject) == {"template": True, "repo": "a-fork/my-course"}
    assert notebook_release.release_repository(pyproject=pyproject) == "a-fork/my-course"
    released = sorted((root / "release").rglob("*.ipynb"))
    assert {p.parent.name for p in released} == set(units)
    for path in released:
        unit, notebook = path.parent.name, read(path)
        url = f"https://colab.research.google.com/github/a-fork/my-course/blob/main/notebooks/release/{unit}/{unit}.ipynb"
        assert url in notebook.cells[0].source
        setup = next(c for c in notebook.cells if grade_id(c) == "setup")
        assert '"https://github.com/a-fork/my-course.git"' in setup.source
        assert 'ROOT = Path.cwd() / "my-course"' in setup.source
        assert not [i for i, c in enumerate(notebook.cells) if notebook_authoring.PLACEHOLDER_REPO in c.source]
    readme = notebook_authoring.with_readme_block(notebook_release.README.read_text())
    block = readme.split(notebook_authoring.README_BEGIN)[1].split(notebook_authoring.README_END)[0]
    assert block.count("colab.research.google.com/github/a-fork/my-course/blob/main/") == len(UNITS)
    assert notebook_authoring.PLACEHOLDER_REPO not in block


def test_release_refuses_the_placeholder_unless_the_repository_is_a_template(tmp_path, monkeypatch, capsys):
    """Without a repository, a release would send every student to OWNER/cuda-course: refused in one
    line naming the setting, before anything is written; a template repository ([tool.course]
    template = true, as this one) releases with the placeholder; a COURSE_REPO that is not GitHub's is
    refused in one line too."""
    pyproject = tmp_path / "pyproject.toml"
    monkeypatch.setattr(notebook_authoring, "PYPROJECT", pyproject)
    monkeypatch.setattr(notebook_authoring, "GITHUB_REPO", notebook_authoring.GITHUB_REPO)
    root = tmp_path / "course"
    for text in ('[project]\nname = "a-course"\n', '[tool.course]\ntemplate = false\n',
                 f'[tool.course]\nrepo = "{notebook_authoring.PLACEHOLDER_REPO}"\n'):
        pyproject.write_text(text)
        assert notebook_release.main(["release", "--root", str(root)]) == 1
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and notebook_authoring.PLACEHOLDER_REPO in out
        assert "COURSE_REPO=" in out and "[tool.course] repo" in out
        assert not root.exists()
    assert notebook_release.main(["release", "--repo", "https://gitlab.com/me/course", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "not a GitHub repository" in out and not root.exists()

    pyproject.write_text('[tool.course]  \ntemplate = true  # the template courses are made from\n')
    assert notebook_release.release_repository() == notebook_authoring.PLACEHOLDER_REPO
    assert notebook_release.release_repository("me/course") == "me/course"
    # this repository is that template, so that CI and `make exercises` release here
    assert notebook_authoring.course_config(Path(nb.REPO) / "pyproject.toml").get("template") is True


@pytest.mark.parametrize("url", ["me/course", "https://github.com/me/course", "https://github.com/me/course.git",
                                 "https://github.com/me/course/", "git@github.com:me/course.git"])
def test_course_repo_accepts_githubs_spellings_and_records_one_line(url, tmp_path):
    assert notebook_authoring.github_repo(url) == "me/course"
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    assert notebook_release.record_repository("me/course", pyproject)
    assert notebook_authoring.course_config(pyproject) == {"repo": "me/course"}
    pyproject.write_text('[tool.course]\ntemplate = true\nrepo = "old/one"\n\n[tool.ruff]\nline-length = 1\n')
    assert notebook_release.record_repository("me/course", pyproject)
    assert pyproject.read_text() == '[tool.course]\ntemplate = true\nrepo = "me/course"\n\n[tool.ruff]\nline-length = 1\n'
    assert not notebook_release.record_repository("me/course", pyproject)


def test_setup_cell_installs_the_dependencies_less_torch():
    """What the setup cell installs where it is missing (outside the repository): pyproject.toml's
    dependencies, torch excepted (Colab's own build of torch must stay)."""
    pyproject = (Path(nb.REPO) / "pyproject.toml").read_text()  # tomllib is Python 3.11+
    deps = re.findall(r'"([^"]+)"', re.search(r"^dependencies = \[(.*?)\]", pyproject, re.M | re.S).group(1))
    names = [re.split(r"[<>=!~ \[]", d)[0] for d in deps]
    assert sorted(notebook_authoring.RUNTIME_PACKAGES) == sorted(n for n in names if n != "torch")


def test_setup_cell_finds_the_course_or_clones_it(tmp_path):
    """The setup cell's first part (before it imports the grader), run by this Python in a folder:
    inside the repository it finds it and prints nothing; outside, it reuses a clone already there
    (a re-run, a restarted kernel) and works from it, silently; a clone that fails says from where
    and how to choose another source."""
    import subprocess
    import sys

    cell = notebook_authoring.setup_cell("unit9_test")
    head = cell.split("from grader import env")[0] + 'print("ROOT", ROOT, "CWD", Path.cwd())\n'

    def run(cwd: Path, **env):
        base = {k: v for k, v in os.environ.items() if k not in ("COURSE_REPO", "PYTHONPATH")}
        return subprocess.run([sys.executable, "-c", head], cwd=cwd, env={**base, **env}, capture_output=True, text=True)

    inside = run(Path(nb.REPO) / "notebooks")
    assert inside.returncode == 0 and inside.stdout == f"ROOT {nb.REPO} CWD {Path(nb.REPO) / 'notebooks'}\n"
    assert inside.stderr == ""

    clone = tmp_path / notebook_authoring.GITHUB_REPO.split("/")[1]
    (clone / "grader").mkdir(parents=True)
    (clone / "grader" / "notebooks.py").touch()
    again = run(tmp_path, COURSE_REPO=str(tmp_path / "no-such-course"))
    assert again.returncode == 0 and again.stdout == f"ROOT {clone} CWD {clone}\n" and again.stderr == ""

    shutil.rmtree(clone)
    failed = run(tmp_path, COURSE_REPO=str(tmp_path / "no-such-course"))
    assert failed.returncode != 0 and not clone.exists()
    assert f"RuntimeError: could not clone the course from {tmp_path / 'no-such-course'} (set COURSE_REPO" in failed.stderr


def course_origin(where: Path) -> Path:
    """A git repository holding this checkout's files as they are on disk (tracked and new, not ignored):
    what the setup cell clones in place of GitHub (COURSE_REPO)."""
    import subprocess

    listed = subprocess.run(["git", "-C", str(nb.REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout, nothing to clone: {listed.stderr.decode().strip()}")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = Path(nb.REPO) / name
        if source.is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    git = ["git", "-C", str(where), "-c", "user.name=course-test", "-c", "user.email=course-test@localhost"]
    for args in (["init", "--quiet"], ["add", "--all"], ["commit", "--quiet", "--no-verify", "-m", "the course"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return where


def run_outside_the_repository(unit: str, tmp_path: Path, monkeypatch, answered, **execute_args):
    """The committed release notebook of `unit`, its solution cells for which `answered(cell)` holds
    filled with the instructor's, executed in a folder outside the repository, with COURSE_REPO pointed
    at a local copy of the course. A last cell reports where the grader came from. Returns the
    executed notebook, the folder it ran in, the copy it cloned and what that cell reported."""
    import json

    need("nbclient", "nbformat", "ipykernel", "jupytext")
    import nbformat

    run, origin = tmp_path / "run", course_origin(tmp_path / "origin")
    run.mkdir()
    assert not run.resolve().is_relative_to(Path(nb.REPO).resolve())
    notebook = read(notebook_release.RELEASE / unit / f"{unit}.ipynb")
    instructor = {grade_id(c): c for c in notebook_authoring.notebook(unit).cells}
    filled = []
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and answered(cell):
            cell.source = instructor[grade_id(cell)].source
            filled.append(grade_id(cell))
    notebook.cells.append(nbformat.v4.new_code_cell(
        'import json, grader\nprint("where:", json.dumps({"grader": grader.__file__, "cwd": os.getcwd(), '
        '"build": str(nb.BUILD_ROOT)}))'))
    nbformat.write(notebook, run / f"{unit}.ipynb")
    monkeypatch.setenv("COURSE_REPO", str(origin))
    # as in Colab: nothing points at a checkout (packages installed elsewhere on the path stay reachable)
    monkeypatch.delenv("COURSE_BUILD_DIR", raising=False)
    elsewhere = pythonpath_outside_the_checkout()
    if elsewhere:
        monkeypatch.setenv("PYTHONPATH", elsewhere)
    else:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    executed = execute(run / f"{unit}.ipynb", monkeypatch, **execute_args)
    where = json.loads(outputs_text(executed.cells[-1]).split("where:", 1)[1])
    assert filled
    return executed, run, origin, where


def assert_cloned_and_used(executed, run: Path, origin: Path, where: dict) -> Path:
    """The setup cell cloned the course into the notebook's folder, said so in one line, wrote nothing
    to stderr, and the notebook imported the grader from the clone and worked there."""
    import subprocess

    clone = run / notebook_authoring.GITHUB_REPO.split("/")[1]
    assert (clone / ".git").is_dir() and (clone / "grader" / "notebooks.py").is_file()
    remote = subprocess.run(["git", "-C", str(clone), "remote", "get-url", "origin"], capture_output=True, text=True)
    assert remote.stdout.strip() == str(origin)
    setup = next(c for c in executed.cells if grade_id(c) == "setup")
    assert not [o for o in setup.outputs if o.output_type == "stream" and o.name == "stderr"]
    assert f"course: cloned {origin} into {clone}\n" in outputs_text(setup)
    assert Path(where["grader"]) == clone / "grader" / "__init__.py"
    assert Path(where["cwd"]) == clone and Path(where["build"]) == clone / ".build"
    return clone


COLAB_CPU_UNIT = "unit1_scalar_kernels"  # the cheapest to run on a CPU (9-13 s for each unit, measured)


def test_release_notebook_sets_the_course_up_outside_the_repository(tmp_path, monkeypatch):
    """What Colab does, on a CPU: a student's release notebook (its Python warm-ups answered) runs from a
    folder outside the repository under `nbgrader validate`'s mode; its setup cell clones the course
    (COURSE_REPO: a local copy) and works from the clone; the warm-ups and their graded cells run
    without an error, the %%solution cells record, the GPU cells say why they skip."""
    start = time.perf_counter()
    executed, run, origin, where = run_outside_the_repository(
        COLAB_CPU_UNIT, tmp_path, monkeypatch, answered=lambda c: not c.source.startswith(nb.MAGIC),
        mode="validate")  # raises CellExecutionError on any error
    assert_cloned_and_used(executed, run, origin, where)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code)
    warmups = cpu_graded(executed)
    assert warmups and all(not any(o.output_type == "error" for o in c.outputs)
                           for c in code if grade_id(c) in warmups)
    text = "".join(outputs_text(c) for c in code)
    assert "not written yet" in text and "skipped under `nbgrader validate`" in text
    print(f"{COLAB_CPU_UNIT} ran from outside the repository in {time.perf_counter() - start:.1f} s")


@pytest.mark.gpu
@pytest.mark.parametrize("unit", ["unit1_scalar_kernels", "unit4_fusion"])
def test_release_notebook_runs_fully_outside_the_repository_on_gpu(unit, tmp_path, monkeypatch):
    """What Colab does, on a GPU: the release notebook with every answer written (the instructor's cells)
    runs from outside the repository, cloned by its setup cell: every build, graded check, benchmark and
    plot runs from the clone (cold builds: no cache is shared with this checkout) without an error."""
    start = time.perf_counter()
    executed, run, origin, where = run_outside_the_repository(
        unit, tmp_path, monkeypatch, answered=lambda c: True, gpu=True, timeout=1800)
    clone = assert_cloned_and_used(executed, run, origin, where)
    code = [c for c in executed.cells if c.cell_type == "code"]
    text = "".join(outputs_text(c) for c in code)
    assert "builds, checks and benchmarks run here" in text
    assert "skipped: no CUDA GPU" not in text and "skipped under" not in text
    graded = [c for c in code if c.metadata.get("nbgrader", {}).get("grade")]  # Python; answer cells may be CUDA
    checked = [c for c in graded if any(call.method == "check" for call in graded_calls(c.source))]
    assert checked
    for cell in checked:
        assert "passed (seed 1234" in outputs_text(cell) and "FAIL" not in outputs_text(cell), grade_id(cell)
    assert list((clone / ".build" / "notebooks").glob("nb_*/*"))
    print(f"{unit} ran on the GPU from outside the repository in {time.perf_counter() - start:.0f} s")


def test_graded_cells_check_in_the_graders_math_state_and_follow_its_requirements(monkeypatch, tmp_path):
    """A graded cell runs the grader's checks as the grader does: in the spec's math state (TF32 off,
    whatever the notebook's own flags: a default that follows torch.backends.cudnn.allow_tf32 meets the
    same mode as in `make grade`), and a group the spec pays only once another passes (spec.requires)
    fails while that one has failed in an earlier cell."""
    import types

    import torch

    from grader import specs
    from grader.verify.checks import CheckFailure

    sp = specs.by_exercise("04_stencil2d")
    assert "forward" in sp.requires["registration"]
    seen = []

    def broken(ctx):
        raise CheckFailure("elements wrong")

    def record_flags(ctx):
        seen.append((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32))

    checks = [specs.Check("forward[x]", "forward", broken), specs.Check("registration[opcheck]", "registration", record_flags)]
    monkeypatch.setattr(type(sp), "checks", lambda self: checks)
    monkeypatch.setattr(nb, "heavy_skip_reason", lambda: None)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)  # PyTorch's default, a notebook's state
    course = nb.Course("unit2_2d_grids", seed=1, quiet=True)
    monkeypatch.setattr(course, "build", lambda exercise: types.SimpleNamespace(__file__=str(tmp_path / "op.py")))
    with pytest.raises(AssertionError, match="elements wrong"):
        course.check("forward", "04_stencil2d")
    with pytest.raises(AssertionError, match="registration counts only once forward passes"):
        course.check("registration", "04_stencil2d")
    assert seen == [(False, False)]  # the check itself ran, in strict fp32
    assert torch.backends.cudnn.allow_tf32 is True  # and the notebook's flags are back
    checks[0] = specs.Check("forward[x]", "forward", lambda ctx: None)
    course.check("forward", "04_stencil2d")
    course.check("registration", "04_stencil2d")  # passes once forward does
