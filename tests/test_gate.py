"""Concurrent grading (grader.run.gate) with real processes: small scripts that do what a grading
process does (checks, then a timed section behind `wait_for_gpu`, a check under the lock) and log
when each part starts and ends. No GPU needed."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from grader import env
from grader.run import gate
from grader.verify.results import write_json_atomic

CHILD = """
import sys, time
from grader.run import gate

name, log, checks_s, huge_s, timed_s = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:6])
startup_s = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0  # a grading process's torch and CUDA
exit_s = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0  # its CUDA context's teardown as it exits

def mark(event):
    with open(log, "a") as f:
        f.write(f"{name} {event} {time.monotonic()}\\n")

mark("start")
time.sleep(startup_s)
mark("up")
gate.wait_for_build()
mark("checks-start")
time.sleep(checks_s)
if huge_s:
    with gate.one_at_a_time(True):
        mark("huge-start")
        time.sleep(huge_s)
        mark("huge-end")
mark("checks-end")
told = gate.wait_for_gpu()
with open(f"{log}.{name}.told", "w") as f:
    f.write(told)
mark("timed-start")
time.sleep(timed_s)
mark("timed-end")
gate.timing_over()
gate.hold_exit()
mark("exit-start")
time.sleep(exit_s)
mark("exit-end")
"""
HANG = 3600.0


def _run(tmp_path: Path, plan: dict[str, tuple[float, ...]], *, parallel: int, timeout: float,
         builds: dict[str, float] | None = None, resident: int | None = None, light: frozenset = frozenset(),
         compiling=None, stop_compilers: bool = False, may_queue: bool = False, last: dict | None = None):
    """plan: name -> (seconds of checks, of a check under the lock, of the timed section[, of its start-up[,
    of its exit]]); builds:
    name -> seconds until the parent says that job's build is done (it is held until then); last: name ->
    its go_text (a `last` job)."""
    script, log, work = tmp_path / "child.py", tmp_path / "events.log", tmp_path / "work"
    script.write_text(CHILD)
    work.mkdir()
    jobs, timers = [], []
    for name, times in plan.items():
        child_env = dict(os.environ, PYTHONPATH=str(env.REPO))
        job = gate.Job(name, [sys.executable, str(script), name, str(log), *map(str, times)], child_env, env.REPO,
                       light=name in light, may_queue=may_queue, last=name in (last or {}),
                       go_text=(last or {}).get(name))
        if builds and name in builds:
            result = work / f"{name}.build.json"
            job.env[gate.BUILD_ENV], job.held = str(result), True

            def built(job=job, result=result):
                with open(log, "a") as f:  # first: the job's process may read the result and log at once
                    f.write(f"{job.name} built-end {time.monotonic()}\n")
                write_json_atomic(result, {"ok": True})  # as the grader does: a half-written file is never read
                job.held = False

            timers.append(threading.Timer(builds[name], built))
        jobs.append(job)
    start = time.monotonic()
    for t in timers:
        t.start()
    gate.run(jobs, work, parallel=parallel, timeout=timeout, resident=resident, compiling=compiling,
             stop_compilers=stop_compilers)
    wall = time.monotonic() - start
    spans: dict[tuple[str, str], list[float]] = {}
    for line in log.read_text().splitlines():
        name, event, t = line.split()
        part, edge = event.rsplit("-", 1) if "-" in event else (event, "start")
        spans.setdefault((name, part), [0.0, float("inf")])[0 if edge == "start" else 1] = float(t)
    return {j.name: j for j in jobs}, spans, wall


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_no_timing_overlaps_another_process_s_checks_or_timing(tmp_path):
    plan = {"a": (0.8, 0, 0.3), "b": (0.1, 0, 0.3), "c": (0.4, 0, 0.3), "d": (1.2, 0, 0.3), "e": (0.2, 0, 0.3)}
    jobs, spans, _ = _run(tmp_path, plan, parallel=2, timeout=60)
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    for name in plan:
        timed = spans[(name, "timed")]
        for other in plan:
            if other != name:
                assert not _overlap(timed, spans[(other, "checks")]), f"{name}'s timing overlaps {other}'s checks"
                assert not _overlap(timed, spans[(other, "timed")]), f"{name}'s timing overlaps {other}'s"
    checks = [spans[(n, "checks")] for n in plan]
    assert any(_overlap(x, y) for i, x in enumerate(checks) for y in checks[i + 1:]), "no checks ran at once"


def test_no_more_processes_alive_than_resident(tmp_path):
    """A process done with its checks waits for its timing holding GPU memory (its CUDA context):
    `resident` bounds how many are alive, waiting or not, while checks still run `parallel` at once."""
    plan = {name: (0.3, 0, 0.3) for name in "abcdef"}
    jobs, spans, _ = _run(tmp_path, plan, parallel=2, timeout=60, resident=3)
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    alive = {n: (spans[(n, "start")][0], spans[(n, "exit")][1]) for n in plan}
    edges = sorted(t for span in alive.values() for t in span)
    most = max(sum(a <= t < b for a, b in alive.values()) for t in edges)
    assert most == 3, f"{most} processes alive at once, resident=3"
    # each process's timing, alone on the GPU, is counted as such (0.3 s slept after its go)
    assert all(0.25 <= j.timed_s < j.wall_s for j in jobs.values()), {n: j.timed_s for n, j in jobs.items()}
    checks = [spans[(n, "checks")] for n in plan]
    assert any(_overlap(x, y) for i, x in enumerate(checks) for y in checks[i + 1:]), "no checks ran at once"


@pytest.mark.parametrize("resident", [10, 3])
def test_processes_past_the_slots_start_up_beside_the_checks_and_begin_theirs_as_a_slot_frees(tmp_path, resident):
    """A process that waits for its build before its checks (a grading process) may start ahead of its slot
    where the GPU's memory holds it (`resident` known): its start-up (torch, CUDA: here 0.6 s) runs beside the
    others' checks, and its checks begin as soon as a slot frees, never more than `parallel` at once nor more
    than `resident` processes alive; its wait for the slot stops its clock."""
    plan = {name: (0.8, 0, 0.1, 0.6) for name in "abcde"}
    jobs, spans, wall = _run(tmp_path, plan, parallel=2, timeout=60, resident=resident, may_queue=True)
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    checks = {n: spans[(n, "checks")] for n in plan}
    edges = sorted(t for span in checks.values() for t in span)
    assert max(sum(a <= t < b for a, b in checks.values()) for t in edges) == 2, "more checks at once than slots"
    alive = {n: (spans[(n, "start")][0], spans[(n, "timed")][1]) for n in plan}
    edges = sorted(t for span in alive.values() for t in span)
    most = max(sum(a <= t < b for a, b in alive.values()) for t in edges)
    assert most <= resident, f"{most} processes alive at once, resident={resident}"
    first_end = min(checks["a"][1], checks["b"][1])
    assert spans[("c", "up")][0] <= first_end, "the third process's start-up did not run beside the first two's checks"
    assert checks["c"][0] - first_end < 0.4, "its checks waited for a start-up after the slot freed"
    queued = jobs["c"]
    assert queued.held_s > 0.2 and queued.active_s < queued.wall_s - 0.2, (queued.held_s, queued.active_s, queued.wall_s)


@pytest.mark.parametrize("resident", [None, 2])
def test_a_turn_passes_as_the_timing_ends_and_no_exit_meets_a_timing(tmp_path, resident):
    """A process whose timing is over hands the GPU on at once and exits (here 0.5 s: a CUDA context's
    teardown) only when no timing runs: once no turn is left, or when a process waiting to start needs
    its room (`resident`)."""
    plan = {n: (0.1, 0, 0.3, 0, 0.5) for n in "abcd"}
    jobs, spans, _ = _run(tmp_path, plan, parallel=2 if resident else 4, timeout=60, resident=resident)
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    for n in plan:
        for m in plan:
            assert not _overlap(spans[(n, "exit")], spans[(m, "timed")]), f"{n}'s exit meets {m}'s timing"
    timed = sorted(spans[(n, "timed")] for n in plan)
    if resident is None:  # every turn follows the one before it without an exit between them
        assert all(b[0] - a[1] < 0.3 for a, b in zip(timed, timed[1:])), timed
        assert all(0.25 <= j.timed_s < 0.45 for j in jobs.values()), {n: j.timed_s for n, j in jobs.items()}
    else:
        alive = {n: (spans[(n, "start")][0], spans[(n, "exit")][1]) for n in plan}
        edges = sorted(t for span in alive.values() for t in span)
        assert max(sum(a <= t < b for a, b in alive.values()) for t in edges) <= resident


def test_one_at_a_time_runs_each_job_alone(tmp_path):
    plan = {"a": (0.2, 0, 0.2), "b": (0.2, 0, 0.2), "c": (0.2, 0, 0.2)}
    jobs, spans, _ = _run(tmp_path, plan, parallel=1, timeout=60)
    assert all(j.returncode == 0 and j.waited_s == 0 for j in jobs.values()), jobs
    whole = {n: (spans[(n, "checks")][0], spans[(n, "timed")][1]) for n in plan}
    assert not any(_overlap(whole[x], whole[y]) for x in plan for y in plan if x < y)
    assert not list((tmp_path / "work").glob("*.ready")), "nothing waits when grading one at a time"


@pytest.mark.parametrize("where", ["checks", "timing"])
def test_a_hang_costs_only_the_job_that_hangs(tmp_path, where):
    """The others wait for the hanging job (in its checks) or behind it (in its timing) for longer
    than their limit, and still finish: only their own time counts."""
    timeout = 4.0
    hang = (HANG, 0, 0.1) if where == "checks" else (0.1, 0, HANG)
    plan = {"a": (0.1, 0, 0.2), "hangs": hang, "c": (0.3, 0, 0.2)}
    jobs, _, wall = _run(tmp_path, plan, parallel=3, timeout=timeout)
    assert jobs["hangs"].timed_out and jobs["hangs"].returncode == -9
    assert timeout <= jobs["hangs"].active_s < timeout + 2
    for name in ("a", "c"):
        assert jobs[name].returncode == 0 and not jobs[name].timed_out, jobs[name]
    if where == "checks":  # a and c waited for the hanging job's checks to end, past their own limit
        assert all(jobs[n].wall_s > timeout and jobs[n].active_s < timeout for n in ("a", "c")), jobs
    assert wall < 3 * timeout


def test_waiting_for_the_gpu_does_not_count_against_the_limit(tmp_path):
    timeout = 5.0
    plan = {"a": (0.1, 0, 3.0), "b": (0.1, 0, 3.0), "c": (0.1, 0, 3.0)}
    jobs, _, _ = _run(tmp_path, plan, parallel=3, timeout=timeout)
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    assert max(j.waited_s for j in jobs.values()) > timeout  # the last in line waited two timings
    assert all(j.active_s < timeout for j in jobs.values())


def test_huge_checks_run_one_at_a_time_and_their_wait_does_not_count(tmp_path):
    timeout = 5.0
    plan = {"a": (0.1, 3.0, 0.1), "b": (0.1, 3.0, 0.1), "c": (0.1, 3.0, 0.1)}
    jobs, spans, _ = _run(tmp_path, plan, parallel=3, timeout=timeout)
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    huge = [spans[(n, "huge")] for n in plan]
    assert not any(_overlap(x, y) for i, x in enumerate(huge) for y in huge[i + 1:])
    assert max(j.waited_s for j in jobs.values()) > timeout


@pytest.mark.parametrize("wait", ["gpu", "build"])
def test_a_waiting_process_gives_up_when_its_parent_is_gone(tmp_path, wait):
    """A process whose grader is gone (the pid it was given is not among its ancestors) exits
    instead of waiting for a word that never comes."""
    import subprocess

    prefix = tmp_path / "x"
    stranger = subprocess.Popen(["sleep", "60"])  # alive, but no ancestor of the waiting process
    try:
        code = f"from grader.run import gate; gate.wait_for_{wait}(); print('went on')"
        child_env = dict(os.environ, PYTHONPATH=str(env.REPO), **{
            gate.GATE_ENV: str(prefix), gate.BUILD_ENV: str(tmp_path / "never.json"),
            gate.PARENT_ENV: str(stranger.pid)})
        out = subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=60)
    finally:
        stranger.kill()
        stranger.wait()
    assert out.returncode == 3 and "went on" not in out.stdout
    if wait == "gpu":
        assert Path(str(prefix) + ".ready").exists()


def test_a_process_under_a_wrapper_waits_for_its_grader(tmp_path):
    """Under compute-sanitizer the grader is the grandparent: the process still waits for its word."""
    import subprocess

    result = tmp_path / "build.json"
    code = "from grader.run import gate; print(gate.wait_for_build())"
    wrapper = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"]
    child_env = dict(os.environ, PYTHONPATH=str(env.REPO), **{gate.BUILD_ENV: str(result),
                                                               gate.PARENT_ENV: str(os.getpid())})
    proc = subprocess.Popen([*wrapper, sys.executable, "-c", code], env=child_env, stdout=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert proc.poll() is None, "it gave up while its grader was alive"
    write_json_atomic(result, {"ok": True})
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "'ok': True" in out


def test_the_clock_stops_while_a_job_waits_for_its_build(tmp_path):
    """A grading process starts beside its build and waits for it; that wait is not its own time."""
    timeout = 5.0  # room for a loaded machine (two CI cores shared with other tests): the build is longer
    jobs, spans, _ = _run(tmp_path, {"a": (0.2, 0, 0.1)}, parallel=1, timeout=timeout, builds={"a": 8.0})
    a = jobs["a"]
    assert a.returncode == 0 and not a.timed_out, a
    assert a.held_s > timeout and a.active_s < timeout
    assert spans[("a", "checks")][0] >= spans[("a", "built")][1]  # its checks began once it was built


def test_no_timing_starts_while_a_build_runs(tmp_path):
    """`a` is ready to time long before `b`'s build is done: its timing waits for that build."""
    plan = {"a": (0.1, 0, 0.3), "b": (0.1, 0, 0.3)}
    jobs, spans, _ = _run(tmp_path, plan, parallel=2, timeout=60, builds={"b": 3.0})
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    assert spans[("a", "timed")][0] >= spans[("b", "built")][1]
    assert spans[("b", "checks")][0] >= spans[("b", "built")][1]
    assert jobs["a"].active_s < 3.0  # its wait for the GPU, behind the build, was not its time


def test_a_session_past_its_time_limit_dies_with_its_children(tmp_path):
    """As a build past BUILD_TIMEOUT: the Python that started ninja and nvcc, and them too."""
    import subprocess

    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        gate.run_session(["bash", "-c", script], timeout=1)
    child = int(pid_file.read_text())
    for _ in range(100):  # the kill is immediate; reaping by init may take a moment
        try:
            os.kill(child, 0)
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the child {child} outlived its session")
    done = gate.run_session(["bash", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_no_submission_runs_while_the_yardstick_times_the_reference(tmp_path):
    """The yardstick (a light job) ends before any other process starts: a submission cannot keep the
    GPU busy from a thread of its own while the reference it is scored against is timed. Its builds
    still overlap the others' (the parent's), and its timing waits for every build."""
    jobs, spans, _ = _run(tmp_path, {"yardstick": (0.1, 0, 0.3), "a": (0.2, 0, 0.1), "b": (0.2, 0, 0.1)},
                          parallel=2, timeout=30, builds={"yardstick": 0.2, "a": 0.5, "b": 0.1},
                          light=frozenset({"yardstick"}))
    assert all(j.returncode == 0 for j in jobs.values())
    assert spans[("yardstick", "timed")][0] >= spans[("a", "built")][1], "a timing beside a compiler"
    for name in ("a", "b"):
        assert spans[(name, "start")][0] >= spans[("yardstick", "timed")][1], f"{name} ran beside the yardstick"


@pytest.mark.parametrize("resident", [None, 2])
def test_the_last_job_starts_beside_the_checks_and_times_once_every_other_process_has_ended(tmp_path, resident):
    """A grade's yardstick (a `last` job): its start-up runs beside the others' checks (where `resident`
    has room for it: on a small GPU once a grading process has ended), its timing once every other
    process has ended, told what the parent's go_text() says then."""
    plan = {"stick": (0.0, 0, 0.2, 0.6), "a": (1.0, 0, 0.2), "b": (0.4, 0, 0.2), "c": (0.3, 0, 0.2)}
    jobs, spans, _ = _run(tmp_path, plan, parallel=2, timeout=30, resident=resident,
                          last={"stick": lambda: f"{time.monotonic()}"})
    assert all(j.returncode == 0 and not j.timed_out for j in jobs.values()), jobs
    others_end = max(spans[(n, "timed")][1] for n in "abc")
    assert spans[("stick", "timed")][0] >= others_end, "the yardstick timed beside a grading process"
    assert float((tmp_path / "events.log.stick.told").read_text()) >= others_end, "its go text asked too early"
    startup = (spans[("stick", "start")][0], spans[("stick", "up")][0])
    if resident is None:
        assert startup[1] < spans[("a", "checks")][1], "its start-up did not overlap the checks"
    else:  # two alive at most: it starts once one of the first two has ended
        assert startup[0] >= min(spans[(n, "timed")][1] for n in "ab")
    for name in "abc":
        assert not _overlap(spans[(name, "timed")], startup), f"{name}'s timing beside the yardstick's start-up"


def test_a_grading_process_leaves_no_process_behind(tmp_path):
    """A process the grading process started and left running (a submission's helper that keeps the
    GPU busy) is killed when the grading process ends, before the next timing."""
    pid_file = tmp_path / "helper.pid"
    script = tmp_path / "leaves_a_helper.py"
    script.write_text("import subprocess, sys\n"
                      f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    job = gate.Job("leaves", [sys.executable, str(script)], dict(os.environ), env.REPO)
    gate.run([job, gate.Job("other", [sys.executable, "-c", "pass"], dict(os.environ), env.REPO)], tmp_path,
             parallel=2, timeout=30)
    assert job.returncode == 0
    helper = int(pid_file.read_text())

    def running() -> bool:  # gone, or a zombie waiting for init to reap it
        try:
            return Path(f"/proc/{helper}/stat").read_text().split()[2] not in ("Z", "X")
        except OSError:
            return False

    for _ in range(100):  # SIGKILL is delivered at once
        if not running():
            break
        time.sleep(0.05)
    else:
        os.kill(helper, 9)
        pytest.fail("the helper the grading process left running was still alive after the run")


@pytest.mark.parametrize("jobs", [1, 2])
def test_no_timing_starts_while_other_builds_run(tmp_path, jobs):
    """A class's round runs its checks while the next rounds' folders compile (`compiling`), but its
    timings wait for those builds, one job alone included."""
    until = time.monotonic() + 1.5
    plan = {name: (0.1, 0, 0.1) for name in ["a", "b"][:jobs]}
    found, spans, _ = _run(tmp_path, plan, parallel=2, timeout=30, compiling=lambda: time.monotonic() < until)
    assert all(j.returncode == 0 for j in found.values())
    for name in plan:
        assert spans[(name, "checks")][0] < until, "the checks should not wait for the builds"
        assert spans[(name, "timed")][0] >= until, f"{name} was timed beside a compiler"


TICKS = """
import sys, time
with open(sys.argv[1], "a") as f:
    for _ in range(int(sys.argv[2])):
        f.write(f"{time.monotonic()}\\n")
        f.flush()
        time.sleep(0.02)
"""


def test_a_timing_suspends_the_other_rounds_compilers_rather_than_wait_for_them(tmp_path):
    """With stop_compilers, a timing beside other rounds' builds (`compiling`) starts at once: the
    builds' processes (here a stand-in that ticks every 20 ms) are suspended for it and go on after."""
    import subprocess

    ticks = tmp_path / "ticks.log"
    (tmp_path / "ticks.py").write_text(TICKS)
    compiler = subprocess.Popen([sys.executable, str(tmp_path / "ticks.py"), str(ticks), "150"])  # about 3 s
    try:
        plan = {"a": (0.2, 0, 0.6), "b": (0.1, 0, 0.6)}
        found, spans, _ = _run(tmp_path, plan, parallel=2, timeout=30, compiling=lambda: compiler.poll() is None,
                               stop_compilers=True)
        assert all(j.returncode == 0 for j in found.values())
        assert compiler.wait(timeout=20) == 0, "the suspended build did not go on"
    finally:
        compiler.kill()
    times = [float(t) for t in ticks.read_text().split()]
    assert len(times) == 150, "the build lost work"
    for name in plan:
        start, end = spans[(name, "timed")]
        assert start < times[-1], f"{name}'s timing waited for the build to end"
        inside = [t for t in times if start + 0.05 < t < end - 0.05]
        assert not inside, f"the build ran during {name}'s timing: {inside[:3]}"


BEATS = """
import sys, time
progress, beats, every = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for _ in range(beats):
    with open(progress, "w") as f:  # as the results file is rewritten when a check starts or ends
        f.write(str(time.monotonic()))
    time.sleep(every)
time.sleep(float(sys.argv[4]))
"""


def test_a_process_whose_checks_stop_progressing_is_stopped_at_its_stall_limit(tmp_path):
    """A job that rewrites its progress file keeps running past the stall limit in all; one that stops
    rewriting it (a check that hangs) is stopped once that much of its own time has passed, long before
    its time limit, and says so (`stalled`)."""
    script = tmp_path / "beats.py"
    script.write_text(BEATS)
    stall, timeout = 1.5, 60.0
    jobs = {name: gate.Job(name, [sys.executable, str(script), str(tmp_path / f"{name}.progress"), *args],
                           dict(os.environ), env.REPO, progress=tmp_path / f"{name}.progress", stall_s=stall)
            for name, args in {"beats": ("8", "0.5", "0"), "hangs": ("1", "0", str(HANG))}.items()}
    began = time.monotonic()
    (tmp_path / "work").mkdir()
    gate.run(list(jobs.values()), tmp_path / "work", parallel=2, timeout=timeout)
    assert jobs["beats"].returncode == 0 and not jobs["beats"].stalled, jobs["beats"]
    assert jobs["beats"].active_s > 2 * stall  # it ran longer than the limit, progressing
    hung = jobs["hangs"]
    assert hung.stalled and hung.timed_out and hung.returncode == -9, hung
    assert stall <= hung.active_s < stall + 2
    assert time.monotonic() - began < timeout / 4


def test_no_stall_limit_without_a_progress_file(tmp_path):
    script = tmp_path / "beats.py"
    script.write_text(BEATS)
    job = gate.Job("quiet", [sys.executable, str(script), str(tmp_path / "p"), "1", "0", "2.0"], dict(os.environ),
                   env.REPO, stall_s=0.5)
    (tmp_path / "work").mkdir()
    gate.run([job], tmp_path / "work", parallel=1, timeout=30.0)
    assert job.returncode == 0 and not job.stalled


def test_gated_processes_are_given_their_share_of_the_gpu_and_a_lone_one_none(tmp_path):
    """Processes that share the GPU (gated) are told their share of its memory (MEMORY_CAP_ENV, which
    cap_gpu_memory turns into PyTorch's per-process limit); one grading alone is told none; the share is
    the per-process memory the grader plans its parallelism by, as a fraction of the GPU at most 1."""
    from grader.run import grading

    show = [sys.executable, "-c", f"import os; print('cap=' + str(os.environ.get({gate.MEMORY_CAP_ENV!r})))"]
    child = {k: v for k, v in os.environ.items() if k != gate.MEMORY_CAP_ENV}
    pair = [gate.Job(name, show, dict(child), env.REPO) for name in ("a", "b")]
    (tmp_path / "two").mkdir()
    (tmp_path / "one").mkdir()
    gate.run(pair, tmp_path / "two", parallel=2, timeout=30)
    assert all(f"cap={gate.MEMORY_CAP_GIB:g}" in j.output for j in pair), [j.output for j in pair]
    alone = gate.Job("alone", show, dict(child), env.REPO)
    gate.run([alone], tmp_path / "one", parallel=1, timeout=30)
    assert "cap=None" in alone.output, alone.output
    assert grading.GIB_PER_PROCESS == gate.MEMORY_CAP_GIB
    assert gate.memory_fraction(7.5, 80 * 2**30) == pytest.approx(7.5 / 80)
    assert gate.memory_fraction(7.5, 4 * 2**30) == 1.0 and gate.memory_fraction(7.5, 0) == 1.0
