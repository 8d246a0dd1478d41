"""The notebooks' runtime: what a unit's notebook imports (`from grader.authoring import notebooks as nb`).

A notebook's kernel code lives in cells that start with a cell magic naming the region of solutions/
it stands for:

    %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_kernel
    // TODO: ... (the task, kept in the student release)
    ### BEGIN SOLUTION
    ... the same code as solutions/01_leaky_relu/leaky_relu.cu's region in leaky_relu_kernel ...
    ### END SOLUTION

`nb.Course(unit)` defines that magic. At run time, `Course.build()` takes the exercise's student copy
(exercises/NN_name, which a student release also has), puts each notebook cell into its region, and
builds that folder with the grader's own build (a namespace per distinct source, so re-running a cell
never collides). The graded cells run the grader's own checks (grader/specs) on the result.

Heavy cells (builds, benchmarks) skip, saying why, under `nbgrader validate` (NBGRADER_EXECUTION=validate)
or without a CUDA GPU. Under `nbgrader autograde` without a GPU a graded cell fails instead: it cannot
award points it has not checked.

The rest of the nbgrader course: grader/authoring/notebook_authoring.py (a unit's notebook from its source),
grader/authoring/notebook_release.py (check and release: `make notebooks`), grader/authoring/notebook_prebuild.py (build
ahead of `nbgrader autograde`), grader/classroom/nbgrader_feedback.py (nbgrader's feedback without hidden tests).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import random
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from grader.env import BUILD_ROOT, REPO
from grader.authoring.regions import BEGIN, COMMENT, END, find_region, replace_regions

SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"

MAGIC = "%%solution"
# nbgrader's delimiters are substrings: any line containing them opens or closes a region.
NB_BEGIN, NB_END = BEGIN, END
NB_HIDDEN_BEGIN, NB_HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
# what nbgrader's ClearSolutions leaves in a Python-kernel notebook's cleared region
NB_STUB_LINES = ("# YOUR CODE HERE", "raise NotImplementedError()")


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
        where = "; in Colab: Runtime > Change runtime type > T4 GPU, then run from the top" if in_colab() else ""
        return f"skipped: no CUDA GPU on this machine (torch.cuda.is_available() is False){where}"
    return None


def in_colab() -> bool:
    """Running in a Google Colab runtime (which sets COLAB_RELEASE_TAG in the kernel's environment)."""
    return bool(os.environ.get("COLAB_RELEASE_TAG")) or "google.colab" in sys.modules


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
        from grader.toolchain import build as course_build
        from grader import specs

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
        from grader import specs

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
        ctx = specs.Context(module=module, seed=self.seed, exercise_dir=Path(module.__file__).parent,
                            kernel_rule=spec.kernel_rule())
        with spec.math():  # the math state the grader checks in (TF32 off, ...), not the notebook's
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
        # as the grader scores it (spec.requires): what failed in an earlier cell blocks this group
        from grader.verify.scoring import required_failed

        states = {g: "passed" if ok else "failed" for (ex, g), ok in self.passed.items() if ex == exercise}
        results = {o.name: o.status for (ex, _), run in self.outcomes.items() if ex == exercise for o in run}
        blocked = [name for name in spec.requires.get(group, ()) if required_failed(name, results, states)]
        if blocked:
            self.passed[(exercise, group)] = False
            raise AssertionError(f"{exercise} {group} counts only once {', '.join(blocked)} passes")

    @staticmethod
    def _run_one(check, ctx) -> CheckOutcome:
        import torch

        from grader.verify.checks import cuda_context_lost, run_check

        try:
            with _quiet():
                failure = run_check(check, ctx)
            if failure is None:
                return CheckOutcome(check.name, "passed")
            if cuda_context_lost(failure):
                failure += " (the CUDA context is now unusable: restart the kernel after fixing the bug)"
            return CheckOutcome(check.name, "failed", failure)
        except BaseException as e:  # pytest.skip() from a check (e.g. not enough GPU memory)
            if type(e).__name__ == "Skipped":
                return CheckOutcome(check.name, "skipped", str(e))
            raise
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def reference_module(self, exercise: str):
        """The reference solution's module, when solutions/ is present (not in a student release)."""
        from grader import specs

        folder = SOLUTIONS / exercise
        if not folder.is_dir():
            return None
        with _quiet():
            return specs.import_exercise_module(folder, specs.by_exercise(exercise))

    def performance(self, exercise: str) -> float | None:
        """Time the op as the grader does; return the performance points earned (nbgrader reads a
        number left as a graded cell's result as partial credit)."""
        from grader import specs
        from grader.verify.speed import measure

        if self._unavailable(f"{exercise} performance"):
            return None
        spec = specs.by_exercise(exercise)
        for group in spec.perf_requires:
            if not self.passed.get((exercise, group)):
                raise AssertionError(f"speed earns points only once `{group}` passes: run its graded cell first")
        module = self.build(exercise)
        ctx = specs.Context(module=module, seed=self.seed, exercise_dir=Path(module.__file__).parent,
                            kernel_rule=spec.kernel_rule())
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

        from grader.verify.timer import L2Flusher, copy_bandwidth, time_fn

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
    raise FileNotFoundError(f"no course repository (with grader/authoring/notebooks.py) at or above {start}")
