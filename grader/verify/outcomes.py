"""The grader's results as types: one test's outcome (`TestOutcome`), one group's score (`GroupScore`)
and one exercise's row of the report (`ExerciseRow`).

They are converted to and from JSON at the files' edges only (the results file a grading process
writes, report.json, a class's gradebook.json), and `to_json()` writes exactly the dicts the grader
has always written, key for key and in the same order, so the files do not change: the gradebook,
nbgrader's feedback, scripts/compare_grades.py and scripts/gpu_check.sh read them. A key a field
leaves out when it is None (`huge`, `seconds`, `passed`, `log` ...) is one that only some writers
give. Keys this version does not know (a file from another version of the grader) are kept, in
`extra`, and written back after the known ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args

Outcome = Literal["passed", "failed", "skipped", "not run"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
RAN: tuple[str, ...] = ("passed", "failed")  # outcomes of a test that ran to its verdict
UNFINISHED: tuple[str, ...] = ("skipped", "not run")

# The status of a row for a student the grader itself failed on (grader.classroom.gradebook.failed_rows):
# such a row has never carried the "performance" key
GRADER_ERROR = "grader error"


def _to_json(obj, omit_none: tuple[str, ...], omit: tuple[str, ...] = ()) -> dict:
    """The dataclass's fields as a dict in field order, without `extra` (written last), the fields of
    `omit`, and those of `omit_none` that are None."""
    out = {}
    for f in fields(obj):
        if f.name == "extra" or f.name in omit:
            continue
        value = getattr(obj, f.name)
        if value is None and f.name in omit_none:
            continue
        out[f.name] = value
    out.update(obj.extra)
    return out


def _from_json(cls, data: dict, **convert):
    """An instance of `cls` from its dict: the keys that are its fields (each in `convert` through its
    function), the others kept in `extra`."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}.from_json needs a dict, not {type(data).__name__}")
    names = {f.name for f in fields(cls)} - {"extra"}
    known = {k: convert[k](v) if k in convert else v for k, v in data.items() if k in names}
    return cls(**known, extra={k: v for k, v in data.items() if k not in names})


@dataclass(frozen=True)
class TestOutcome:
    """One graded test as the results file records it: a check (`forward[float32-257]`), the timing
    (`performance`) or one of the judge's re-checks (`judge: ...`)."""

    __test__ = False  # not a pytest test class, despite its name

    name: str
    group: str | None
    outcome: Outcome
    reason: str = ""
    properties: dict[str, Any] = field(default_factory=dict)  # pytest's user properties: the timing's raw numbers
    huge: bool | None = None  # a check of more than 2^31 bytes (run alone); the checks collected only
    seconds: float | None = None  # setup, call and teardown, once it ran
    cpu_seconds: float | None = None  # the process's CPU time (all its threads) over those: far below `seconds`, it waited
    gpu_peak_mib: int | None = None  # the GPU memory PyTorch held at most during it, where CUDA was started
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"a test's outcome is one of {', '.join(OUTCOMES)}, not {self.outcome!r} ({self.name})")

    @property
    def ran(self) -> bool:
        return self.outcome in RAN

    def with_outcome(self, outcome: Outcome, reason: str) -> TestOutcome:
        return replace(self, outcome=outcome, reason=reason)

    def to_json(self) -> dict:
        return _to_json(self, ("huge", "seconds", "cpu_seconds", "gpu_peak_mib"))

    @classmethod
    def from_json(cls, data: dict) -> TestOutcome:
        return _from_json(cls, data)


@dataclass(frozen=True)
class GroupScore:
    """A scored group of an exercise's row: its points of `max`, its state (passed, failed, partial,
    skipped, not run; or the row's status when the exercise was not graded) and why not passed."""

    points: float
    max: float
    state: str
    reason: str = ""
    passed: int | None = None  # tests of the group that passed, of `total` (a graded row only)
    total: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return _to_json(self, ("passed", "total"))

    @classmethod
    def from_json(cls, data: dict) -> GroupScore:
        return _from_json(cls, data)


@dataclass(frozen=True)
class ExerciseRow:
    """One exercise's row of the report (grader.verify.scoring.score_exercise), and what the run
    added to it: the grading process's log, how the build went, the compiler's resource report."""

    exercise: str
    title: str
    status: str  # graded, missing, build failed, timed out, crashed, error, tampered, memory errors, grader error
    error: str
    points: float
    max_points: float
    groups: dict[str, GroupScore] = field(default_factory=dict)
    tests: tuple[TestOutcome, ...] = ()
    performance: dict[str, Any] | None = None  # the timing's numbers beside the yardstick's (grader.verify.speed)
    not_run: tuple[str, ...] | None = None  # `check: why` for each check this machine could not run (graded rows)
    passed: int | None = None  # tests passed of total_tests (graded rows)
    total_tests: int | None = None
    log: str | None = None  # the tail of the grading process's output (grader.run.grading.grading_row)
    build: dict[str, Any] | None = None  # {"cached", "wall_s"} where the folder exists
    resources: dict[str, Any] | None = None  # grader.run.resources.exercise_report, for a built exercise
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def graded(self) -> bool:
        return self.status == "graded"

    def to_json(self) -> dict:
        out = _to_json(self, ("not_run", "passed", "total_tests", "log", "build", "resources"),
                       omit=("performance",) if self.status == GRADER_ERROR and self.performance is None else ())
        out["groups"] = {g: s.to_json() for g, s in self.groups.items()}
        out["tests"] = [t.to_json() for t in self.tests]
        if self.not_run is not None:
            out["not_run"] = list(self.not_run)
        return out

    @classmethod
    def from_json(cls, data: dict) -> ExerciseRow:
        return _from_json(cls, data, groups=lambda gs: {g: GroupScore.from_json(s) for g, s in gs.items()},
                          tests=lambda ts: tuple(TestOutcome.from_json(t) for t in ts),
                          not_run=lambda nr: None if nr is None else tuple(nr))


def rows_to_json(rows) -> list[dict]:
    return [r.to_json() for r in rows]


def rows_from_json(rows) -> list[ExerciseRow]:
    return [ExerciseRow.from_json(r) for r in rows]
