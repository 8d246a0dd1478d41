"""Presenting a grading run: the terminal table, the Markdown and HTML feedback, the student's plot.

Every view shows the same cells per exercise (`cells`) and the same reasons (`reasons`): they are
computed here once, and each view only lays them out.
"""
from __future__ import annotations

import html
import textwrap
from pathlib import Path

from grader.verify.outcomes import UNFINISHED, ExerciseRow, TestOutcome


def format_rate(rate: float | None, unit: str) -> str:
    if rate is None:
        return "-"
    if unit == "B":
        return f"{rate / 1e9:,.0f} GB/s"
    return f"{rate / 1e12:,.1f} TFLOP/s"


def _perf_cells(row: ExerciseRow) -> tuple[str, str, str]:
    perf = row.performance or {}
    if "rate" not in perf:
        return "-", "-", "-"
    # without the yardstick's numbers (its process failed) there is a rate but nothing to set it against
    return (
        format_rate(perf["rate"], perf["unit"]),
        f"{perf['ratio']:.2f}x" if "ratio" in perf else "-",
        f"{perf['fraction_of_limit']:.0%}" if "fraction_of_limit" in perf else "-",
    )


def cells(row: ExerciseRow) -> tuple[str, str, str, str, str, str]:
    """One exercise as every view shows it: exercise, tests passed (or the status), throughput, ratio to
    the reference, fraction of the device limit, points."""
    rate, ratio, frac = _perf_cells(row)
    tests = f"{row.passed or 0}/{row.total_tests or 0}" if row.graded else row.status
    return row.exercise, tests, rate, ratio, frac, f"{_fmt_points(row.points)}/{row.max_points}"


def _fmt_points(p: float) -> str:
    return f"{p:g}"


def _skip_why(reason: str) -> str:
    """`forward[1]: Skipped: no CUDA GPU on this machine: GPU checks skipped` -> `no CUDA GPU on this machine`."""
    why = reason.split(": ", 1)[-1].strip()
    why = why[len("Skipped: "):] if why.startswith("Skipped: ") else why
    return why.removesuffix(": GPU checks skipped")


def not_graded(row: ExerciseRow, not_run_why: str | None = None) -> dict[str, list[str]]:
    """The groups that were not graded in this run, by why: skipped ones, and, when the run left
    checks out on purpose (`not_run_why`: QUICK=1, K=, SANITIZE=1), those none of whose checks ran.
    Not a loss, and said the same way in the full grade, the quick one and without a GPU."""
    out: dict[str, list[str]] = {}
    for group, g in row.groups.items():
        if not row.graded:
            continue
        if g.state == "skipped":
            out.setdefault(_skip_why(g.reason), []).append(group)
        elif g.state == "not run" and not_run_why:
            out.setdefault(not_run_why, []).append(group)
    return out


def reasons(row: ExerciseRow, not_run_why: str | None = None) -> list[str]:
    """One line per group that lost points, the reason first-hand; then what was not graded here
    and why (`not_run_why`: why a group none of whose checks ran was left out, e.g. QUICK=1)."""
    if not row.graded:
        return [f"{row.status}: {row.error}"]
    out = []
    for group, g in row.groups.items():
        left_out = g.state == "skipped" or (g.state == "not run" and not_run_why)
        if not left_out and g.points < g.max and g.reason:
            out.append(f"{group} ({_fmt_points(g.points)}/{g.max}): {g.reason}")
    for why, groups in not_graded(row, not_run_why).items():
        out.append(f"not graded here: {', '.join(groups)} ({why})")
    out += _not_run_lines(row.not_run or [])
    return out


def _not_run_lines(checks: list[str], shown: int = 3) -> list[str]:
    """Checks this GPU could not run (they cost nothing, but in a strict grade, where the group says
    so): one line per reason, naming a few of its checks, not one line per check (a T4 leaves out a
    whole tensor-core version's dozens)."""
    by_why: dict[str, list[str]] = {}
    for check in checks:
        name, sep, why = check.partition(": ")
        by_why.setdefault(why if sep else "", []).append(name if sep else check)
    lines = []
    for why, names in by_why.items():
        listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
        lines.append(f"not run on this GPU: {listed}" + (f": {why}" if why else ""))
    return lines


def _not_graded_points(rows: list[ExerciseRow], not_run_why: str | None = None) -> float:
    return sum(row.groups[g].max for row in rows for gs in not_graded(row, not_run_why).values() for g in gs)


def table(rows: list[ExerciseRow], width: int = 120, not_run_why: str | None = None) -> str:
    head = ("exercise", "tests", "throughput", "vs ref", "of limit", "points")
    lines = []
    shown = [cells(row) for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in shown)) if shown else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*head))
    lines.append("  ".join("-" * w for w in widths))
    for row, c in zip(rows, shown):
        lines.append(fmt.format(*c))
        for reason in reasons(row, not_run_why):
            first, *rest = reason.splitlines() or [""]
            wrapped = textwrap.wrap(first, width=width - 6, subsequent_indent="      ") or [""]
            lines.append("    - " + "\n".join(wrapped))
            lines.extend("      " + r for r in rest[:12])
    total = sum(r.points for r in rows)
    maximum = sum(r.max_points for r in rows)
    left_out = _not_graded_points(rows, not_run_why)
    lines.append(f"\ntotal: {_fmt_points(round(total, 2))}/{maximum}"
                 + (f" ({_fmt_points(left_out)} of them not graded here)" if left_out else ""))
    return "\n".join(lines)


FREE_GPUS = ("Free GPUs to grade on: Google Colab (colab.research.google.com: Runtime > Change runtime type > "
             "T4 GPU) and Kaggle Notebooks (kaggle.com: Settings > Accelerator > GPU, with a phone-verified "
             "account); clone the course there and run `make grade`.")


def _needs_gpu(t: TestOutcome) -> bool:
    return t.outcome in UNFINISHED and "GPU" in (t.reason or "")


def _cpu_checks(ran: list[TestOutcome]) -> str:
    """The CPU checks that ran, by name: `its CPU check input_checks[cpu x] passed`, or with each
    failure named (`its 3 CPU checks: a FAILED, b FAILED, c passed`)."""
    if not ran:
        return "no check runs without a GPU"
    failed = [t for t in ran if t.outcome == "failed"]
    plural = "s" if len(ran) != 1 else ""
    if not failed:
        return f"its CPU check{plural} {', '.join(t.name for t in ran)} passed"
    if len(ran) == 1:
        return f"its CPU check {ran[0].name} FAILED"
    return f"its {len(ran)} CPU checks: " + ", ".join(
        f"{t.name} {'FAILED' if t.outcome == 'failed' else 'passed'}" for t in ran)


def no_gpu_summary(rows: list[ExerciseRow], width: int = 120) -> str:
    """The grade on a machine without a GPU: one line per exercise saying that it compiled, which of
    its checks ran on the CPU and how they went (they count: a failure is reported, and fails the
    run) and how many checks need a GPU; no score table, which would read as a failure; a footer
    true to what happened (what compiled, what did not); where to get a GPU."""
    lines, gpu_checks = [], 0
    for row in rows:
        name = row.exercise
        if not row.graded:
            first, *rest = f"{row.status}: {row.error}".splitlines() or [""]
            lines.append(f"{name}: {first}")
            lines.extend("    " + r for r in rest[:12])
            continue
        need = sum(_needs_gpu(t) for t in row.tests)
        gpu_checks += need
        ran = [t for t in row.tests if t.ran]
        line = f"{name}: compiled; {_cpu_checks(ran)}; {need} check{'s' if need != 1 else ''} need a GPU"
        lines += textwrap.wrap(line, width=width, subsequent_indent="    ")
        for group, g in row.groups.items():
            if g.state == "failed":
                first, *rest = f"{group}: {g.reason}".splitlines() or [""]
                lines.append("    - " + "\n".join(textwrap.wrap(first, width=width - 6, subsequent_indent="      ")))
                lines.extend("      " + r for r in rest[:12])
    lines.append("")
    lines += textwrap.wrap(_no_gpu_footer(rows, gpu_checks), width=min(width, 100))
    lines += textwrap.wrap(FREE_GPUS, width=min(width, 100))
    return "\n".join(lines)


def _no_gpu_footer(rows: list[ExerciseRow], gpu_checks: int) -> str:
    """What the run without a GPU did, in every state: all compiled, some did not, none did."""
    compiled = [r for r in rows if r.graded]
    others = [r for r in rows if not r.graded]
    gpu_part = (f"the {gpu_checks} check{'s' if gpu_checks != 1 else ''} that need a GPU (correctness on the GPU, "
                "speed) were not run, and points are given only by a grade that runs them." if gpu_checks else
                "no check that needs a GPU was selected.")
    if not rows:
        return "No CUDA GPU on this machine, and no exercise was selected."
    if not compiled:
        what = "compiled" if all(r.status == "build failed" for r in others) else "could be graded"
        return (f"No CUDA GPU on this machine, and no exercise {what}: the reasons are above (a build error "
                "names its file and line). Without a GPU, a grade compiles and runs the CPU checks only; the "
                "checks that need a GPU run where there is one.")
    if not others:
        return ("No CUDA GPU on this machine: everything above was compiled and its CPU checks ran; " + gpu_part)
    named = ", ".join(f"{r.exercise} ({r.status})" for r in others)
    return (f"No CUDA GPU on this machine: {len(compiled)} of {len(rows)} exercises compiled and ran their CPU "
            f"checks; {named} did not (the reasons are above). Of those that compiled, " + gpu_part)


def markdown(rows: list[ExerciseRow], header: dict) -> str:
    """Feedback for a person: the score table, each lost point's reason, how to replay, and what
    the compiler knows about each kernel. Without a GPU (header `gpu` False), the no-GPU summary
    stands in for the table."""
    out = [f"# Grading report: {header.get('target', '')}", ""]
    out.append(f"- seed: `{header.get('seed')}` (replay: `make grade SEED={header.get('seed')}`)")
    if header.get("device"):
        out.append(f"- device: {header['device']}")
    if header.get("mode"):
        out.append(f"- {header['mode']}")
    out.append("")
    not_run_why = header.get("not_run_why")
    if header.get("gpu") is False:
        out += ["```", no_gpu_summary(rows), "```"]
        out += _resources_markdown(rows)
        return "\n".join(out) + "\n"
    out.append("| exercise | tests | throughput | vs reference | of limit | points |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        out.append("| " + " | ".join(cells(row)) + " |")
    for row in rows:
        lost = reasons(row, not_run_why)
        if lost:
            out += ["", f"## {row.exercise}: what lost points", ""]
            out += ["```", *lost, "```"]
    out += _resources_markdown(rows)
    return "\n".join(out) + "\n"


def _resources_markdown(rows: list[ExerciseRow]) -> list[str]:
    out = []
    for row in rows:
        text = resources_text(row.exercise, row.resources, verbose=True)
        if text:
            out += ["", f"## {row.exercise}: what the compiler knows", "", "```", text, "```"]
    return out


# ------------------------------------------------------------------ what the compiler knows


def kib(n: int) -> str:
    """Bytes as the resource report writes them: `512 B`, `8 KiB`, `9.5 KiB`."""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB".replace(".0 KiB", " KiB")


def pct(x: float) -> str:
    """A fraction as a percentage without trailing zeros: `50%`, `62.5%`."""
    return f"{x * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _occupancy_cell(k: dict) -> str:
    if not k.get("launches"):
        return "no launch in the source"
    if k.get("needs_capability"):
        return "not launched here (needs {}.{})".format(*k["needs_capability"])
    if not k.get("occupancy"):
        return "block size unknown"
    cells = []
    for occ in k["occupancy"]:
        cell = pct(occ["occupancy"])
        if occ["occupancy"] < 1:
            cell += " " + "+".join(occ["limited_by"])
        cells.append(cell)
    return ", ".join(dict.fromkeys(cells))


def _block_cell(k: dict) -> str:
    blocks = [l["block"] for l in k.get("launches", [])]
    if not blocks:
        return "-"
    return ", ".join(dict.fromkeys("?" if b is None else str(b) for b in blocks))


def _smem_cell(k: dict) -> str:
    cell = kib(k["static_smem"])
    dynamic = sorted({l["dynamic_smem"] for l in k.get("launches", []) if l.get("dynamic_smem")})
    if dynamic:
        cell += " + " + "/".join(kib(d) for d in dynamic) + " dyn"
    if any(l.get("dynamic_smem") is None for l in k.get("launches", [])):
        cell += " + ? dyn"
    return cell


def _kernel_order(report: dict) -> list[dict]:
    return [k for k in report.get("kernels", []) if k["arch"] == report.get("arch")]


def build_line(build: dict | None) -> str:
    """How this run got the exercise's library: compiled now (and how long it took) or the cached
    build of unchanged sources (whose compiler output, warnings included, is that earlier build's)."""
    if not build:
        return ""
    if build.get("cached"):
        return "  build: cached (the sources are unchanged since it was compiled; its warnings are that build's)"
    seconds = build.get("wall_s") or build.get("seconds")
    return "  build: fresh (compiled in this run" + (f", {seconds:.1f} s)" if seconds else ")")


def resources_text(exercise: str, report: dict | None, verbose: bool = False, full: bool = True,
                   build: dict | None = None) -> str:
    """The resource report of one exercise for the terminal: per kernel (the architecture the GPU
    runs, else the newest built) registers, spills, shared memory, block size and occupancy, a note
    for each spill or limited occupancy, and the compiler's warnings (their count unless `verbose`).
    `full` False: one summary line (a grade of many exercises; report.md has the tables). `verbose`
    also says whether the build was fresh or cached (`build`: the build's result) and that the
    compiler gave no warning, when it gave none."""
    if not report:
        return ""
    if report.get("error"):
        return f"{exercise}: no resource report ({report['error']})"
    kernels = _kernel_order(report)
    warnings = report.get("warnings") or []
    lines = []
    others = [a for a in report.get("archs", []) if a != report.get("arch")]
    where = f"{report.get('arch')}" + (f"; also built for {', '.join(others)}" if others else "")
    if not full and not kernels:
        return f"{exercise}: compiled, but no kernel is instantiated yet"
    if not full:
        regs = [k["registers"] for k in kernels]
        occ = [o["occupancy"] for k in kernels for o in k.get("occupancy") or []]
        spills = sum(1 for k in kernels if k["spill_stores"] or k["spill_loads"])
        summary = (f"{exercise}: {len(kernels)} kernel{'s' if len(kernels) != 1 else ''} on {report.get('arch')}"
                   + (f", {min(regs)}-{max(regs)} registers" if regs else "")
                   + (f", {spills} spilling" if spills else ", no spills")
                   + (f", occupancy {pct(min(occ))}-{pct(max(occ))}" if occ else "")
                   + (f", {len(warnings)} compiler warning{'s' if len(warnings) != 1 else ''}" if warnings else ""))
        return summary
    if not kernels:
        missing = report.get("missing") or []
        lines.append(f"{exercise}: compiled, but no kernel is instantiated yet" + (
            f" (nothing launches {', '.join(missing)}: the launches that would are yours to write)" if missing else ""))
    else:
        lines.append(f"{exercise}: resources per kernel, from ptxas ({where}; {report.get('arch_why')})")
    head = ("kernel", "registers", "spills (B)", "shared mem", "block", "occupancy")
    if kernels:
        cells = [(k["name"], str(k["registers"]),
                  f"{k['spill_stores']}/{k['spill_loads']}" if k["spill_stores"] or k["spill_loads"] else "-",
                  _smem_cell(k), _block_cell(k), _occupancy_cell(k)) for k in kernels]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
        fmt = "  " + "  ".join(f"{{:<{w}}}" if i in (0, 5) else f"{{:>{w}}}" for i, w in enumerate(widths))
        lines.append(fmt.format(*head).rstrip())
        lines.extend(fmt.format(*c).rstrip() for c in cells)
    for note in report.get("notes", []):
        lines.extend(textwrap.wrap(note, width=116, initial_indent="  - ", subsequent_indent="    "))
    if report.get("missing") and kernels:
        lines.append(f"  - not compiled yet (nothing instantiates them): {', '.join(report['missing'])}")
    if report.get("unknown_logs"):
        lines.append(f"  - no compiler report kept for {', '.join(report['unknown_logs'])}: `make clean` and grade again")
    if verbose and build_line(build):
        lines.append(build_line(build))
    if warnings and verbose:
        lines.append(f"  compiler warnings in {exercise}'s files:")
        lines.extend("    " + l for w in warnings for l in w.splitlines())
    elif verbose:
        lines.append(f"  no compiler warnings about {exercise}'s files")
    elif warnings:
        lines.append(f"  - the compiler warned {len(warnings)} time{'s' if len(warnings) != 1 else ''} about "
                     f"your files: `make grade EX={exercise[:2]} VERBOSE=1` shows where")
    return "\n".join(lines)


def feedback_html(rows: list[ExerciseRow], header: dict) -> str:
    """The student's feedback page: the table of `cells`, each lost point's reason, the plot."""
    esc = html.escape
    body = [f"<h1>Feedback: {esc(header['target'])}</h1>",
            f"<p>Seed <code>{header['seed']}</code>: replay with <code>make grade SEED={header['seed']}</code>. "
            f"Graded {esc(header['date'])}.</p>",
            "<table><tr><th>exercise</th><th>tests passed</th><th>throughput</th><th>vs reference</th>"
            "<th>of limit</th><th>points</th></tr>"]
    for r in rows:
        cls = "full" if r.points == r.max_points else ("zero" if r.points == 0 else "part")
        body.append(f"<tr class='{cls}'>" + "".join(f"<td>{esc(c)}</td>" for c in cells(r)) + "</tr>")
    body.append("</table>")
    for r in rows:
        lost = reasons(r)
        if lost:
            body.append(f"<h2>{esc(r.exercise)}: what lost points</h2><ul>")
            body += [f"<li><pre>{esc(x)}</pre></li>" for x in lost]
            body.append("</ul>")
    if _timed(rows):  # plot_student draws it
        body.append("<p><img src='throughput.png' alt='throughput against the reference and the hardware limit'></p>")
    style = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;color:#222}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:right}"
             "td:first-child{text-align:left}tr.full td:last-child{background:#dfd}"
             "tr.zero td:last-child{background:#fdd}tr.part td:last-child{background:#ffd}"
             "pre{white-space:pre-wrap;margin:0}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Feedback: {esc(header['target'])}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _timed(rows: list[ExerciseRow]) -> list[ExerciseRow]:
    """The rows with a measured throughput set against the yardstick's: those the plot shows."""
    return [r for r in rows if all((r.performance or {}).get(k) for k in ("rate", "reference_rate", "limit"))]


def plot_student(rows: list[ExerciseRow], path: Path) -> None:
    """The student's throughput beside the reference and the device limit, per timed exercise."""
    timed = _timed(rows)
    if not timed:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(timed) + 2), 3.8))
    for j, r in enumerate(timed):
        p = r.performance
        ax.bar(j - 0.2, 100 * p["rate"] / p["limit"], 0.4, color="tab:blue", label="yours" if j == 0 else None)
        ax.bar(j + 0.2, 100 * p["reference_rate"] / p["limit"], 0.4, color="tab:gray",
               label="reference" if j == 0 else None)
    ax.axhline(100, color="k", ls="--", lw=1, label="device limit")
    ax.set_xticks(range(len(timed)))
    ax.set_xticklabels([r.exercise for r in timed], rotation=15, ha="right")
    ax.set_ylabel("% of the device limit")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
