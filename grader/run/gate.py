"""Grading several exercises at once on one GPU, with every timing alone on it.

The parent (`run`) starts one process per exercise, several at a time, and their correctness
checks share the GPU. A process that reaches its timing calls `wait_for_gpu()`: it writes
`<name>.ready` in the run's folder and waits until `<name>.go` appears. The parent creates that
file for one process at a time, and only while no other process runs anything but that wait (the
rest wait too or have finished), and it starts no new process until the timed one's timing is over: a
timing never overlaps another process's checks, nor another timing. A process whose timing is over
says so (`timing_over`: `<name>.timed`), which hands the GPU to the next turn at once; it writes its
results meanwhile and exits only on the parent's word (`hold_exit`, `<name>.exit`), given once no turn
is left (or when a process waiting to start needs its room): an exit tears the CUDA context down,
which no timing meets, and the turns do not each wait for one.

Checks that allocate more than 2^31 bytes run one at a time (`one_at_a_time`, an exclusive lock
on `huge.lock` in the same folder), so that several of them never exhaust the GPU's memory
together; a process waiting for the lock says so with `<name>.lockwait`. Outside that lock each gated
process's PyTorch allocations are held to its share of the GPU (`MEMORY_CAP_GIB`, `cap_gpu_memory`):
an op that keeps what it allocates (a cache that only grows) then fails its own checks when it
passes its share, not the checks of the processes beside it (memory taken by cudaMalloc past
PyTorch's allocator is not held so).

Each process has its own time limit, and its clock stops while it waits for its turn on the GPU
or for the lock (while another process is alive, so a wait can never be longer than the others'
own limits): a hang costs only the exercise that hangs, never one that waited behind it.

A process may also start while the parent still builds its exercise (and the reference it is
timed against): it imports torch and collects its checks meanwhile, then `wait_for_build()` waits
for the parent's word (a small file in the run's folder). Such a process (`Job.may_queue`) may also
start before a slot among the `parallel` is free: its start-up runs beside the others' checks, and
`wait_for_build()` waits for `<name>.slot` too, which the parent creates once one is (its clock stopped
meanwhile). While the parent holds a job that way
(`Job.held`), its clock stops, and no timing starts anywhere (a compiler would share the machine).

A grade's yardstick (grader.run.yardstick) is one of the run's jobs (`Job.last`): it starts beside the
checks and loads what it times, and its go comes once every other process has ended, naming the
exercises whose timing ran (the go file's text, which `wait_for_gpu` returns).

Without COURSE_GPU_GATE in the environment (one job, or `--parallel 1` without a yardstick among the
jobs: a grade without a GPU or without timings) nothing waits for the GPU.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

GATE_ENV = "COURSE_GPU_GATE"  # "<folder>/<name>": where this process's gate files go
MEMORY_CAP_ENV = "COURSE_GPU_MEMORY_CAP_GIB"  # a gated process's share of the GPU's memory (cap_gpu_memory)
# The GPU memory a grading process that runs its checks may hold beside the others (outside one_at_a_time):
# 5x the most any solution's check held alone (1.5 GiB, 10's, H200 2026-11-30); the grader runs one process
# per this much free memory (grader.run.grading.default_parallel)
MEMORY_CAP_GIB = 7.5
PARENT_ENV = "COURSE_GPU_GATE_PARENT"  # the parent's pid: a waiting process stops if it is gone
BUILD_ENV = "COURSE_BUILD_RESULT"  # the file in which the parent says how this process's builds went
SLOT_ENV = "COURSE_CHECKS_SLOT"  # the file whose creation lets a process started ahead of its slot begin its checks
POLL_S = 0.01
LOCK_NAME = "huge.lock"

# a grading process's states, as the parent sees them
CHECKS, READY, TIMING = "checks", "ready", "timing"
# its timing over (`timing_over`), writing its results and waiting for the word to exit; then exiting
TIMED, EXITING = "timed", "exiting"


# --- in a grading process ------------------------------------------------------------------------

def _release_cached_memory() -> None:
    """Hand PyTorch's cached GPU blocks back, for the process that runs next."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        try:
            torch.cuda.empty_cache()
        except RuntimeError:  # a broken CUDA context: the check or timing reports that itself
            pass


def _parent_gone() -> bool:
    """Whether the grader that started this process is gone: no longer among its ancestors (its
    parent, or compute-sanitizer's under SANITIZE=1; an orphan is adopted by another process)."""
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return False
    pid = os.getppid()
    for _ in range(64):
        if pid == int(parent):
            return False
        if pid <= 1:
            return True
        try:  # /proc/<pid>/stat: "pid (name) state ppid ..."
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):  # gone meanwhile, or no /proc: the parent alone
            return os.getppid() != int(parent)
    return True


def memory_fraction(cap_gib: float, total_bytes: int) -> float:
    """The fraction of a GPU of `total_bytes` that `cap_gib` is (PyTorch's per-process limit), at most 1."""
    return min(1.0, cap_gib * 2**30 / total_bytes) if total_bytes > 0 else 1.0


def cap_gpu_memory(lifted: bool = False) -> None:
    """Hold this process's PyTorch allocations to the share the parent gave it (MEMORY_CAP_ENV; nothing
    without one, e.g. a grade of one exercise), or lift the hold (`lifted`: inside one_at_a_time)."""
    cap = os.environ.get(MEMORY_CAP_ENV)
    torch = sys.modules.get("torch")
    # under compute-sanitizer (COURSE_SANITIZE) PyTorch's caching is off and memory errors are the point
    if not cap or os.environ.get("COURSE_SANITIZE") or torch is None or not torch.cuda.is_available():
        return
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(1.0 if lifted else memory_fraction(float(cap), total))


def wait_for_gpu() -> str:
    """Before the timing: announce readiness and wait for the parent's go (at once when ungated).
    Returns what the parent wrote in the go file ("" for nothing: the yardstick's list of what to time)."""
    prefix = os.environ.get(GATE_ENV)
    if not prefix:
        return ""
    _release_cached_memory()
    Path(prefix + ".ready").touch()
    text = _appeared(Path(prefix + ".go")).read_text()
    cap_gpu_memory(lifted=True)  # alone on the GPU: a library's workspace may take what it would take alone
    return text


def timing_over() -> None:
    """After the timing, its GPU work done: the turn passes to the next process now, while this one
    writes its results; it exits only once the parent says (`hold_exit`), when no timing runs, so that
    its exit (the CUDA context torn down) never meets another's timing. Nothing when ungated."""
    prefix = os.environ.get(GATE_ENV)
    if not prefix:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        try:
            torch.cuda.synchronize()
        except RuntimeError:  # a broken CUDA context: the timing reported that itself
            pass
    _release_cached_memory()
    Path(prefix + ".timed").touch()


def hold_exit() -> None:
    """Before this process exits: once its timing is over, wait for the parent's word (`<name>.exit`).
    (The gate's files say whether it timed: a module variable would be grader state that changed under
    the integrity snapshot.)"""
    prefix = os.environ.get(GATE_ENV)
    if prefix and Path(prefix + ".timed").exists():
        _appeared(Path(prefix + ".exit"))


def wait_for_build() -> dict:
    """Before loading the exercise: wait until the parent has built it, and return what the parent
    wrote: {"ok": the exercise built, "reference": its reference built}. {} when not asked to wait.
    A process started ahead of its slot (SLOT_ENV) then waits for that too."""
    path, slot = os.environ.get(BUILD_ENV), os.environ.get(SLOT_ENV)
    result = json.loads(_appeared(Path(path)).read_text()) if path else {}
    if slot and result.get("ok", True):  # a failed build runs no check: it needs no slot
        _appeared(Path(slot))
    return result


def _appeared(path: Path) -> Path:
    """`path` once the parent has created it (this process ends if the parent is gone: nobody would)."""
    while not path.exists():
        if _parent_gone():
            os._exit(3)
        time.sleep(POLL_S)
    return path


@contextlib.contextmanager
def one_at_a_time(exclusive: bool = True):
    """Run the body holding the run's exclusive lock (for a check of more than 2^31 bytes); its
    cached GPU memory is released before the next process gets the lock. Ungated: just the body."""
    prefix = os.environ.get(GATE_ENV)
    if not exclusive or not prefix:
        yield
        return
    with open(Path(prefix).parent / LOCK_NAME, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting = Path(prefix + ".lockwait")
            waiting.touch()
            try:
                fcntl.flock(f, fcntl.LOCK_EX)
            finally:
                waiting.unlink(missing_ok=True)
        cap_gpu_memory(lifted=True)
        try:
            yield
        finally:
            _release_cached_memory()
            cap_gpu_memory()
            fcntl.flock(f, fcntl.LOCK_UN)


# --- in the parent -------------------------------------------------------------------------------

@dataclass
class Job:
    """One process to run: its command, and once it ended, how."""

    name: str  # unique among one run's jobs: names its files in the run's folder
    cmd: list[str]
    env: dict[str, str]
    cwd: Path
    returncode: int | None = None
    timed_out: bool = False
    output: str = ""  # stdout and stderr together
    # set by the parent while it still builds what the job needs: the job's clock stops meanwhile
    held: bool = False
    # its process waits for the build (wait_for_build) before its checks: it may be started ahead of its slot
    # among the `parallel`, and so make its start-up (torch, CUDA) beside the others' checks
    may_queue: bool = False
    # a process that does little before its timing (grader.run.yardstick): started at once, and the
    # others only once it has ended, so that no submitted code runs while it times the reference
    light: bool = False
    # a process that times after every other job has ended (a grade's yardstick: no submitted code is alive
    # then): started early, so that its start-up (torch, CUDA, the references' libraries) runs beside the
    # others' checks; it counts against `resident`, not `parallel`
    last: bool = False
    go_text: Callable[[], str] | None = None  # what the parent writes in its go file, asked when it gives it
    active_s: float = 0.0  # what counts against the time limit
    # a file the process rewrites as its checks start and end (its results file): past `stall_s` of its
    # own time with no change to it, the process is stopped as hanging (`stalled`)
    progress: Path | None = None
    stall_s: float | None = None
    stalled: bool = False
    waited_s: float = 0.0  # for its turn on the GPU or for the lock, while another process ran
    held_s: float = 0.0  # running while held (waiting for its builds) or queued (for a slot)
    timed_s: float = 0.0  # from its go to its timing's end: alone on the GPU (the others wait meanwhile)
    after_s: float = 0.0  # from its timing's end to the word to exit (it writes its results meanwhile)
    wall_s: float = 0.0
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _state: str = field(default=CHECKS, repr=False)
    _queued: bool = field(default=False, repr=False)  # started ahead of its slot, waiting for it (its clock stopped)
    _started: float = field(default=0.0, repr=False)
    _progress: tuple = field(default=(None, 0.0), repr=False)  # (the file's last mtime, active_s then)


def _kill_session(pid: int) -> None:
    """SIGKILL a process started with start_new_session, and every process it started."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stalled(job: Job) -> bool:
    """Whether the job's progress file has not changed for `stall_s` of its own time (a wait for the
    GPU, the lock or a build stops that clock too)."""
    if job.stall_s is None or job.progress is None or job.timed_out:  # killed already, not yet reaped
        return False
    try:
        mtime = job.progress.stat().st_mtime_ns
    except OSError:
        mtime = None
    if mtime != job._progress[0]:
        job._progress = (mtime, job.active_s)
        return False
    return job.active_s - job._progress[1] > job.stall_s


def _kill(job: Job) -> None:
    """SIGKILL the job's session (any helper it started dies too); the caller reaps it."""
    _kill_session(job._proc.pid)


def _descendants(root: int) -> dict[int, int]:
    """{pid: session id} of every process below `root` (from /proc; {} without it)."""
    children: dict[int, list[int]] = {}
    sessions: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:  # "pid (name) state ppid pgrp session ..."
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        sessions[pid] = int(fields[3])
    out, todo = {}, list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out[pid] = sessions.get(pid, 0)
        todo += children.get(pid, ())
    return out


class Compilers:
    """The builds this process runs beside a gated run (a class's or the mutants' next rounds): its
    descendant processes outside the jobs' sessions (ninja, nvcc, the host compiler; each grading
    process has a session of its own). `stop()` suspends them (SIGSTOP) so that a timing can run on a
    quiet machine at once rather than after every build; `resume()` lets them go on. Stopping is
    repeated while stopped, for a compiler that a build thread starts meanwhile."""

    def __init__(self):
        self.stopped: set[int] = set()

    def stop(self, jobs: list[Job]) -> None:
        own = {j._proc.pid for j in jobs if j._proc is not None}
        for pid, session in _descendants(os.getpid()).items():
            if pid not in self.stopped and session not in own and pid not in own:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    self.stopped.add(pid)
                except ProcessLookupError:
                    pass

    def resume(self) -> None:
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped.clear()


def run_session(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True) in a session of its own; past `timeout`
    the whole session is killed (a build's ninja and nvcc too, not only the Python that started
    them) before TimeoutExpired is raised."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                          **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run(jobs: list[Job], folder: Path, *, parallel: int, timeout: float, resident: int | None = None,
        on_finish=None, compiling=None, stop_compilers: bool = False) -> list[Job]:
    """Run `jobs`, `parallel` of them at a time in their checks (one that waits for the GPU does not
    count: it holds no core), and at most `resident` alive at once (a waiting one still holds GPU
    memory), each with `timeout` seconds of its own time (not counting while it is `held`); gated
    when there is more than one job and either `parallel` > 1 or a light job, or when `compiling` is
    given, and then no timing starts while any job is held. Light jobs start at once and count against neither bound; the
    others start once every light job has ended: a submission's process, alive beside the yardstick,
    could otherwise keep the GPU busy from a thread of its own while the reference is timed, and slow
    the yardstick every submission is scored against. A `last` job (a grade's yardstick) starts as soon as
    `resident` has room for it (it counts against that bound only), and gets its go once every other job
    has ended, with what its `go_text()` says then.
    `on_finish(job)` is called as each ends. `compiling()`, when given, says whether builds the jobs
    do not wait for still run on this machine (a class's next rounds): no timing starts meanwhile
    either, unless `stop_compilers`: then those builds' processes are suspended for each timing
    (`Compilers`) and go on after it. Returns `jobs`."""
    gated = ((len(jobs) > 1 and (parallel > 1 or any(j.light or j.last for j in jobs)))
             or compiling is not None)
    folder = Path(folder)
    pending, running = [j for j in jobs if not j.last], []
    lasts = [j for j in jobs if j.last]
    holder: Job | None = None  # the one whose timing has the GPU
    compilers = Compilers() if stop_compilers and compiling is not None else None

    def start(job: Job, queued: bool = False) -> None:
        env = dict(job.env)
        env[PARENT_ENV] = str(os.getpid())
        if gated:
            env[GATE_ENV] = str(folder / job.name)
            env.setdefault(MEMORY_CAP_ENV, f"{MEMORY_CAP_GIB:g}")
        if queued:
            env[SLOT_ENV] = str(folder / f"{job.name}.slot")
            job._queued = True
        with open(folder / f"{job.name}.log", "wb") as log:
            job._proc = subprocess.Popen(job.cmd, cwd=job.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        job._state, job._started = CHECKS, time.monotonic()
        running.append(job)

    def finish(job: Job) -> None:
        job.returncode = job._proc.returncode
        # what it started and left running (a helper process still using the GPU) ends with it: it
        # would otherwise share the GPU with the timings after it
        _kill_session(job._proc.pid)
        job.output = (folder / f"{job.name}.log").read_text(errors="replace")
        job.wall_s = time.monotonic() - job._started
        running.remove(job)
        if on_finish is not None:
            on_finish(job)

    def checking() -> int:  # processes running their checks (not those started ahead of their slot)
        return sum(j._state == CHECKS and not j.light and not j.last and not j._queued for j in running)

    def room() -> bool:  # another process may be alive beside these
        return resident is None or sum(not j.light for j in running) < max(1, resident)

    try:
        last = time.monotonic()
        while pending or lasts or running:
            now = time.monotonic()
            step, last = now - last, now
            held = any(j.held for j in jobs)
            others_build = compiling is not None and compiling()
            building = held or others_build  # no timing beside a compiler
            for job in list(running):
                waits = gated and (job._state == READY or (folder / f"{job.name}.lockwait").exists())
                if job.held or job._queued:  # bounded by the parent's own limit on builds, by the others' limits
                    job.held_s += step
                elif job._state == TIMED:  # it writes its results, then waits for the word to exit
                    job.after_s += step
                elif job._state == TIMING:
                    job.timed_s += step
                    job.active_s += step
                elif waits and (len(running) > 1 or building):
                    job.waited_s += step
                else:
                    job.active_s += step
                if job._proc.poll() is None and job.active_s > timeout:
                    _kill(job)  # reaped on a later pass: a GPU context can take seconds to tear down
                    job.timed_out = True
                elif job._proc.poll() is None and _stalled(job):
                    _kill(job)
                    job.timed_out = job.stalled = True
                if job._proc.poll() is not None:
                    if holder is job:
                        holder = None
                        if compilers is not None:
                            compilers.resume()  # the timing is over: the builds go on
                    finish(job)
                elif gated and job._state == CHECKS and (folder / f"{job.name}.ready").exists():
                    job._state = READY
                elif job._state == TIMING and (folder / f"{job.name}.timed").exists():
                    job._state = TIMED  # the turn is over: the next may begin while this one writes its results
                    holder = None
                    if compilers is not None:
                        compilers.resume()
            for job in [j for j in pending if j.light]:
                pending.remove(job)
                start(job)
            if holder is None:
                timed = [j for j in running if j._state == TIMED]
                # the processes whose timing is over exit once no turn is left, or when one waiting to start
                # needs their room, a light one at once (the others start once it has ended); a turn then waits
                # for their exits (EXITING is not READY)
                if not ((not pending and all(j._state == TIMED for j in running if not j.last))
                        or (pending and not room())):
                    timed = [j for j in timed if j.light]
                for job in timed:
                    job._state = EXITING
                    (folder / f"{job.name}.exit").touch()
                for job in [j for j in running if j._queued]:  # those started ahead first, in order
                    if checking() >= parallel:
                        break
                    job._queued = False
                    (folder / f"{job.name}.slot").touch()
                while pending and not any(j.light for j in running) and checking() < parallel and room():
                    start(pending.pop(0))
                # the rest start ahead of their slot, where they can wait for it and the GPU's memory is known
                # to hold their contexts (`resident`): their start-up runs beside the others' checks instead of
                # after a slot frees (never beside a timing: they hold it off until their own checks are done)
                while (pending and pending[0].may_queue and resident is not None and not any(j.light for j in running)
                       and room()):
                    start(pending.pop(0), queued=True)
                # a `last` job where the GPU's memory holds one more context: at once on a large GPU, once a
                # grading process has ended on a small one (it would otherwise take a grading process's place)
                while lasts and not any(j.light for j in running) and room():
                    start(lasts.pop(0))
                ready = [j for j in running if j._state == READY]
                # other rounds' builds may be suspended for a timing; a job's own build may not (it waits on it)
                quiet = not building or (compilers is not None and not held)
                # in order of start (the report's order); a `last` job once it is all that is left
                turn = [j for j in ready if not j.last] or ([] if pending or lasts else ready)
                if turn and len(ready) == sum(j._state != TIMED for j in running) and quiet:
                    if building:
                        compilers.stop(jobs)
                    holder = turn[0]
                    holder._state = TIMING
                    go = folder / f"{holder.name}.go"
                    staged = go.with_name(go.name + ".tmp")  # the process reads it once it exists: whole
                    staged.write_text(holder.go_text() if holder.go_text is not None else "")
                    os.replace(staged, go)
            elif compilers is not None and (compilers.stopped or others_build):
                compilers.stop(jobs)  # a compiler a build thread started during the timing
            time.sleep(POLL_S)
    finally:
        if compilers is not None:
            compilers.resume()  # never leave a build suspended
        for job in running:  # interrupted (Ctrl-C): leave no process behind
            _kill(job)
            job._proc.wait()
    return jobs
