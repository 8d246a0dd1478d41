"""`make grade SUBMISSIONS=dir`: grade a whole class into a gradebook and per-student feedback.

`dir` holds one folder per student; each holds an `exercises/` tree (or the exercise folders
directly). Every student is graded with the same seed, each exercise in its own process, so one
student's broken submission never costs another's result. Results are kept per student: a re-run
resumes where it stopped and skips students already graded (--force regrades them).

Writes, under --out (default SUBMISSIONS/../gradebook):
  gradebook.csv    one row per student and exercise, in the shape of `nbgrader export`
  gradebook.json   everything, for machines
  <student>/report.{json,md,html}, <student>/throughput.png   feedback for each student
"""
from __future__ import annotations

import argparse
import csv
import html
import json
import secrets
import sys
import time
from pathlib import Path

from grader import env
from grader.cli import DEFAULT_TIMEOUT, build_all, grade_target
from grader.report import format_rate, markdown, reasons, table
from grader.results import write_json_atomic
from grader.spec import Spec, select


def exercises_root(student: Path) -> Path:
    return student / "exercises" if (student / "exercises").is_dir() else student


def progress(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / max(1, total))
    print(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}", flush=True)


def grade_class(root: Path, specs: list[Spec], *, seed: int, out: Path, timeout: float, jobs: int,
                force: bool = False, keyword: str | None = None) -> dict[str, list[dict]]:
    students = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not students:
        raise SystemExit(f"no student folders in {root}")
    todo = [s for s in students if force or not (out / s.name / "report.json").exists()]
    # Build every submission first, in parallel: the GPU then never waits for a compiler.
    folders = [exercises_root(s) / sp.exercise for s in todo for sp in specs
               if (exercises_root(s) / sp.exercise).is_dir()]
    if folders:
        print(f"building {len(folders)} submitted exercise folder(s), {jobs} at a time ...", flush=True)
        build_all(folders, jobs, log=lambda *a: None)
    results: dict[str, list[dict]] = {}
    for i, student in enumerate(students, start=1):
        report_path = out / student.name / "report.json"
        if student not in todo:
            results[student.name] = json.loads(report_path.read_text())["exercises"]
            progress(i, len(students), f"{student.name}: already graded (--force to regrade)")
            continue
        try:
            rows = grade_target(exercises_root(student), specs, seed=seed, timeout=timeout, jobs=jobs,
                                keyword=keyword, log=lambda *a: None)
        except Exception as e:  # a grader fault on one student must not lose the others
            rows = [{"exercise": sp.exercise, "title": sp.title, "status": "grader error", "error": repr(e),
                     "points": 0.0, "max_points": sp.total, "groups": {}, "tests": []} for sp in specs]
        header = {"target": student.name, "seed": seed, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
        write_feedback(out / student.name, rows, header)
        results[student.name] = rows
        total = sum(r["points"] for r in rows)
        progress(i, len(students), f"{student.name}: {total:g}/{sum(r['max_points'] for r in rows)}")
    write_gradebook(out, results, seed)
    return results


def write_feedback(folder: Path, rows: list[dict], header: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        row.pop("log", None)  # the raw pytest log is for the instructor's JSON only when small
    write_json_atomic(folder / "report.json", {**header, "exercises": rows})
    (folder / "report.md").write_text(markdown(rows, header))
    (folder / "report.html").write_text(feedback_html(rows, header))
    plot_student(rows, folder / "throughput.png")


def feedback_html(rows: list[dict], header: dict) -> str:
    esc = html.escape
    body = [f"<h1>Feedback: {esc(header['target'])}</h1>",
            f"<p>Seed <code>{header['seed']}</code>: replay with <code>make grade SEED={header['seed']}</code>. "
            f"Graded {esc(header['date'])}.</p>",
            "<table><tr><th>exercise</th><th>tests passed</th><th>throughput</th><th>vs reference</th>"
            "<th>of limit</th><th>points</th></tr>"]
    for r in rows:
        perf = r.get("performance") or {}
        rate = format_rate(perf.get("rate"), perf.get("unit", "B")) if "rate" in perf else "-"
        ratio = f"{perf['ratio']:.2f}x" if "ratio" in perf else "-"
        frac = f"{perf['fraction_of_limit']:.0%}" if "fraction_of_limit" in perf else "-"
        tests = f"{r.get('passed', 0)}/{r.get('total_tests', 0)}" if r["status"] == "graded" else esc(r["status"])
        cls = "full" if r["points"] == r["max_points"] else ("zero" if r["points"] == 0 else "part")
        body.append(f"<tr class='{cls}'><td>{esc(r['exercise'])}</td><td>{tests}</td><td>{rate}</td>"
                    f"<td>{ratio}</td><td>{frac}</td><td>{r['points']:g}/{r['max_points']}</td></tr>")
    body.append("</table>")
    for r in rows:
        lost = reasons(r)
        if lost:
            body.append(f"<h2>{esc(r['exercise'])}: what lost points</h2><ul>")
            body += [f"<li><pre>{esc(x)}</pre></li>" for x in lost]
            body.append("</ul>")
    body.append("<p><img src='throughput.png' alt='throughput against the reference and the hardware limit'></p>")
    style = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:right}"
             "td:first-child{text-align:left}tr.full td:last-child{background:#dfd}"
             "tr.zero td:last-child{background:#fdd}tr.part td:last-child{background:#ffd}"
             "pre{white-space:pre-wrap;margin:0}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Feedback: {esc(header['target'])}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def plot_student(rows: list[dict], path: Path) -> None:
    """The student's throughput beside the reference and the device limit, per timed exercise."""
    timed = [r for r in rows if (r.get("performance") or {}).get("rate")]
    if not timed:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(timed) + 2), 3.8))
    for j, r in enumerate(timed):
        p = r["performance"]
        ax.bar(j - 0.2, 100 * p["rate"] / p["limit"], 0.4, color="tab:blue", label="yours" if j == 0 else None)
        ax.bar(j + 0.2, 100 * p["reference_rate"] / p["limit"], 0.4, color="tab:gray",
               label="reference" if j == 0 else None)
    ax.axhline(100, color="k", ls="--", lw=1, label="device limit")
    ax.set_xticks(range(len(timed)))
    ax.set_xticklabels([r["exercise"] for r in timed], rotation=15, ha="right")
    ax.set_ylabel("% of the device limit")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_gradebook(out: Path, results: dict[str, list[dict]], seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".gradebook.csv.tmp"
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "status", "raw_score", "score", "max_score", "reasons"])
        for student, rows in sorted(results.items()):
            for r in rows:
                w.writerow([student, r["exercise"], r["status"], f"{r['points']:g}", f"{r['points']:g}",
                            r["max_points"], " | ".join(reasons(r))[:1000]])
    tmp.replace(out / "gradebook.csv")
    write_json_atomic(out / "gradebook.json", {"seed": seed, "students": results})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.classroom", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--ex", nargs="*", default=[])
    parser.add_argument("--seed", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--force", action="store_true", help="regrade students already graded")
    parser.add_argument("-k", dest="keyword")
    args = parser.parse_args(argv)
    env.configure()
    root = args.submissions.resolve()
    out = (args.out or root.parent / "gradebook").resolve()
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"grading the class in {root} (seed {seed}) into {out}")
    if not env.gpu_present():
        print("no CUDA GPU here: submissions are compiled and the GPU checks are skipped")
    results = grade_class(root, select(args.ex), seed=seed, out=out, timeout=args.timeout, jobs=args.jobs,
                          force=args.force, keyword=args.keyword)
    for student, rows in sorted(results.items()):
        print(f"\n== {student}")
        print(table(rows))
    print(f"\ngradebook: {out / 'gradebook.csv'}; feedback: {out}/<student>/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
