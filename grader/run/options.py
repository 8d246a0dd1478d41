"""The options of one grading run, as one value: built once from the command line (`python -m grader`,
`python -m grader.classroom.grade`) and passed whole through grading (grader.run.grading), class grading
(grader.classroom.grade) and a Slurm task (grader.classroom.slurm: as JSON, read back by the task), so that an option
cannot be dropped on one path (`make grade SUBMISSIONS=... SLURM=1 STRICT=1` once graded non-strict).
tests/test_options.py sets each field and finds it in the grading process's command line on every path.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

DEFAULT_TIMEOUT = 600  # seconds per exercise's grading process; a hang costs only that exercise
# seconds of a grading process's own time in which no check starts or ends: it is then stopped as hanging
# (a kernel in an endless loop ends the exercise here, not at its whole time limit). The longest single
# check of a solution on the H200 took 7.4 s beside nine other exercises' checks; a T4 is 10-20x slower,
# and a student's first kernels slower again.
DEFAULT_STALL = 300
RACECHECK = "racecheck"  # `sanitize` for compute-sanitizer's racecheck (True: memcheck)


@dataclass(frozen=True)
class GradeOptions:
    seed: int | None = None  # the inputs' seed; None until the command line draws one (a run grades with one)
    timeout: float = DEFAULT_TIMEOUT  # seconds per exercise's grading process
    stall: float = DEFAULT_STALL  # seconds of its own time with no check starting or ending: stopped as hanging
    jobs: int = 1  # builds at once
    keyword: str | None = None  # pytest -k: only the checks it selects
    quick: bool = False  # QUICK=1: no timing, no slow checks
    sanitize: bool | str = False  # SANITIZE=1 (True: memcheck) or RACECHECK=1 ("racecheck")
    parallel: int | None = None  # exercises whose checks run at once; None: grader.run.grading.default_parallel
    strict: bool = False  # a check this GPU cannot run for lack of memory costs its group
    force: bool = False  # class grading: regrade students already graded
    first_failure: bool = False  # stop each grading process at its first failed check (grader.run.mutants)
    # after a group's first failed check, skip its others (the known-wrong suite, whose verdict is which groups
    # are lost and why: the first failure's reason is the group's); checks another group requires still run
    skip_lost_groups: bool = False

    def __post_init__(self):
        if self.sanitize not in (False, True, RACECHECK):
            raise ValueError(f"sanitize must be False, True (memcheck) or {RACECHECK!r}, not {self.sanitize!r}")
        if self.parallel is not None and self.parallel < 1:
            raise ValueError(f"parallel must be at least 1, not {self.parallel}")

    def replace(self, **changes) -> GradeOptions:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        """Plain data (what a Slurm task is given; `from_json` reads it back)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> GradeOptions:
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:  # written by another version of the grader: refuse rather than drop an option
            raise ValueError(f"unknown grading options {sorted(unknown)}")
        return cls(**data)

    @classmethod
    def from_args(cls, args: argparse.Namespace, **given) -> GradeOptions:
        """The options of a parsed command line (either grader's: a flag a parser lacks keeps its
        default); `given` overrides (the seed, once drawn)."""
        a = vars(args)
        sanitize = RACECHECK if a.get("racecheck") else bool(a.get("sanitize", False))
        values = {f.name: a[f.name] for f in dataclasses.fields(cls) if f.name in a and f.name != "sanitize"}
        return cls(**{**values, "sanitize": sanitize, **given})
