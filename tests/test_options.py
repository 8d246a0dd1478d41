"""Every grading option reaches every path: set alone to a value other than its default, it arrives at
the grading process (its pytest command line, its time limit, the gate's parallelism, the builds, the
scoring) through `python -m grader`, `python -m grader.classroom.grade` and a Slurm array task (its options
serialized as submitit would pickle them, and read back by the task). Nothing is built or run: the
sinks are recorded (CPU only, seconds)."""
from __future__ import annotations

import json
import pickle
import shutil
from dataclasses import dataclass, field, fields

import pytest

from grader.classroom import grade as classroom_module
from grader.run import cli
from grader.run import grading as grading_module
from grader.run.options import RACECHECK, GradeOptions
from grader.verify.scoring import score_exercise
from grader.specs import select
from tests.grading import SOLUTIONS

SANITIZER = "/fake/compute-sanitizer"


@dataclass
class Probe:
    """What reached the sinks in one run."""

    build_jobs: list[int] = field(default_factory=list)
    cmds: list[list[str]] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)
    stalls: list[float] = field(default_factory=list)
    parallel: list[int] = field(default_factory=list)
    strict: list[bool] = field(default_factory=list)
    slurm_args: list = field(default_factory=list)


@pytest.fixture
def probe(monkeypatch):
    """Builds, grading processes and their scoring replaced by recorders."""
    p = Probe()

    def start_builds(dirs, jobs, pool, log=print, longest_first=False):
        p.build_jobs.append(jobs)
        futures = {}
        for d in dirs:
            futures[d] = grading_module.Future()
            futures[d].set_result({"ok": True})
        return futures

    def run(jobs, workdir, parallel=1, resident=None, compiling=None, timeout=None, on_finish=None):
        p.parallel.append(parallel)
        p.timeouts.append(timeout)
        p.stalls += [j.stall_s for j in jobs]
        p.cmds += [list(j.cmd) for j in jobs]

    def grading_row(spec, job, workdir, timeout, sanitize=False, seed=None, yardstick=None, device=None,
                    strict=False, library_code=None, references=None):
        p.strict.append(strict)
        return score_exercise(spec, [], "missing", "recorded by tests/test_options.py", strict)

    def run_array(task, students, args, *, opts, folder, done):
        # what submitit does with the task's arguments: pickle them for the job, unpickle them there
        p.slurm_args.append(args)
        task(students, *pickle.loads(pickle.dumps(args)))
        return {}

    monkeypatch.setattr(grading_module, "start_builds", start_builds)
    monkeypatch.setattr(classroom_module, "start_builds", start_builds)
    monkeypatch.setattr(grading_module.gate, "run", run)
    monkeypatch.setattr(grading_module, "grading_row", grading_row)
    monkeypatch.setattr(grading_module, "find_sanitizer", lambda: SANITIZER)
    monkeypatch.setattr(cli, "find_sanitizer", lambda: SANITIZER)
    monkeypatch.setattr(classroom_module, "run_array", run_array)
    return p


def has(cmd: list[str], *seq: str) -> bool:
    return any(cmd[i:i + len(seq)] == list(seq) for i in range(len(cmd)))


# field -> (value, how a run shows it arrived, `python -m grader` flags, `python -m grader.classroom.grade` flags);
# no flags: the option is given only by code on that path (grader.run.mutants' first_failure).
VALUE, ARRIVED, GRADE_FLAGS, CLASS_FLAGS = range(4)
OPTIONS = {
    "seed": (4242, lambda p: p.cmds and all("--seed=4242" in c for c in p.cmds), ["--seed", "4242"], ["--seed", "4242"]),
    "timeout": (123.0, lambda p: p.timeouts and all(t == 123.0 for t in p.timeouts), ["--timeout", "123"],
                ["--timeout", "123"]),
    "stall": (77.0, lambda p: p.stalls and all(t == 77.0 for t in p.stalls), ["--stall", "77"], ["--stall", "77"]),
    "jobs": (97, lambda p: 97 in p.build_jobs, ["--jobs", "97"], ["--jobs", "97"]),  # no default is 97
    "keyword": ("forward", lambda p: p.cmds and all(has(c, "-k", "forward") for c in p.cmds), ["-k", "forward"],
                ["-k", "forward"]),
    "quick": (True, lambda p: p.cmds and all(has(c, "-m", "not slow") and c[0] != SANITIZER for c in p.cmds),
              ["--quick"], None),
    "sanitize": (True, lambda p: p.cmds and all(c[0] == SANITIZER and has(c, "--tool", "memcheck") for c in p.cmds),
                 ["--sanitize"], None),
    "racecheck": (RACECHECK, lambda p: p.cmds and all(has(c, "--tool", "racecheck") for c in p.cmds),
                  ["--racecheck"], None),
    "parallel": (3, lambda p: p.parallel and all(n == 3 for n in p.parallel), ["--parallel", "3"], None),
    "strict": (True, lambda p: p.strict and all(p.strict), ["--strict"], ["--strict"]),
    "force": (True, lambda p: bool(p.cmds), None, ["--force"]),  # shown on a class graded before: graded again
    "first_failure": (True, lambda p: p.cmds and all("-x" in c for c in p.cmds), None, None),
    "skip_lost_groups": (True, lambda p: p.cmds and all("--skip-lost-groups" in c for c in p.cmds), None, None),
}
PATHS = ("grade", "class", "slurm")


def test_the_table_names_every_option():
    assert set(OPTIONS) - {"racecheck"} == {f.name for f in fields(GradeOptions)}


def make_class(tmp_path):
    subs = tmp_path / "class"
    shutil.copytree(SOLUTIONS / "01_leaky_relu", subs / "ann" / "exercises" / "01_leaky_relu")
    return subs, tmp_path / "class.gradebook"


def run_path(path: str, name: str | None, tmp_path, probe: Probe) -> Probe:
    """Grade 01 on `path` with option `name` set (None: every option at its default), through the
    command line where it has a flag on that path, else through the path's function; what reached
    the sinks. A class is first graded with the defaults (recorded apart) where `force` is shown."""
    value, _, grade_flags, class_flags = OPTIONS[name] if name else (None, None, [], [])
    field_name = "sanitize" if name == "racecheck" else name
    if path == "grade":
        if grade_flags is not None:
            assert cli.main(["--target", str(SOLUTIONS), "--ex", "01", "--out", str(tmp_path / "report"),
                             *grade_flags]) in (0, 1)
        else:
            grading_module.grade_target(SOLUTIONS, select(["01"]), GradeOptions(seed=1, **{field_name: value}),
                                        log=lambda *a: None)
        return probe
    subs, out = make_class(tmp_path)
    slurm = ["--slurm", "--local"] if path == "slurm" else []
    if name == "force":  # graded once already: only --force grades again
        assert classroom_module.main([str(subs), "--ex", "01", "--seed", "1", *slurm]) == 0
        for f in fields(Probe):
            getattr(probe, f.name).clear()
    if class_flags is not None:
        seed = [] if name == "seed" else ["--seed", "1"]
        assert classroom_module.main([str(subs), "--ex", "01", *seed, *slurm, *class_flags]) == 0
    else:
        options = GradeOptions(seed=1, **{field_name: value})
        if path == "slurm":
            classroom_module.grade_class_on_slurm(subs, select(["01"]), options, out=out,
                                                  opts=classroom_module.SlurmOptions(cluster="local"))
        else:
            classroom_module.grade_class(subs, select(["01"]), options, out=out)
    if path == "slurm":  # the task was given its options as plain data (JSON), this one among them
        (args,) = probe.slurm_args
        given = GradeOptions.from_json(json.loads(json.dumps(args[-1])))
        assert name is None or getattr(given, field_name) == value, given
    return probe


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(OPTIONS))
def test_every_option_reaches_every_path(path, name, tmp_path, probe):
    if path == "grade" and name == "force":
        pytest.skip("`python -m grader` grades one folder, every time: no earlier grade to force")
    arrived = OPTIONS[name][ARRIVED]
    assert arrived(run_path(path, name, tmp_path, probe)), probe


@pytest.mark.parametrize("path", PATHS)
def test_no_option_shows_at_its_default(path, tmp_path, probe):
    """The probes can fail: with every option at its default, none of them finds its value."""
    run_path(path, None, tmp_path, probe)
    assert probe.cmds, probe
    shown = {name for name, o in OPTIONS.items() if name != "force" and o[ARRIVED](probe)}
    assert not shown, (shown, probe)


def test_options_round_trip_and_refuse_unknown_fields():
    options = GradeOptions(seed=3, timeout=9.5, stall=4.5, jobs=2, keyword="x", quick=True, sanitize=RACECHECK, parallel=2,
                           strict=True, force=True, first_failure=True)
    assert GradeOptions.from_json(json.loads(json.dumps(options.to_json()))) == options
    with pytest.raises(ValueError, match="unknown grading options"):
        GradeOptions.from_json({**options.to_json(), "level": "open"})
    with pytest.raises(ValueError, match="sanitize"):
        GradeOptions(sanitize="memcheck")
