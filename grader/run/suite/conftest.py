"""The grading suite for one exercise folder, run by the grader in its own process:

    python -m pytest grader/run/suite --exercise-dir exercises/01_leaky_relu [--results out.json]

Each of the spec's checks is one parametrized test; `test_performance` times the op last.
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from grader import env

env.configure()
env.set_cuda_sync()  # before the warm-up thread creates the CUDA context

# the generated properties that RACECHECK=1 runs (grader.run.grading): every op's fixed small calls, the
# forward on the current stream and the backward through autograd
RACECHECK_PROPERTIES = ("[on the current stream]", "[gradients]")


def _warm_up() -> None:
    """The CUDA context (tenths of a second) and the modules the integrity snapshot watches (so that
    they are in it), made ready beside the collection and the wait for the build instead of after
    them. Joined before the first check: a thread working beside the checks holds the GIL in 5 ms
    slices (importing sympy that way made each small check on the H100 five times slower)."""
    import importlib

    import torch

    from grader.verify.integrity import WATCHED_MODULES

    for name in WATCHED_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if torch.cuda.is_available():
        torch.empty(1, device="cuda")


_warm_up_thread = threading.Thread(target=_warm_up, name="warm-up", daemon=True)
_warm_up_thread.start()

PROFILE_ENV = "COURSE_PROFILE"  # a folder: each grading process's main thread under cProfile, one file per process
_profile = None
if os.environ.get(PROFILE_ENV):
    import cProfile

    _profile = cProfile.Profile()
    _profile.enable()

from grader.run import gate  # noqa: E402
from grader.run.suite import resume  # noqa: E402
from grader import specs  # noqa: E402
from grader.verify.checks import without_cpp_stack  # noqa: E402
from grader.verify.results import ResultsRecorder  # noqa: E402


def pytest_addoption(parser):
    group = parser.getgroup("course grading")
    group.addoption("--exercise-dir", help="the exercise folder to grade")
    group.addoption("--seed", type=int, default=int(os.environ.get("COURSE_SEED", "0") or 0),
                    help="base seed of every random input (printed by the grader; replay with it)")
    group.addoption("--results", help="write each test's outcome here as JSON, as the run goes")
    group.addoption("--judge-outputs", help="save the op's outputs on the judge's calls here (grader.verify.judge)")
    group.addoption("--timed-outputs", help="save sampled elements of timed outputs here (grader.verify.judge)")
    group.addoption("--skip-lost-groups", action="store_true",
                    help="after a group's first failed check, skip its other checks (the group's points and "
                         "reason are decided; a check another group requires still runs)")
    group.addoption("--shard", default="0/1",
                    help="i/n: run every n-th of the selected checks from the i-th (part 0 also the timing): one "
                         "exercise's checks over n processes (grader.run.grading.plan_shards)")
    group.addoption("--first-share", type=float, default=None,
                    help="with --shard: the fraction of the checks part 0 takes (it also records the judge's "
                         "outputs); the other parts share the rest equally (grader.run.grading.first_shares)")


def pytest_configure(config):
    for module in specs.spec_modules():  # by name: importing every spec would cost each run seconds
        config.addinivalue_line("markers", f"{module[:4]}: exercise {module[2:]}")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU")
    config.addinivalue_line("markers", "slow: skipped in the quick edit-grade loop")
    config.addinivalue_line("markers", "huge: allocates more than 2^31 bytes (one such check at a time)")
    config.addinivalue_line("markers", "racecheck: run under compute-sanitizer racecheck by RACECHECK=1 (small cases)")
    results = Path(config.getoption("--results")) if config.getoption("--results") else None
    # a fresh image of a process whose kernel faulted: what the earlier ones recorded (grader/run/suite/resume.py)
    faulted = resume.faulted_before()
    earlier = resume.recorded(results) if results is not None and faulted else None
    if results is not None:
        config.pluginmanager.register(ResultsRecorder(results, config, earlier, faulted), "course-results")
    part, parts = (int(v) for v in config.getoption("--shard").split("/"))
    done = resume.finished(earlier) if earlier else set()
    if parts > 1 or done:
        config.pluginmanager.register(_Shard(part, parts, done, config.getoption("--first-share")), "course-shard")


class _Shard:
    """This process's part of the exercise's checks: every n-th of those -k and -m selected, from the
    i-th (so each part gets checks of every kind), and part 0 the timing too; less those an earlier
    image of this process finished before a fault (`done`, grader/run/suite/resume.py). With `first_share`,
    part 0 takes that fraction of the checks and the others the rest (`deal`)."""

    def __init__(self, part: int, parts: int, done: set[str] = frozenset(), first_share: float | None = None):
        if not 0 <= part < parts:
            raise pytest.UsageError(f"--shard {part}/{parts}: the part must be 0 to {parts - 1}")
        if first_share is not None and not 0.0 <= first_share <= 1.0:
            raise pytest.UsageError(f"--first-share {first_share}: a fraction from 0 to 1")
        self.part, self.parts, self.done, self.first_share = part, parts, done, first_share

    @pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
    def pytest_collection_modifyitems(self, config, items):
        from grader.verify.results import recorded_name

        checks = [it for it in items if it.name != "test_performance"]
        owners = deal(len(checks), self.parts, self.first_share)
        mine = {id(it) for it, owner in zip(checks, owners) if owner == self.part}
        if self.part == 0:
            mine |= {id(it) for it in items if it.name == "test_performance"}
        mine -= {id(it) for it in items if recorded_name(it.nodeid) in self.done}
        dropped = [it for it in items if id(it) not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [it for it in items if id(it) in mine]


def deal(count: int, parts: int, first_share: float | None = None) -> list[int]:
    """The part of each of `count` checks, in order: part 0 `first_share` of them (default: an equal share),
    the others the rest equally; each check to the part furthest behind its share so far (the lowest on a
    tie), so that every part gets checks of every kind: with equal shares, check k goes to part k % parts.
    Every process of an exercise deals the same list alike."""
    first = 1.0 / parts if first_share is None else first_share
    shares = [first] + [(1.0 - first) / (parts - 1)] * (parts - 1) if parts > 1 else [1.0]
    taken = [0] * parts
    owners = []
    for k in range(count):
        owner = max(range(parts), key=lambda i: (round(shares[i] * (k + 1) - taken[i], 9), -i))  # (float ties)
        taken[owner] += 1
        owners.append(owner)
    return owners


_exit_status: list[int] = []
_session: list = []


def pytest_sessionstart(session):
    _session.append(session)


@pytest.hookimpl(trylast=True)  # after the results file has recorded the test (its outcome, its time)
def pytest_runtest_logfinish(nodeid, location):
    """A check whose kernel faulted has just been recorded: go on with the checks left in a fresh process
    (grader/run/suite/resume.py), the planner paths taken so far recorded first."""
    if not resume.lost or resume.attempted or not _session or not resume.allowed():
        return
    session = _session[0]
    if session.shouldfail or session.shouldstop or not session.config.getoption("--results"):
        return
    ids = [it.nodeid for it in session.items]
    if nodeid not in ids or ids.index(nodeid) == len(ids) - 1:
        return  # nothing left to run
    _record_paths(session)
    _restart(session.config, resume.lost[0])


def _restart(config, faulted: str) -> None:
    """resume.restart with pytest's output capture off first: a fixture's setup (the judge's recording)
    runs with the standard streams on pytest's temporary file, which the fresh image would write to."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    resume.restart(faulted)


def _record_paths(session) -> None:
    if os.environ.get("COURSE_PATHS_OUT") and session.config.getoption("--exercise-dir"):
        from grader.verify import paths  # the planner paths the exercise's library took (grader/verify/paths.py)

        try:
            paths.record(Path(session.config.getoption("--exercise-dir")), os.environ["COURSE_PATHS_OUT"])
        except Exception:  # noqa: BLE001: a library the fault left unreadable adds none
            pass


def pytest_sessionfinish(session, exitstatus):
    _exit_status.append(int(exitstatus))
    _record_paths(session)
    if _fp64_work and _fp64_work[0] is not None:
        _fp64_work[0].save(os.environ["COURSE_COUNT_FP64"].replace("{exercise}", _spec(session.config).exercise))


def pytest_terminal_summary(terminalreporter):
    """Where grading time goes, beside pytest's slowest durations: the watch's observation windows."""
    from grader.verify.observe import WATCH

    if WATCH.windows:
        terminalreporter.write_line(f"observation windows: {WATCH.windows}, their profiler sessions "
                                    f"{WATCH.overhead_s:.1f} s beyond the calls they held")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Run by the grader (its results are written after every test), the process ends here, without
    tearing down the CUDA context and the interpreter: a second or two of the edit-grade loop. Not
    under compute-sanitizer, which reports when the process exits normally."""
    _save_profile(config)
    gate.hold_exit()  # after a timing: the exit (the CUDA context's teardown) waits until no timing runs
    if config.getoption("--results") and _exit_status and not os.environ.get("COURSE_SANITIZE"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])


def _save_profile(config) -> None:
    """COURSE_PROFILE=<folder>: this process's profile as <exercise>[.part<i>].prof (docs/performance.md,
    grading time)."""
    if _profile is None:
        return
    _profile.disable()
    part = config.getoption("--shard").split("/")[0]
    name = Path(config.getoption("--exercise-dir") or "suite").resolve().name + ("" if part == "0" else f".part{part}")
    folder = Path(os.environ[PROFILE_ENV])
    folder.mkdir(parents=True, exist_ok=True)
    _profile.dump_stats(folder / f"{name}.prof")


def _spec(config):
    exercise_dir = config.getoption("--exercise-dir")
    if not exercise_dir:
        raise pytest.UsageError("--exercise-dir is required")
    return specs.by_exercise(Path(exercise_dir).resolve().name)


def pytest_generate_tests(metafunc):
    if "check" in metafunc.fixturenames:
        from grader.verify.properties import MEMORY_EDGE, property_checks

        spec = _spec(metafunc.config)
        # a fault the CUDA context does not survive costs every check after it: the checks most likely to
        # fault run last, those past 2^31 elements (a 32-bit offset wraps), then the memory edges
        checks = sorted(spec.checks() + property_checks(spec),
                        key=lambda c: 2 if c.name.endswith(f"[{MEMORY_EDGE}]") else 1 if c.huge else 0)
        metafunc.parametrize("check", checks, ids=[c.name for c in checks])


_math_state: list = []  # the exercise's math state, entered once for the whole process
_fp64_work: list = []  # grader.verify.fp64's counter, when asked for


def pytest_collection_modifyitems(config, items):
    spec = _spec(config)
    if not _math_state:
        from grader.verify import fp64

        _fp64_work.append(fp64.start())
        # one global state for every call of the op, checks and timing alike (Spec.math), set before
        # the integrity snapshot (taken right before the submission is imported), so it holds them
        _math_state.append(spec.math())
        _math_state[0].__enter__()
    for item in items:
        item.add_marker(getattr(pytest.mark, spec.marker))
        check = getattr(item, "callspec", None) and item.callspec.params.get("check")
        if check is None or check.needs_gpu:
            item.add_marker(pytest.mark.gpu)
        if (check is not None and check.slow) or item.name == "test_performance":
            item.add_marker(pytest.mark.slow)
        if check is not None and check.huge:
            item.add_marker(pytest.mark.huge)
        if check is not None and (check.name.endswith(RACECHECK_PROPERTIES) or "racecheck" in check.name):
            item.add_marker(pytest.mark.racecheck)


@pytest.fixture(scope="session")
def spec(request) -> specs.Spec:
    return _spec(request.config)


def _load(exercise_dir: Path, spec: specs.Spec):
    try:
        return specs.import_exercise_module(exercise_dir, spec), None
    except Exception as e:  # a build error or an exception in the student's Python
        return None, f"{type(e).__name__}: {without_cpp_stack(e)}"


def _start_watch() -> None:
    """The watch, on before submitted code runs and to the end: every call of the op, checked, observed
    or timed, in one state it can query (grader.verify.observe)."""
    if not os.environ.get("COURSE_SANITIZE"):  # CUPTI and compute-sanitizer cannot share the process
        from grader.verify.observe import WATCH

        WATCH.start()


@pytest.fixture(scope="session")
def built(request) -> dict:
    """Started by the grader beside its builds: wait until they are done (its clock stopped), before
    anything loads the exercise. A failed build ends this process: the grader reports the compiler's
    message itself. The watch starts first: its profiler's one-time set-up (CUPTI) runs beside the
    build instead of in the first check (still before any submitted code runs), once the warm-up
    (the CUDA context) has ended, as it did when the first check started it."""
    _warm_up_thread.join()
    _start_watch()
    result = gate.wait_for_build()
    if not result.get("ok", True):
        pytest.exit("the exercise failed to build (the grader reports why)", returncode=0)
    from grader.verify import sass

    sass.read_by_grader = bool((result.get(SASS_READ) or {}).get("read"))  # before the integrity snapshot
    return result


SASS_READ = "sass"  # grader.run.grading.SASS_READ: the build result's word that the parent read the library


@pytest.fixture(scope="session")
def ctx(request, spec, built) -> specs.Context:
    exercise_dir = Path(request.config.getoption("--exercise-dir")).resolve()
    _start_watch()  # started by `built` already (idempotent)
    gate.cap_gpu_memory()  # this process's share of the GPU, before submitted code allocates any of it
    recorder = request.config.pluginmanager.get_plugin("course-results")
    if recorder is not None:
        recorder.watch()  # the last moment before submitted code runs (grader.verify.integrity)
    module, error = _load(exercise_dir, spec)
    if error:
        pytest.fail(f"could not load {spec.module}: {error}", pytrace=False)
    seed = request.config.getoption("--seed")
    judge_outputs = request.config.getoption("--judge-outputs")
    if judge_outputs:
        _record_judge_outputs(request.config, module, spec, seed, Path(judge_outputs))
        from grader.verify import judge

        last_calls = judge.LastCalls(module, spec, seed, Path(judge_outputs))
        request.config.stash[_LAST_CALLS] = last_calls  # not a plugin: the integrity snapshot holds those
        request.addfinalizer(lambda: _make_last_calls(last_calls))  # where no timing made them
    return specs.Context(module=module, seed=seed, exercise_dir=exercise_dir, kernel_rule=spec.kernel_rule())


@pytest.fixture(scope="session")
def judge_last_calls(request, ctx):
    """Makes the judge's last calls (grader.verify.judge.LastCalls) before the timing's turn on the GPU, for
    test_performance: a fault among them sends the timing to a fresh image of this process
    (grader/run/suite/resume.py). Where that is not allowed (restarts spent, compute-sanitizer, pytest -x),
    or this process records no outputs for the judge (a part after the first), it does nothing: they wait
    for the session's end, after the timing."""
    last_calls, config = request.config.stash.get(_LAST_CALLS, None), request.config

    def before_timing() -> None:
        if last_calls is None or not resume.allowed() or config.getoption("maxfail") or not _cuda():
            return
        faulted = last_calls.make()
        if faulted:
            _restart(config, f"the judge's call {faulted}")
    return before_timing


_LAST_CALLS = pytest.StashKey["judge.LastCalls"]()


def _make_last_calls(last_calls) -> None:
    if _cuda():
        last_calls.make()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _record_judge_outputs(config, module, spec, seed: int, path: Path) -> None:
    """Before any check: the outputs the parent re-checks (grader.verify.judge). A fault there leaves the
    GPU unusable: the process goes on in a fresh one, or, its restarts spent, every check fails naming it."""
    import torch

    from grader.verify import judge
    from grader.verify.checks import cuda_context_lost

    if not torch.cuda.is_available():
        return
    # a fresh image after a fault goes on from the calls the earlier ones recorded (grader/run/suite/resume.py)
    problem = judge.record_outputs(module, spec, seed, path, go_on=bool(resume.faulted_before()))
    if problem and cuda_context_lost(problem):
        # no check has run yet: the fresh image runs them all (not where the first failure ends the run)
        if resume.allowed() and not config.getoption("maxfail"):
            _restart(config, f"the judge's call {problem.split(': ', 1)[0]}")
        pytest.fail(f"not run: a kernel faulted in the judge's call {problem}", pytrace=False)


@pytest.fixture(autouse=True)
def _needs_gpu(request):
    if request.node.get_closest_marker("gpu"):
        import torch

        if not torch.cuda.is_available():
            expected = os.environ.get("COURSE_GPU_EXPECTED")
            if expected is not None:
                # a worker pinned to a GPU it cannot see would otherwise score every class zero
                pytest.fail(f"grader error: this worker was given GPU {expected!r} "
                            f"(CUDA_VISIBLE_DEVICES) but CUDA sees no device", pytrace=False)
            pytest.skip("no CUDA GPU on this machine: GPU checks skipped")
