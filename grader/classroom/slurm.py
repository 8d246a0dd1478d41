"""Grading a class on a Slurm cluster: a job array through submitit, one task per slice of students.

    make grade SUBMISSIONS=dir SLURM=1 [SLURM_TASKS=8] [SLURM_PARTITION=gpu] [SLURM_TIME=120] \
        [SLURM_GPUS=1] [SLURM_ACCOUNT=...]
    python -m grader.classroom.grade dir --slurm --tasks 8 --partition gpu --dry-run   # print the job script

Every task grades its students exactly as `make grade SUBMISSIONS=dir` does on one machine, with
the same seed, writing each student's feedback into the shared output folder (which must be on a
file system the nodes share, as the submissions and this repository must be). When the tasks are
done, the gradebook is assembled from those per-student reports. A failed task is submitted once
more; students whose task failed twice get a row saying so, with the path of the task's log.

This module only runs the array (`run_array`): what a task does, and the gradebook, are
grader.classroom.grade's (`grade_class_on_slurm`, `grade_slice`).

submitit (https://github.com/facebookincubator/submitit) writes the sbatch script, submits the
array, and brings back each task's result or exception. Its local executor runs the same tasks as
local processes, which is how the test suite checks this path without a cluster.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader import env


@dataclass
class SlurmOptions:
    tasks: int = 4  # array tasks (slices of students)
    partition: str | None = None
    time_min: int = 120  # per task
    gpus_per_task: int = 1
    cpus_per_task: int = 8  # builds use them
    account: str | None = None
    retries: int = 1
    cluster: str = "slurm"  # "local" runs the tasks as local processes (tests)
    setup: list[str] = field(default_factory=list)  # more shell lines before each task, e.g. "module load cuda"
    extra: dict = field(default_factory=dict)  # more sbatch options, e.g. {"constraint": "h100"}


def slices(students: list[str], tasks: int) -> list[list[str]]:
    """Round-robin slices, so that each task gets a similar mix of early and late names."""
    tasks = max(1, min(tasks, len(students)))
    return [students[i::tasks] for i in range(tasks)]


def _setup_lines() -> list[str]:
    """Shell lines run before each task: the same repository, toolkit and interpreter as here."""
    lines = [f"cd {env.REPO}", f"export PYTHONPATH={env.REPO}${{PYTHONPATH:+:$PYTHONPATH}}"]
    if os.environ.get("CUDA_HOME"):
        lines.append(f"export CUDA_HOME={os.environ['CUDA_HOME']}")
    return lines


def _executor(folder: Path, opts: SlurmOptions):
    import submitit

    executor = submitit.AutoExecutor(folder=folder / "%j", cluster=opts.cluster)
    params = dict(name="course-grade", timeout_min=opts.time_min, cpus_per_task=opts.cpus_per_task,
                  slurm_array_parallelism=opts.tasks, slurm_setup=_setup_lines() + opts.setup)
    if opts.setup:
        params["local_setup"] = list(opts.setup)
    if opts.cluster == "local":  # the local executor sets CUDA_VISIBLE_DEVICES to GPUs 0..n-1 ("" for none)
        params["gpus_per_node"] = min(opts.gpus_per_task, len(env.visible_gpus())) if env.gpu_present() else 0
    else:
        params["gpus_per_node"] = opts.gpus_per_task
    if opts.partition:
        params["slurm_partition"] = opts.partition
    if opts.account:
        params["slurm_account"] = opts.account
    if opts.extra:
        params["slurm_additional_parameters"] = dict(opts.extra)
    executor.update_parameters(**params)
    return executor


def job_script(folder: Path, opts: SlurmOptions, students: int) -> str:
    """The sbatch script submitit would submit for `students` students (no cluster needed)."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = dict(job_name="course-grade", time=opts.time_min, cpus_per_task=opts.cpus_per_task,
                  gpus_per_node=opts.gpus_per_task, array_parallelism=opts.tasks, setup=_setup_lines() + opts.setup,
                  partition=opts.partition, account=opts.account,
                  additional_parameters=dict(opts.extra) or None)
    command = f"{sys.executable} -u -m submitit.core._submit {folder / '%j'}"
    return _make_sbatch_string(command=command, folder=folder / "%j",
                               map_count=len(slices(list(range(students)), opts.tasks)), **params)


def _last_error_line(text: str) -> str:
    """'ModuleNotFoundError: No module named ...' from a task's failure text (a traceback, then notes)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    errors = [l for l in lines if not l.startswith(("File ", "Traceback", "-", "^")) and ":" in l
              and l.split(":", 1)[0].replace(".", "").isidentifier() and l.split(":", 1)[0][:1].isupper()]
    return (errors[-1] if errors else (lines[0] if lines else ""))[:300]


def run_array(task: Callable, students: list[str], args: tuple, *, opts: SlurmOptions, folder: Path,
              done: Callable[[str], bool]) -> dict[str, str]:
    """Run `task(slice, *args)` as a job array, one task per slice of `students`, and submit the
    students of failed tasks once more (`opts.retries`). `done(student)` tells a student whose
    report is written, even if their task died afterwards. Returns, for each student still not done,
    why their last task failed."""
    executor = _executor(folder, opts)
    pending = list(students)
    failures: dict[str, str] = {}  # student -> why their last task failed
    for attempt in range(1 + max(0, opts.retries)):
        if not pending:
            break
        parts = slices(pending, opts.tasks)
        print(f"submitting {len(parts)} task(s) for {len(pending)} student(s){' (retry)' if attempt else ''} ...",
              flush=True)
        array = executor.map_array(task, parts, *[[a] * len(parts) for a in args])
        for job, part in zip(array, parts):
            try:
                totals = job.result()
                print(f"  task {job.job_id}: " + ", ".join(f"{s} {t:g}" for s, t in sorted(totals.items())),
                      flush=True)
            except Exception as e:  # a task that failed (node lost, time limit, crash) is tried again
                why = _last_error_line(str(e)) or type(e).__name__
                print(f"  task {job.job_id} failed: {why} (log: {job.paths.stderr})", flush=True)
                for s in part:
                    failures[s] = f"the Slurm task {job.job_id} failed: {why} (log: {job.paths.stderr})"
        pending = [s for s in pending if not done(s)]
    return {s: failures.get(s, "its Slurm task did not finish") for s in pending}
