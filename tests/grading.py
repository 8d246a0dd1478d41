"""Shared by the tests that build and grade real extensions: one home for these helpers."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader import env
from grader import specs as spec
from grader.classroom.grade import worker_devices
from grader.run.grading import grade_target, rounds
from grader.toolchain.build import FolderLock
from grader.run.options import GradeOptions
from grader.run.report import table
from grader.verify.outcomes import ExerciseRow
from tests.known_wrong import Variant

SOLUTIONS = env.REPO / "solutions"
EXERCISES = env.REPO / "exercises"
JOBS = max(1, (os.cpu_count() or 2) // 2)
# `make test EX="01 02"` narrows the tests that build and grade to those exercises
ONLY = os.environ.get("EX", "").replace(",", " ").split()


def grader_import_graph() -> dict[str, set[str]]:
    """grader's modules, named below grader (`run.cli`, `classroom.slurm`, `env`, `specs.ex01_leaky_relu`),
    and the grader modules each imports, anywhere in it (functions too)."""
    import ast

    root = env.REPO / "grader"
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts and parts != ("__main__",):
            modules[".".join(parts)] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "grader":
                base = node.module.split(".")[1:]
                for a in node.names:
                    inner = ".".join([*base, a.name])
                    found.add(inner if inner in modules else ".".join(base))
            elif isinstance(node, ast.Import):
                found |= {".".join(a.name.split(".")[1:]) for a in node.names if a.name.startswith("grader.")}
        graph[name] = found & set(modules) - {name}
    return graph


def selected(names=None) -> list:
    return spec.select(names or ONLY)


def exercise_folders(root: Path) -> list[Path]:
    names = {s.exercise for s in selected()}
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name in names)


def quiet(*_args, **_kwargs):
    pass


def pythonpath_outside_the_checkout() -> str:
    """PYTHONPATH without its entries in this checkout: for a process that must not import the
    grader from here, yet still reach packages installed elsewhere through PYTHONPATH (on the GPU
    machine, Jupyter's and submitit's)."""
    return os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                           if p and not Path(p).resolve().is_relative_to(env.REPO))


def grade(target: Path, exercises=None, *, timeout: float = 900, keyword: str | None = None, seed: int = 1234,
          sanitize: bool | str = False, parallel: int = 1, stall: float | None = None, device: str | None = None,
          skip_lost_groups: bool = False):
    """`device` (a CUDA_VISIBLE_DEVICES entry) pins the grading processes to one GPU; None: CUDA's first.
    `skip_lost_groups`: a group's checks after its first failure are skipped (GradeOptions): the known-wrong
    variants', whose verdict is which groups are lost and the first failure's reason."""
    specs = selected(exercises)
    options = GradeOptions(seed=seed, timeout=timeout, jobs=JOBS, keyword=keyword, sanitize=sanitize, parallel=parallel,
                           skip_lost_groups=skip_lost_groups, **({"stall": stall} if stall is not None else {}))
    return {row.exercise: row for row in grade_target(target, specs, options, device=device, log=quiet)}


def explain(rows) -> str:
    return table(list(rows.values() if isinstance(rows, dict) else rows))


# The known-wrong variants are graded in reusable slot folders, VARIANT_SLOTS/<slot>/<exercise>: each
# keeps its build folder (keyed by the slot's path, grader.toolchain.build.build_dir_for) from one
# variant to the next and from one run to the next, and a variant is written over the slot's last one
# rewriting only the files whose text differs (grader.run.mutants.write_slot), so ninja recompiles
# only those: a .py variant nothing, a .cpp or one-.cu variant one unit, not the whole exercise.
VARIANT_SLOTS = env.BUILD_ROOT / "variant-slots"
# Builds at once while slots are graded: one a core, each ninja with one job (most are one unit).
BUILDS = os.cpu_count() or 2
# Slots in all (each exercise gets its share): a slot alternates building its next variant and grading
# it, so with twice JOBS slots about JOBS grade at once (as many processes as before share the GPU)
# while the others compile, and every core has a compile or a grading process to run. More slots
# would cost each one a first build from scratch on a fresh machine (the solutions' full build).
LANES = 2 * JOBS
_KINDS = {".py": 0, ".cpp": 1, ".h": 2, ".cuh": 2, ".cu": 3}


def slot_plan(variants: list[Variant], lanes: int = LANES, root: Path | None = None) -> list[tuple[list[Path], list[Variant]]]:
    """Per exercise, its slot folders (root/<slot>/<exercise>) and its variants in the order its slots
    take them. Each exercise gets slots in proportion to its variants (at least one, at most one a
    variant); its variants are sorted by the files they change (.py-only first, then .cpp, then each
    .cu file), so that a slot's next variant mostly changes the same file as its last: the build
    recompiles that file alone (a .py-only variant nothing)."""
    root = root or VARIANT_SLOTS
    by_exercise: dict[str, list[Variant]] = {}
    for v in variants:
        by_exercise.setdefault(v.exercise, []).append(v)
    plan = []
    for x, vs in by_exercise.items():
        vs = sorted(vs, key=lambda v: (max(_KINDS.get(Path(f).suffix, 3) for f in v.edits), sorted(v.edits), v.name))
        width = min(len(vs), max(1, round(lanes * len(vs) / len(variants))))
        plan.append(([root / f"s{w:02d}" / x for w in range(width)], vs))
    return plan


def grade_in_slots(variants: list[Variant], grade_one, *, lanes: int = LANES, root: Path | None = None,
                   log=quiet, devices: list[str | None] | None = None) -> dict:
    """Each variant written into a slot of its exercise (slot_plan), built there, then
    `grade_one(variant, target, device)` (target: the slot's parent folder, which holds the slot as <exercise>;
    device: the slot's GPU, the slots dealt over `devices` in turn, default a class grading's workers: one per
    visible GPU, grader.classroom.grade.worker_devices) with at most
    JOBS gradings at once. A slot takes its exercise's next variant only once its last
    one is graded, so no grading sees another variant's files; the slots run side by side, each at its
    own pace (a slow or hanging variant holds up its slot alone, not a round). Returns variant id ->
    grade_one's result."""
    from collections import deque

    from grader.run.grading import start_builds
    from grader.toolchain.build import write_slot

    root = root or VARIANT_SLOTS
    devices = devices or worker_devices(None)
    plan = slot_plan(variants, lanes, root)
    count = sum(len(folders) for folders, _ in plan)
    # JOBS and the lanes follow the cores, which a machine of several GPUs has in proportion
    gradings = threading.BoundedSemaphore(JOBS)
    found: dict = {}
    # one run at a time in a slots folder: two pytest runs of one checkout would write each other's slots
    with FolderLock(root, ".lock"), ThreadPoolExecutor(max_workers=BUILDS, thread_name_prefix="build") as builder:
        # ninja's jobs in one build: the cores shared by the builds that can run at once
        at_once = max(1, min(count, BUILDS))

        def run(folder: Path, queue: deque, device: str | None) -> None:
            while True:
                try:
                    v = queue.popleft()  # atomic: the exercise's slots share its queue
                except IndexError:
                    return
                write_slot(folder, v.source, v.texts())
                start_builds([folder], at_once, builder, log=log)[folder].result()
                with gradings:
                    found[v.id] = grade_one(v, folder.parent, device)

        with ThreadPoolExecutor(max_workers=max(1, count), thread_name_prefix="slot") as slots:
            futures = []
            for folders, vs in plan:
                queue = deque(vs)
                for folder in folders:  # an exercise's slots over every GPU too
                    futures.append(slots.submit(run, folder, queue, devices[len(futures) % len(devices)]))
            for f in futures:
                f.result()
    return found


def grade_variants(variants: list[Variant], keyword: str | None, timeout: float = 600, *,
                   root: Path | None = None, on_row=None) -> dict[str, ExerciseRow]:
    """Grade each variant (correctness only with a keyword that leaves out the timing: several
    processes share the GPU) in reusable slot folders (grade_in_slots). Returns variant id -> its
    exercise's row, the same row whichever slot it used; `on_row(variant, row)` is called as each
    row arrives (a run cut short keeps what it did with the rows before)."""
    def one(v: Variant, target: Path, device: str | None) -> dict:
        row = grade(target, [v.exercise], timeout=timeout, keyword=keyword, device=device,
                    skip_lost_groups=True)[v.exercise]
        if on_row is not None:
            on_row(v, row)
        return row

    return grade_in_slots(variants, one, root=root)


def grade_variants_timed(variants: list[Variant], timeout: float = 900, *, root: Path | None = None,
                         devices: list[str | None] | None = None, on_row=None) -> dict[str, ExerciseRow]:
    """A full grade, timing included, of variants whose fault shows only in the timed part: in rounds,
    one target folder holding one variant of each exercise of the round (written over the last round's,
    only the files that differ: grader.run.mutants.write_slot), its exercises graded at once (each timing
    alone on its GPU, none beside a build). The rounds are dealt over `devices` (default one per visible GPU,
    worker_devices), each GPU grading its share one round after another in its own folder (root/timed-<gpu>).
    `on_row(variant, row)` is called as each round's rows arrive."""
    from grader.toolchain.build import write_slot

    root = root or VARIANT_SLOTS
    devices = list(dict.fromkeys(devices or worker_devices(None)))  # without a GPU: one None, one folder
    batches = rounds(variants, lambda v: v.exercise)
    found = {}

    def run(device: str | None, mine: list[list[Variant]]) -> None:
        folder = root / ("timed" if device is None else f"timed-{device}")
        for batch in mine:
            for v in batch:
                write_slot(folder / v.exercise, v.source, v.texts())
            rows = grade(folder, [v.exercise for v in batch], timeout=timeout, parallel=JOBS, device=device,
                         skip_lost_groups=True)
            found.update({v.id: rows[v.exercise] for v in batch})
            for v in batch if on_row is not None else []:
                on_row(v, rows[v.exercise])

    with FolderLock(root, ".lock"), ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="timed") as pool:
        futures = [pool.submit(run, d, batches[i::len(devices)]) for i, d in enumerate(devices)]
        for f in futures:
            f.result()
    return found


def check_variant(v: Variant, row: dict, ignore: set[str] = frozenset()) -> None:
    """The variant lost exactly the groups it should, for the reason it should."""
    assert row.status == v.status or (v.status == "graded" and row.status == "graded"), explain([row])
    lost, kept = [], []
    for group, g in row.groups.items():
        if group in ignore:
            continue
        if group in v.loses:
            assert g.points == 0, f"{v.id}: {group} should lose its points\n{explain([row])}"
            lost.append(g.reason)
        elif group in v.partial:
            assert 0 < g.points < g.max, f"{v.id}: {group} should earn part of its points\n{explain([row])}"
            lost.append(g.reason)
        elif v.keeps is None or group in v.keeps:
            assert g.points == g.max, f"{v.id}: {group} should keep its points\n{explain([row])}"
    if v.reason:
        text = " ".join(lost) + " " + (row.error or "")
        reasons = (v.reason,) if isinstance(v.reason, str) else v.reason
        assert any(r in text for r in reasons), f"{v.id}: expected {' or '.join(map(repr, reasons))} among the reasons\n{explain([row])}"


def level_tree(level: str) -> Path:
    """The student copies of every exercise at hint level `level`, generated under .build/
    (`goal`: .build/hints-goal/exercises/, `open`: .build/level-open/exercises/): builds there are
    cached by source hash, so a second run compiles nothing. The tree is replaced only when the
    generator writes other files (under a lock): test files on other pytest-xdist workers may be
    building from it."""
    import filecmp
    import shutil
    import tempfile

    from grader.authoring import stubs

    base = env.BUILD_ROOT / ("hints-goal" if level == "goal" else f"level-{level}")
    root = base / "exercises"
    with FolderLock(base, ".tree.lock"):
        fresh = Path(tempfile.mkdtemp(prefix=".new-", dir=base)) / "exercises"  # the generator writes the tree's name
        written = {f.relative_to(fresh) for f in stubs.generate(SOLUTIONS, fresh, level)}
        same = (root.is_dir() and {f.relative_to(root) for f in root.rglob("*") if f.is_file()} == written
                and all(filecmp.cmp(fresh / f, root / f, shallow=False) for f in written))
        if not same:
            if root.exists():
                shutil.rmtree(root)
            fresh.rename(root)
        shutil.rmtree(fresh.parent)
    return root


def kernel_source(folder: Path) -> str:
    """An exercise's kernel code as one text: its .cuh and .cu files in name order (05's are one file a
    version), for the tests that read a kernel's constants and lines wherever the folder keeps them."""
    return "\n".join(p.read_text() for p in sorted(folder.iterdir()) if p.suffix in (".cu", ".cuh"))
