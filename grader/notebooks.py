"""The nbgrader course: the notebooks' runtime, their authoring helpers, and the release.

    python -m grader.notebooks release [UNIT ...] [--root DIR]   nbgrader generate_assignment into notebooks/release
    python -m grader.notebooks check                             notebooks valid, in sync with solutions/ and generators
    python -m grader.notebooks generate [UNIT ...]               rewrite notebooks/source/<unit>/<unit>.ipynb from
                                                                 notebooks/generators/<unit>.py
    python -m grader.notebooks prebuild [NOTEBOOK ...]           build in parallel what running the notebooks will
                                                                 build (before `nbgrader autograde` of a class)

One source of truth. A notebook's kernel code lives in cells that start with a cell magic naming the
region of solutions/ it stands for:

    %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_kernel
    // TODO: ... (the task, kept in the student release)
    ### BEGIN SOLUTION
    ... the same code as solutions/01_leaky_relu/leaky_relu.cu's region in leaky_relu_kernel ...
    ### END SOLUTION

`check` (and tests/test_notebooks.py) require every such cell to hold exactly the region's TODO and
code lines. At run time, `Course.build()` takes the exercise's student copy (exercises/NN_name, which a
student release also has), puts each notebook cell into its region, and builds that folder with the
grader's own build (a namespace per distinct source, so re-running a cell never collides). The graded
cells run the grader's own checks (grader/specs) on the result.

Heavy cells (builds, benchmarks) skip, saying why, under `nbgrader validate` (NBGRADER_EXECUTION=validate)
or without a CUDA GPU. Under `nbgrader autograde` without a GPU a graded cell fails instead: it cannot
award points it has not checked.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from grader.env import BUILD_ROOT, REPO
from grader.regions import BEGIN, COMMENT, END, find_region, regions_of, replace_regions

NOTEBOOKS = REPO / "notebooks"
SOURCE = NOTEBOOKS / "source"
RELEASE = NOTEBOOKS / "release"
GENERATORS = NOTEBOOKS / "generators"
SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"

MAGIC = "%%solution"
# nbgrader's delimiters are substrings: any line containing them opens or closes a region.
NB_BEGIN, NB_END = BEGIN, END
NB_HIDDEN_BEGIN, NB_HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
# what nbgrader's ClearSolutions leaves in a Python-kernel notebook's cleared region
NB_STUB_LINES = ("# YOUR CODE HERE", "raise NotImplementedError()")
SCHEMA_VERSION = 3


# ---------------------------------------------------------------------------------------------
# Notebook cells that hold a region
# ---------------------------------------------------------------------------------------------
@dataclass
class SolutionCell:
    exercise: str  # "01_leaky_relu"
    file: str  # "leaky_relu.cu"
    name: str  # "leaky_relu_kernel"
    body: list[str]  # the cell's lines after the magic line

    @property
    def target(self) -> str:
        return f"{self.exercise}/{self.file}"

    def teaching_lines(self) -> list[str]:
        """TODO and code lines, without nbgrader's markers: what must equal the solutions/ region."""
        return [l.rstrip() for l in self.code_lines()]

    @property
    def unanswered(self) -> bool:
        """Still nbgrader's stub (`raise NotImplementedError()`), as in the student release."""
        return any(l.strip() == NB_STUB_LINES[1] for l in self.body)

    def code_lines(self) -> list[str]:
        """The cell's lines without nbgrader's markers (written at the region's indentation)."""
        lines = [l for l in self.body if NB_BEGIN not in l and NB_END not in l]
        while lines and not lines[-1].strip():
            lines.pop()
        return lines


def parse_solution_cell(source: str) -> SolutionCell | None:
    lines = source.splitlines()
    if not lines or not lines[0].startswith(MAGIC + " "):
        return None
    args = lines[0][len(MAGIC) :].split()
    if len(args) != 2 or "/" not in args[0]:
        raise ValueError(f"`{lines[0]}`: expected `{MAGIC} NN_exercise/file.cu function_name`")
    exercise, file = args[0].split("/", 1)
    return SolutionCell(exercise, file, args[1], lines[1:])


# ---------------------------------------------------------------------------------------------
# The runtime used by the notebooks
# ---------------------------------------------------------------------------------------------
def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def execution_mode() -> str:
    """nbgrader's NBGRADER_EXECUTION: "validate", "autograde", or "" (a person running the notebook)."""
    return os.environ.get("NBGRADER_EXECUTION", "")


def heavy_skip_reason() -> str | None:
    """Why builds and benchmarks do not run here, or None when they do."""
    if execution_mode() == "validate":
        return "skipped under `nbgrader validate` (NBGRADER_EXECUTION=validate): builds and benchmarks take minutes"
    if not gpu_available():
        return "skipped: no CUDA GPU on this machine (torch.cuda.is_available() is False)"
    return None


class GradingUnavailable(RuntimeError):
    """A graded cell cannot check anything here (autograde without a GPU): no points."""


@dataclass
class CheckOutcome:
    name: str
    status: str  # "passed", "failed", "skipped"
    message: str = ""


@dataclass
class Course:
    """The notebook's handle on the course: records `%%solution` cells, builds, checks, times."""

    unit: str
    seed: int | None = None
    quiet: bool = False
    cells: dict[tuple[str, str, str], SolutionCell] = field(default_factory=dict)
    passed: dict[tuple[str, str], bool] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], list[CheckOutcome]] = field(default_factory=dict)
    _modules: dict[str, object] = field(default_factory=dict)

    def __post_init__(self):
        if self.seed is None:
            env_seed = os.environ.get("COURSE_SEED", "")
            self.seed = int(env_seed) if env_seed else random.SystemRandom().randrange(1, 2**31)
        self._register_magic()

    # --- the cell magic ------------------------------------------------------------------------
    def _register_magic(self) -> None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ip = get_ipython()
        if ip is not None:
            ip.register_magic_function(self._solution_magic, "cell", "solution")

    def _solution_magic(self, line: str, cell: str) -> None:
        parsed = parse_solution_cell(f"{MAGIC} {line.strip()}\n{cell}")
        self.record(parsed)

    def record(self, cell: SolutionCell) -> None:
        skeleton = self.skeleton(cell.exercise) / cell.file
        if not skeleton.exists():
            raise FileNotFoundError(f"{cell.target}: no such file in {skeleton.parent}")
        find_region(skeleton, cell.name)  # a typo in the name fails here, not at build time
        self.cells[(cell.exercise, cell.file, cell.name)] = cell
        self._modules.pop(cell.exercise, None)
        if not self.quiet:
            state = "not written yet (nbgrader's stub is still there)" if cell.unanswered else "recorded"
            print(f"{cell.name} ({cell.target}): {state}; course.build() compiles it")

    def record_notebook(self, path: Path) -> None:
        """Record every `%%solution` cell of a notebook file (what running those cells does)."""
        import nbformat

        for cell in nbformat.read(path, as_version=4).cells:
            parsed = parse_solution_cell(cell.source) if cell.cell_type == "code" else None
            if parsed:
                self.record(parsed)

    # --- building ------------------------------------------------------------------------------
    @staticmethod
    def skeleton(exercise: str) -> Path:
        """The given code around the regions: the student copy, which a release also has."""
        for root in (EXERCISES, SOLUTIONS):
            if (root / exercise).is_dir():
                return root / exercise
        raise FileNotFoundError(f"neither exercises/{exercise} nor solutions/{exercise} exists under {REPO}")

    def assemble(self, exercise: str) -> Path:
        """Write the exercise folder with this notebook's regions into a build folder named by its content."""
        skeleton = self.skeleton(exercise)
        files: dict[str, str] = {}
        for p in sorted(skeleton.iterdir()):
            if not p.is_file() or p.suffix == ".pyc":
                continue
            text = p.read_text()
            if p.suffix in COMMENT:
                bodies = {c.name: c.code_lines() for (ex, f, _), c in self.cells.items()
                          if ex == exercise and f == p.name and not c.unanswered}
                if bodies:
                    text = replace_regions(text, p.suffix, bodies)
            files[p.name] = text
        h = hashlib.sha256()
        for name, text in files.items():
            h.update(name.encode() + b"\0" + text.encode() + b"\0")
        # the folder name is the exercise's (the grader's specs know it by that name); its parent,
        # unique per source, gives the build its own op namespace
        folder = BUILD_ROOT / "notebooks" / f"nb_{h.hexdigest()[:12]}" / exercise
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            target = folder / name
            if not target.exists() or target.read_text() != text:
                # atomically: another process (another notebook, a test) may be building this folder
                tmp = folder / f".{name}.{os.getpid()}.tmp"
                tmp.write_text(text)
                os.replace(tmp, target)
        return folder

    def build(self, exercise: str):
        """Build the notebook's version of `exercise` and import its Python module (cached)."""
        if exercise in self._modules:
            return self._modules[exercise]
        from grader import build as course_build
        from grader import spec as specs

        spec = specs.by_exercise(exercise)
        folder = self.assemble(exercise)
        start = time.perf_counter()
        with _quiet():
            result = course_build.build(folder, load=False)
        if not result.ok:
            raise course_build.BuildError(folder, result.error)
        with _quiet():
            module = specs.import_exercise_module(folder, spec)
        if not self.quiet:
            how = "cached" if result.cached else f"compiled in {time.perf_counter() - start:.0f} s"
            print(f"{exercise}: {how}; ops in torch.ops.{result.namespace}")
        self._modules[exercise] = module
        return module

    # --- grading -------------------------------------------------------------------------------
    def _unavailable(self, what: str) -> bool:
        """True (after printing why) when `what` must skip; raises under autograde."""
        reason = heavy_skip_reason()
        if reason is None:
            return False
        if execution_mode() == "autograde":
            raise GradingUnavailable(f"{what} cannot be graded here: {reason}. Autograde on a machine with a GPU.")
        print(f"{what}: {reason}")
        return True

    def check(self, group: str, exercise: str, only: list[str] | None = None) -> None:
        """Run the grader's checks of `group` (all of them, or the named ones) on this notebook's build.

        Prints one line per check (kept in `self.outcomes`); raises AssertionError naming every failure,
        so the graded cell earns nothing. Returns None: a graded cell's result would count as its score.
        """
        from grader import spec as specs

        what = f"{exercise} {group}" + (" (the visible cases)" if only else "")
        if self._unavailable(what):
            return None
        spec = specs.by_exercise(exercise)
        checks = [c for c in spec.checks() if c.group == group]
        if only is not None:
            known = {c.name for c in checks}
            unknown = [n for n in only if n not in known]
            if unknown:
                raise KeyError(f"{exercise} has no {group} check named {unknown}; known: {sorted(known)}")
            checks = [c for c in checks if c.name in only]
        module = self.build(exercise)
        ctx = specs.Context(module=module, seed=self.seed, exercise_dir=Path(module.__file__).parent)
        outcomes = [self._run_one(c, ctx) for c in checks]
        failed = [o for o in outcomes if o.status == "failed"]
        self.passed[(exercise, group)] = not failed
        print(f"{what}: {len(outcomes) - len(failed)} of {len(outcomes)} passed (seed {self.seed}; replay with "
              f"COURSE_SEED={self.seed})")
        for o in outcomes:
            mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}[o.status]
            print(f"  {mark} {o.name}" + (f": {o.message}" if o.message else ""))
        self.outcomes[(exercise, group)] = outcomes
        if failed:
            raise AssertionError(f"{len(failed)} {group} check(s) failed:\n" +
                                 "\n".join(f"- {o.name}: {o.message}" for o in failed))

    @staticmethod
    def _run_one(check, ctx) -> CheckOutcome:
        import torch

        from grader.checks import CheckFailure, cuda_context_lost

        try:
            with _quiet():
                check.run(ctx)
            return CheckOutcome(check.name, "passed")
        except CheckFailure as e:
            return CheckOutcome(check.name, "failed", str(e))
        except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
            message = str(e).split("\nException raised from")[0]
            if cuda_context_lost(message):
                message += " (the CUDA context is now unusable: restart the kernel after fixing the bug)"
            return CheckOutcome(check.name, "failed", f"{type(e).__name__}: {message}")
        except BaseException as e:  # pytest.skip() from a check (e.g. not enough GPU memory)
            if type(e).__name__ == "Skipped":
                return CheckOutcome(check.name, "skipped", str(e))
            raise
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def reference_module(self, exercise: str):
        """The reference solution's module, when solutions/ is present (not in a student release)."""
        from grader import spec as specs

        folder = SOLUTIONS / exercise
        if not folder.is_dir():
            return None
        with _quiet():
            return specs.import_exercise_module(folder, specs.by_exercise(exercise))

    def performance(self, exercise: str) -> float | None:
        """Time the op as the grader does; return the performance points earned (nbgrader reads a
        number left as a graded cell's result as partial credit)."""
        from grader import spec as specs
        from grader.performance import measure

        if self._unavailable(f"{exercise} performance"):
            return None
        spec = specs.by_exercise(exercise)
        for group in spec.perf_requires:
            if not self.passed.get((exercise, group)):
                raise AssertionError(f"speed earns points only once `{group}` passes: run its graded cell first")
        module = self.build(exercise)
        ctx = specs.Context(module=module, seed=self.seed, exercise_dir=Path(module.__file__).parent)
        with _quiet():
            result = measure(spec, ctx, self.reference_module(exercise))
        if result.get("verdict") and "rate" not in result:
            raise AssertionError(result["verdict"])
        scale, unit = (1e9, "GB/s") if result["unit"] == "B" else (1e12, "TFLOP/s")
        print(f"{result['label']}: {result['rate'] / scale:.0f} {unit}; "
              f"reference {result['reference_rate'] / scale:.0f} "
              f"({result['reference_source']}); {result['limit_name']} {result['limit'] / scale:.0f}")
        print(f"ratio to the reference {result['ratio']:.2f}, {result['fraction_of_limit']:.0%} of the limit; "
              f"tiers {list(spec.perf_tiers)}")
        if result["verdict"]:
            print(result["verdict"])
        points = spec.points.get("performance", 0) * result["tier_fraction"]
        print(f"performance: {points:g} of {spec.points.get('performance', 0)} points")
        return round(points, 3)

    def throughput_sweep(self, exercise: str, sizes: list[int], make_input, call, baseline, bytes_per_element: int):
        """GB/s of the notebook's op and of PyTorch's at each size, and the copy bandwidth."""
        import torch

        from grader.bench import L2Flusher, copy_bandwidth, time_fn

        module = self.build(exercise)
        flush = L2Flusher()
        rows = []
        for n in sizes:
            inputs = [make_input(n, seed) for seed in (1, 2)]
            mine = time_fn(lambda inp: call(module, inp), inputs, flush=flush, max_seconds=0.5, max_samples=100)
            theirs = time_fn(baseline, inputs, flush=flush, max_seconds=0.5, max_samples=100)
            work = bytes_per_element * n
            rows.append((n, mine.rate(work), theirs.rate(work)))
            del inputs
            torch.cuda.empty_cache()
        limit = copy_bandwidth(bytes_per_element * max(sizes), flush=flush)
        return rows, limit


@contextlib.contextmanager
def _quiet():
    """Keep warnings off stderr: nbgrader gives 0 to a graded cell that writes to stderr."""
    import logging

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # e.g. torch.utils.cpp_extension's logger, which writes to stderr
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stderr(sys.stdout), _stderr_fd_to_stdout():
                yield
    finally:
        logging.disable(previous)


@contextlib.contextmanager
def _stderr_fd_to_stdout():
    """Send what C++ and CUDA libraries write to file descriptor 2 to descriptor 1 meanwhile: a Jupyter
    kernel forwards descriptor 2 as the cell's stderr, which would cost a graded cell its points."""
    try:
        sys.stdout.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no such descriptors (an embedded interpreter)
        yield
        return
    try:
        os.dup2(1, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def scratch_dir(name: str) -> Path:
    """A build folder for a notebook's own experiments (load_inline), outside the assignment folder."""
    path = BUILD_ROOT / "notebooks" / "scratch" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def find_repo(start: Path | None = None) -> Path:
    """The course repository holding `start` (the notebook's folder) or one of its parents."""
    start = Path(start or Path.cwd()).resolve()
    for p in [start, *start.parents]:
        if (p / "grader" / "notebooks.py").is_file():
            return p
    raise FileNotFoundError(f"no course repository (with grader/notebooks.py) at or above {start}")



# ---------------------------------------------------------------------------------------------
# Building ahead of a run: every build a notebook's cells will ask for, in parallel
# ---------------------------------------------------------------------------------------------
@dataclass
class CourseCall:
    method: str  # "build", "check", "performance" or "throughput_sweep"
    exercise: str
    group: str | None = None  # course.check's group
    only: list[str] | None = None  # course.check's visible cases


# where each Course method that builds takes the exercise
_EXERCISE_ARGUMENT = {"build": 0, "check": 1, "performance": 0, "throughput_sweep": 0}


def _literal(node):
    import ast

    try:
        return ast.literal_eval(node)
    except ValueError:
        return None  # a name or an expression: not known before the cell runs


def course_calls(source: str) -> list[CourseCall]:
    """The `course.<method>(...)` calls of a Python cell that build an exercise, in source order."""
    import ast

    calls = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "course"
                and node.func.attr in _EXERCISE_ARGUMENT):
            continue
        args = [_literal(a) for a in node.args]
        keywords = {k.arg: _literal(k.value) for k in node.keywords}
        at = _EXERCISE_ARGUMENT[node.func.attr]
        exercise = args[at] if len(args) > at else keywords.get("exercise")
        if not isinstance(exercise, str):
            continue
        group = (args[0] if args else keywords.get("group")) if node.func.attr == "check" else None
        call = CourseCall(node.func.attr, exercise, group, keywords.get("only"))
        calls.append(((node.lineno, node.col_offset), call))
    return [call for _, call in sorted(calls, key=lambda c: c[0])]  # source order (ast.walk is breadth-first)


def builds_of(path: Path) -> list[Path]:
    """The exercise folders that running a notebook's cells in order will build, in that order.

    Course.build() builds the `%%solution` cells run so far, so a notebook that checks kernel 1 before
    kernel 2 is written builds that exercise once per state; a performance cell also loads the
    reference solution (solutions/, where present)."""
    import nbformat

    course = Course("prebuild", seed=1, quiet=True)
    folders: list[Path] = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        try:
            parsed = parse_solution_cell(cell.source)
            if parsed:
                course.record(parsed)
                continue
            if cell.source.lstrip().startswith("%"):
                continue
            for call in course_calls(cell.source):
                folders.append(course.assemble(call.exercise))
                if call.method == "performance" and (SOLUTIONS / call.exercise).is_dir():
                    folders.append(SOLUTIONS / call.exercise)
        except (ValueError, KeyError, FileNotFoundError, SyntaxError):
            continue  # that cell fails when it runs, with its own message; the rest still builds
    return list(dict.fromkeys(folders))


def prebuild(paths: list[Path], jobs: int | None = None, log=print) -> dict[Path, dict]:
    """Build, in parallel, every exercise folder that running these notebooks will build (a class's
    submissions before `nbgrader autograde`, say): the notebooks then find their builds cached."""
    from grader.cli import build_all

    folders: list[Path] = []
    for path in paths:
        folders += builds_of(Path(path))
    folders = list(dict.fromkeys(folders))
    jobs = jobs or max(1, (os.cpu_count() or 2) // 2)
    log(f"building {len(folders)} exercise folder(s) for {len(paths)} notebook(s), {jobs} at a time ...")
    return build_all(folders, jobs, log=log)

# ---------------------------------------------------------------------------------------------
# Authoring: cells with nbgrader metadata, built by notebooks/generators/<unit>.py
# ---------------------------------------------------------------------------------------------
def _nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution}
    if grade:
        meta["points"] = points
    return meta


CONTEXT = "@@CONTEXT@@"


def md(text: str, cell_id: str, context: str | None = None):
    """A markdown cell; a line `@@CONTEXT@@` in `text` is replaced by `context` (e.g. region_context())."""
    import nbformat

    text = textwrap.dedent(text).strip("\n")
    if context is not None:
        if CONTEXT not in text:
            raise ValueError(f"cell {cell_id}: context given but no {CONTEXT} line")
        text = text.replace(CONTEXT, context)
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = cell_id
    return cell


def code(source: str, cell_id: str, *, locked: bool = False):
    """A code cell; `locked` ones are read-only and restored from the instructor's copy at autograde."""
    import nbformat

    cell = nbformat.v4.new_code_cell(textwrap.dedent(source).strip("\n"))
    cell.id = cell_id
    if locked:
        cell.metadata["nbgrader"] = _nbgrader_meta(cell_id, locked=True)
        cell.metadata["editable"] = False
        cell.metadata["deletable"] = False
    return cell


def answer(source: str, grade_id: str):
    """A cell the student writes (nbgrader "solution" cell): its solution region is cleared in the release."""
    cell = code(source, grade_id)
    cell.metadata["nbgrader"] = _nbgrader_meta(grade_id, solution=True)
    return cell


def graded(source: str, grade_id: str, points: float):
    """An autograder test cell: read-only, worth `points`."""
    cell = code(source, grade_id)
    cell.metadata["nbgrader"] = _nbgrader_meta(grade_id, grade=True, locked=True, points=points)
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def setup_cell(unit: str):
    """The locked first code cell of every unit: find the repository, set up CUDA, make the Course."""
    return code(f"""
        import os
        import sys
        from pathlib import Path

        # This notebook runs from notebooks/source, notebooks/release or nbgrader's folder per student:
        # find the course repository above it and import the grader from there.
        ROOT = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "grader" / "notebooks.py").is_file())
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))

        from grader import env

        env.configure()  # CUDA_HOME and TORCH_CUDA_ARCH_LIST for the builds

        import torch
        import torch.nn.functional as F

        from grader import notebooks as nb

        course = nb.Course("{unit}")  # also defines the %%solution cell magic
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
        print(f"torch {{torch.__version__}}; GPU: {{gpu}}")
        print(nb.heavy_skip_reason() or "builds, checks and benchmarks run here")
        """, "setup", locked=True)


def checks_source(exercise: str, group: str, visible: list[str]) -> str:
    """A graded cell's code: a few of the group's checks shown, all of them run as hidden tests."""
    shown = ",\n    ".join(f'"{n}"' for n in visible)
    return (
        f"# {exercise} {group}: the grader's own checks. Shown here: a few cases; at grading, every {group} check.\n"
        f'course.check("{group}", "{exercise}", only=[\n    {shown},\n])\n'
        f"### {NB_HIDDEN_BEGIN}\n"
        f'course.check("{group}", "{exercise}")\n'
        f"### {NB_HIDDEN_END}"
    )


def performance_source(exercise: str) -> str:
    return (
        "# performance: the points earned are this cell's result (nbgrader's partial credit)\n"
        f'course.performance("{exercise}")'
    )


def region_cell(target: str, name: str, grade_id: str):
    """The `%%solution` cell for one region of solutions/<target>, built from that region."""
    exercise, file = target.split("/", 1)
    region = find_region(SOLUTIONS / exercise / file, name)
    lines = region.teaching_lines()
    todo = [l for l in lines if l.strip().startswith(f"{region.prefix} TODO")]
    rest = lines[len(todo):]
    if lines[: len(todo)] != todo:
        raise ValueError(f"{target} {name}: TODO lines must open the region")
    source = "\n".join([f"{MAGIC} {target} {name}", *todo, f"### {NB_BEGIN}", *rest, f"### {NB_END}"])
    return answer(source, grade_id)


def region_context(target: str, name: str) -> str:
    """The given code around a region (its signature and comments), as a fenced block for markdown."""
    exercise, file = target.split("/", 1)
    path = SOLUTIONS / exercise / file
    lines = path.read_text().splitlines()
    region = find_region(path, name)
    head = region.context(lines)
    # an earlier region of the same function (its own cell) is shown as a placeholder, not as its solution
    start = region.begin - len(head)
    for earlier in reversed([r for r in regions_of(path) if start <= r.begin < region.begin]):
        placeholder = earlier.indent + f"{region.prefix} ... your code from the cell for {earlier.name} ..."
        head[earlier.begin - start : earlier.end + 1 - start] = [placeholder]
    lang = "cpp" if region.prefix == "//" else "python"
    body = head + [region.indent + f"{region.prefix} ... your code (the cell below) ..."]
    if region.prefix == "//":
        after = lines[region.end + 1].rstrip() if region.end + 1 < len(lines) else "}"
        if after != "}":  # the region sits inside a loop or is followed by given code
            body.append(f"  {region.prefix} ... (given code follows) ...")
        body.append("}")
    return f"```{lang}\n" + "\n".join(body) + "\n```"


def new_notebook(cells: list):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


# ---------------------------------------------------------------------------------------------
# Release, check, generate
# ---------------------------------------------------------------------------------------------
def units(root: Path = SOURCE) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if root.exists() else []


def notebooks_of(unit: str, root: Path = SOURCE) -> list[Path]:
    return sorted((root / unit).glob("*.ipynb"))


def generator_of(unit: str) -> Path | None:
    path = GENERATORS / f"{unit}.py"
    return path if path.exists() else None


def generated(unit: str):
    """The notebook that notebooks/generators/<unit>.py builds."""
    path = generator_of(unit)
    spec = importlib.util.spec_from_file_location(f"course_notebook_generator_{unit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build()


def _dump(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def generate(selected: list[str] | None = None) -> list[Path]:
    import nbformat

    written = []
    names = selected or sorted(p.stem for p in GENERATORS.glob("*.py") if not p.name.startswith("_"))
    for unit in names:
        nb = generated(unit)
        nbformat.validate(nb)
        out = SOURCE / unit / f"{unit}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(_dump(nb))
        written.append(out)
    return written


def check_notebook(path: Path) -> list[str]:
    """Problems with one source notebook: format, nbgrader metadata, regions against solutions/."""
    import nbformat

    problems = []
    rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as e:
        return [f"{rel}: not a valid notebook: {e}"]
    grade_ids: dict[str, int] = {}
    for i, cell in enumerate(nb.cells):
        where = f"{rel} cell {i}"
        meta = cell.metadata.get("nbgrader")
        src = cell.source
        if meta:
            if meta.get("schema_version") != SCHEMA_VERSION:
                problems.append(f"{where}: nbgrader schema_version {meta.get('schema_version')}, "
                                f"expected {SCHEMA_VERSION}")
            gid = meta.get("grade_id")
            if not gid:
                problems.append(f"{where}: nbgrader cell without grade_id")
            elif gid in grade_ids:
                problems.append(f"{where}: grade_id {gid!r} also used by cell {grade_ids[gid]}")
            else:
                grade_ids[gid] = i
            if meta.get("grade") and not (isinstance(meta.get("points"), (int, float)) and meta["points"] > 0):
                problems.append(f"{where}: graded cell {gid!r} needs points > 0")
        has_region = any(NB_BEGIN in l for l in src.splitlines())
        if has_region and not (meta and meta.get("solution")):
            problems.append(f"{where}: has a solution region but is not an nbgrader solution cell")
        if NB_HIDDEN_BEGIN in src and not (meta and meta.get("grade")):
            problems.append(f"{where}: hidden tests outside a graded cell")
        if src.count(NB_BEGIN) != src.count(NB_END) or src.count(NB_HIDDEN_BEGIN) != src.count(NB_HIDDEN_END):
            problems.append(f"{where}: unbalanced BEGIN/END markers")
        if cell.cell_type != "code":
            continue
        try:
            sol = parse_solution_cell(src)
        except ValueError as e:
            problems.append(f"{where}: {e}")
            continue
        if sol is None:
            continue
        if not (meta and meta.get("solution")):
            problems.append(f"{where}: a {MAGIC} cell must be an nbgrader solution cell")
        for root in (EXERCISES, SOLUTIONS):
            f = root / sol.exercise / sol.file
            if not f.exists():
                if root == SOLUTIONS:
                    continue  # a student release has no solutions/
                problems.append(f"{where}: {f.relative_to(REPO)} does not exist")
                continue
            try:
                region = find_region(f, sol.name)
            except (KeyError, ValueError) as e:
                problems.append(f"{where}: {e}")
                continue
            if root == SOLUTIONS and region.teaching_lines() != sol.teaching_lines():
                problems.append(f"{where}: {MAGIC} {sol.target} {sol.name} differs from the region in "
                                f"solutions/{sol.target}:\n" + _diff(region.teaching_lines(), sol.teaching_lines()))
    return problems


def _diff(expected: list[str], actual: list[str]) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(expected, actual, "solutions/", "notebook", lineterm="", n=1))


def uncovered_regions(path: Path) -> list[str]:
    """Regions of the exercises a notebook builds that it has no `%%solution` cell for: its build
    would silently keep the student copy's stub there."""
    import nbformat

    cells = [parse_solution_cell(c.source) for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    cells = [c for c in cells if c]
    have = {(c.exercise, c.file, c.name) for c in cells}
    missing = []
    for exercise in sorted({c.exercise for c in cells}):
        folder = SOLUTIONS / exercise if (SOLUTIONS / exercise).is_dir() else EXERCISES / exercise
        for f in sorted(folder.iterdir()):
            if f.suffix in COMMENT and f.suffix != ".py":
                missing += [f"{exercise}/{f.name} {r.name}" for r in regions_of(f)
                            if (exercise, f.name, r.name) not in have]
    return missing


def check(selected: list[str] | None = None) -> list[str]:
    problems = []
    found = units()
    if not found:
        problems.append(f"no notebooks under {SOURCE.relative_to(REPO)}")
    for unit in selected or found:
        for path in notebooks_of(unit):
            problems += check_notebook(path)
            rel = path.relative_to(REPO)
            problems += [f"{rel}: no {MAGIC} cell for the region {m}" for m in uncovered_regions(path)]
        if generator_of(unit):
            expected = _dump(generated(unit))
            path = SOURCE / unit / f"{unit}.ipynb"
            if not path.exists() or path.read_text() != expected:
                problems.append(f"{path.relative_to(REPO)} differs from what notebooks/generators/{unit}.py "
                                f"writes: run `python -m grader.notebooks generate {unit}`")
    return problems


def release(selected: list[str] | None = None, root: Path = NOTEBOOKS) -> list[Path]:
    """Run nbgrader generate_assignment for each unit; return the released notebooks.

    With another `root`, the units' sources are copied to root/source first (tests use a temporary
    course directory so they never touch notebooks/ or its gradebook).
    """
    root = Path(root).resolve()
    if root != NOTEBOOKS.resolve():
        for unit in selected or units():
            dst = root / "source" / unit
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(SOURCE / unit, dst, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    out = []
    for unit in selected or units(root / "source"):
        proc = run_nbgrader(["generate_assignment", unit, "--force"], root)
        released = sorted((root / "release" / unit).glob("*.ipynb"))
        if not released:
            raise RuntimeError(f"nbgrader wrote no notebook for {unit}:\n{proc.stderr}")
        for path in released:
            leaks = release_leaks(path)
            if leaks:
                raise RuntimeError(f"{path}: the release still contains:\n" + "\n".join(leaks))
        out += released
    return out


def run_nbgrader(args: list[str], root: Path = NOTEBOOKS, env: dict[str, str] | None = None):
    """Run the real nbgrader command line with the course's nbgrader_config.py, in course directory
    `root`; raise with nbgrader's log when it fails."""
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={Path(root).resolve()}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**_tool_env(), **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TRACEBACK_SOURCE = re.compile(r"\s*(?:-*>)?\s*\d+ ?(.*)$")


def hidden_lines(source: str) -> set[str]:
    """The stripped lines of a cell's hidden-test regions, markers included."""
    hidden, inside = set(), False
    for line in source.splitlines():
        if NB_HIDDEN_BEGIN in line:
            inside = True
        if inside and line.strip():
            hidden.add(line.strip())
        if NB_HIDDEN_END in line:
            inside = False
    return hidden


def _load_preprocessor_base():
    try:
        from nbconvert.preprocessors import Preprocessor
    except ImportError:  # nbgrader's machinery is absent; the class is only used by nbgrader
        return object
    return Preprocessor


class HideHiddenTestsInTracebacks(_load_preprocessor_base()):
    """nbgrader feedback preprocessor: IPython's tracebacks quote the lines around the failing one,
    which can include hidden tests. Drop those lines from graded cells' error outputs (run it before
    nbgrader's ClearHiddenTests, which cleans the cell's source)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.enabled = True  # nbconvert's preprocessors are off unless enabled

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        hidden = hidden_lines(cell.source)
        if not hidden:
            return cell, resources
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                output.traceback = [_drop_quoted(entry, hidden) for entry in output.traceback]
        return cell, resources


def _drop_quoted(entry: str, hidden: set[str]) -> str:
    kept = []
    for line in entry.split("\n"):
        m = _TRACEBACK_SOURCE.match(_ANSI.sub("", line))
        if m and m.group(1).strip() in hidden:
            continue
        kept.append(line)
    return "\n".join(kept)


def _tool_env() -> dict[str, str]:
    """The environment for nbgrader: its gradebook runs `alembic`, which sits beside this Python
    (the virtual environment's bin/, not necessarily on PATH when the venv is not activated). After
    `pip install --target DIR`, scripts are in DIR/bin and nbconvert's templates in DIR/share/jupyter,
    where neither PATH nor Jupyter looks: add those too."""
    env = dict(os.environ)
    bins = [str(Path(sys.executable).parent)]
    site = _site_of("alembic")
    if site and (site / "bin" / "alembic").is_file():
        bins.append(str(site / "bin"))
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    site = _site_of("nbconvert")
    if site and (site / "share" / "jupyter" / "nbconvert" / "templates").is_dir():
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [env.get("JUPYTER_PATH"), str(site / "share" / "jupyter")]))
    return env


def _site_of(package: str) -> Path | None:
    """The folder that holds an installed package (site-packages, or a `pip install --target` folder)."""
    found = importlib.util.find_spec(package)
    return Path(found.origin).parents[1] if found and found.origin else None


def release_leaks(path: Path) -> list[str]:
    """Solution code or hidden tests left in a released notebook."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    leaks = [m for m in (NB_BEGIN, NB_END, NB_HIDDEN_BEGIN, NB_HIDDEN_END) if m in text]
    for cell in nb.cells:
        sol = parse_solution_cell(cell.source) if cell.cell_type == "code" else None
        if sol is None:
            continue
        ref = SOLUTIONS / sol.exercise / sol.file
        if not ref.exists():
            continue
        region = find_region(ref, sol.name)
        code = [l.strip() for l in region.lines if l.strip() and not l.strip().startswith(region.prefix)]
        shown = {l.strip() for l in cell.source.splitlines()}
        leaks += [f"{sol.target} {sol.name}: `{l}`" for l in code if l in shown]
    return leaks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_release = sub.add_parser("release", help="nbgrader generate_assignment for every unit into notebooks/release")
    p_release.add_argument("units", nargs="*")
    p_release.add_argument("--root", type=Path, default=NOTEBOOKS,
                           help="nbgrader course directory (default notebooks/)")
    p_check = sub.add_parser("check", help="notebooks valid and in sync with solutions/ and their generators")
    p_check.add_argument("units", nargs="*")
    p_gen = sub.add_parser("generate", help="rewrite source notebooks from notebooks/generators/")
    p_gen.add_argument("units", nargs="*")
    p_pre = sub.add_parser("prebuild", help="build in parallel what running these notebooks will build "
                                            "(default: every notebook under notebooks/submitted/)")
    p_pre.add_argument("notebooks", nargs="*", type=Path)
    p_pre.add_argument("--jobs", type=int, default=None, help="builds at a time (default: half the cores)")
    args = parser.parse_args(argv)
    if args.command == "prebuild":
        paths = args.notebooks or sorted((NOTEBOOKS / "submitted").glob("*/*/*.ipynb"))
        if not paths:
            print("no notebooks given, and none under notebooks/submitted/")
            return 1
        results = prebuild(paths, args.jobs)
        failed = [d for d, r in results.items() if not r["ok"]]
        print(f"{len(results) - len(failed)} of {len(results)} built or cached"
              + (f"; {len(failed)} failed (their cells will show the compiler's message)" if failed else ""))
        return 0
    if args.command == "check":
        problems = check(args.units)
        for p in problems:
            print(p)
        print("notebooks: ok" if not problems else f"notebooks: {len(problems)} problem(s)")
        return 1 if problems else 0
    if args.command == "generate":
        for path in generate(args.units):
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    problems = check(args.units)
    if problems:
        print("\n".join(problems))
        print("fix these first (python -m grader.notebooks check)")
        return 1
    for path in release(args.units, args.root):
        print(f"released {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
