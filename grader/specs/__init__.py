"""The exercises' specs: one module per exercise, `exNN_name.py`, each defining SPEC (shared spec code
beside them), and their registry: which exercises there are, choosing some by name, importing
their specs (each imports torch) and an exercise folder's Python wrapper. The vocabulary the specs
are written in (Spec, Check, AuditCall, Context, ...) is grader.verify.spec's, re-exported here so
that one import serves the registry's users."""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import pkgutil
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Sequence

# the vocabulary (see above)
from grader.verify.spec import (PERFORMANCE, Check, CheckList, Benchmark, Edge, values, EXACT_ZEROS, NEGATIVE, ZERO,
                                SIGNS, frozen_edge, ModuleOptions, AuditCall, audit_seed, audit_randn, random_shape,
                                Spec, derived_seed, Context, conv_smallest_input, conv_padding_edges)  # noqa: F401

# spec module -> the error that stopped it from loading; its exercise cannot be graded, the rest can
SPEC_ERRORS: dict[str, str] = {}


def spec_modules() -> list[str]:
    """`ex01_leaky_relu`, ...: one module per exercise, named after it, listed without importing any."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.name.startswith("ex"))


def _load(module_names: Sequence[str]) -> list[Spec]:
    specs = []
    for name in module_names:
        try:
            specs.append(importlib.import_module(f"grader.specs.{name}").SPEC)
        except Exception as e:
            SPEC_ERRORS[name] = f"{type(e).__name__}: {e}"
    return sorted(specs, key=lambda s: s.exercise)


def all_specs() -> list[Spec]:
    return _load(spec_modules())


def _matches(name: str, exercise: str) -> bool:
    number, short = exercise.split("_", 1)
    return name in (exercise, number, short) or (name.isdigit() and int(name) == int(number))


def select_modules(names: Sequence[str] | None) -> list[str]:
    """The spec modules matching `names` (`01`, `1`, `01_leaky_relu`, `leaky_relu`), all when empty,
    without importing any. A module is named after its exercise: `ex` + the folder's name."""
    modules = spec_modules()
    if not names:
        return modules
    chosen: list[str] = []
    for name in names:
        matches = [m for m in modules if _matches(name, m[2:])]
        if not matches:
            known = ", ".join(m[2:] for m in modules)
            raise SystemExit(f"no exercise called {name!r}; known: {known}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def select(names: Sequence[str] | None) -> list[Spec]:
    """Specs matching `names` (`01`, `1`, `01_leaky_relu`, `leaky_relu`); all when empty. Only the
    chosen exercises' spec modules are imported (each imports torch and its helpers)."""
    chosen = select_modules(names)
    loaded = {s.exercise: s for s in _load(chosen)}
    return [loaded[m[2:]] for m in chosen if m[2:] in loaded]


class Selection:
    """Chosen exercises: their folder names at once (from their spec modules' names), their specs
    once imported. Importing a spec imports torch (seconds), so `Selection.start` does it in a
    background thread while the caller starts builds and grading processes, which need only names."""

    def __init__(self, modules: Sequence[str], specs: Sequence[Spec] | None = None):
        self.exercises = [m[2:] for m in modules]
        self._modules = list(modules)
        self._specs = None if specs is None else {s.exercise: s for s in specs}
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, names: Sequence[str] | None) -> "Selection":
        """The exercises matching `names` (as `select`), their specs importing in the background."""
        chosen = cls(select_modules(names))
        chosen._thread = threading.Thread(target=chosen._load, name="import specs", daemon=True)
        chosen._thread.start()
        return chosen

    @classmethod
    def of(cls, specs: Sequence[Spec]) -> "Selection":
        return cls([f"ex{s.exercise}" for s in specs], specs)

    def _load(self) -> None:
        loaded = {}
        try:
            loaded = {s.exercise: s for s in _load(self._modules)}
        finally:
            self._specs = loaded

    def specs(self) -> dict[str, Spec]:
        """Exercise -> its spec, for those whose spec loaded (the others are in SPEC_ERRORS)."""
        if self._thread is not None:
            self._thread.join()
        return self._specs


def by_exercise(exercise: str) -> Spec:
    return select([exercise])[0]


@functools.lru_cache(maxsize=None)  # a class's grade asks once per submission; the answer is the spec's
def capability_gated_kernels(exercise: str) -> dict[str, tuple[int, int]]:
    """The kernels of an exercise (a folder name; {} for a folder no spec is named after) that only
    its calls needing a compute capability run (the tensor-core versions'), each with that
    capability: the launchers refuse those versions below it, so a build for an older architecture
    compiles these kernels but never launches them."""
    if exercise not in {m[2:] for m in spec_modules()}:
        return {}
    import torch  # (the specs import it anyway; a folder no spec names needs none)

    spec = by_exercise(exercise)
    gated: dict[str, tuple[int, int]] = {}
    everywhere: set[str] = set()
    for call in spec.audit_calls("cpu", torch.float64):
        for name in getattr(call.kernels or spec.kernel_rule(), "names", ()) or ():
            if call.needs_capability:  # launched wherever any of its calls runs: the least capability
                cc = tuple(call.needs_capability)
                gated[name] = min(gated.get(name, cc), cc)
            else:
                everywhere.add(name)
    return {name: cc for name, cc in gated.items() if name not in everywhere}


def import_exercise_module(exercise_dir: Path, spec: Spec) -> ModuleType:
    """Import an exercise folder's Python wrapper under a name unique to that folder."""
    path = Path(exercise_dir) / spec.module
    name = f"course_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
