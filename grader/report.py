"""Presenting a grading run: the terminal table, Markdown feedback, and the JSON report."""
from __future__ import annotations

import textwrap


def format_rate(rate: float | None, unit: str) -> str:
    if rate is None:
        return "-"
    if unit == "B":
        return f"{rate / 1e9:,.0f} GB/s"
    return f"{rate / 1e12:,.1f} TFLOP/s"


def _perf_cells(row: dict) -> tuple[str, str, str]:
    perf = row.get("performance") or {}
    if "rate" not in perf:
        return "-", "-", "-"
    return (
        format_rate(perf["rate"], perf["unit"]),
        f"{perf['ratio']:.2f}x",
        f"{perf['fraction_of_limit']:.0%}",
    )


def _fmt_points(p: float) -> str:
    return f"{p:g}"


def reasons(row: dict) -> list[str]:
    """One line per group that lost points, the reason first-hand."""
    if row["status"] != "graded":
        return [f"{row['status']}: {row['error']}"]
    out, skipped = [], []
    for group, g in row["groups"].items():
        if g["state"] == "skipped":
            skipped.append(group)
        elif g["points"] < g["max"] and g["reason"]:
            out.append(f"{group} ({_fmt_points(g['points'])}/{g['max']}): {g['reason']}")
    if skipped:
        why = row["groups"][skipped[0]]["reason"].split(": ", 1)[-1]
        out.append(f"not graded here: {', '.join(skipped)} ({why})")
    return out


def table(rows: list[dict], width: int = 120) -> str:
    head = ("exercise", "tests", "throughput", "vs ref", "of limit", "points")
    lines = []
    cells = []
    for row in rows:
        rate, ratio, frac = _perf_cells(row)
        tests = f"{row.get('passed', 0)}/{row.get('total_tests', 0)}" if row["status"] == "graded" else row["status"]
        cells.append((row["exercise"], tests, rate, ratio, frac, f"{_fmt_points(row['points'])}/{row['max_points']}"))
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*head))
    lines.append("  ".join("-" * w for w in widths))
    for row, c in zip(rows, cells):
        lines.append(fmt.format(*c))
        for reason in reasons(row):
            first, *rest = reason.splitlines() or [""]
            wrapped = textwrap.wrap(first, width=width - 6, subsequent_indent="      ") or [""]
            lines.append("    - " + "\n".join(wrapped))
            lines.extend("      " + r for r in rest[:12])
    total = sum(r["points"] for r in rows)
    maximum = sum(r["max_points"] for r in rows)
    lines.append(f"\ntotal: {_fmt_points(round(total, 2))}/{maximum}")
    return "\n".join(lines)


def markdown(rows: list[dict], header: dict) -> str:
    """Feedback for a person: the score table, each lost point's reason, how to replay, and what
    the compiler knows about each kernel."""
    out = [f"# Grading report: {header.get('target', '')}", ""]
    out.append(f"- seed: `{header.get('seed')}` (replay: `make grade SEED={header.get('seed')}`)")
    if header.get("device"):
        out.append(f"- device: {header['device']}")
    out.append("")
    out.append("| exercise | tests | throughput | vs reference | of limit | points |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        rate, ratio, frac = _perf_cells(row)
        tests = f"{row.get('passed', 0)}/{row.get('total_tests', 0)}" if row["status"] == "graded" else row["status"]
        out.append(f"| {row['exercise']} | {tests} | {rate} | {ratio} | {frac} | {_fmt_points(row['points'])}/{row['max_points']} |")
    for row in rows:
        lost = reasons(row)
        if lost:
            out += ["", f"## {row['exercise']}: what lost points", ""]
            out += ["```", *lost, "```"]
    out += _resources_markdown(rows)
    return "\n".join(out) + "\n"


def _resources_markdown(rows: list[dict]) -> list[str]:
    out = []
    for row in rows:
        text = resources_text(row["exercise"], row.get("resources"), verbose=True)
        if text:
            out += ["", f"## {row['exercise']}: what the compiler knows", "", "```", text, "```"]
    return out


# ------------------------------------------------------------------ what the compiler knows


def _pct(x: float) -> str:
    from grader.resources import _pct

    return _pct(x)


def _occupancy_cell(k: dict) -> str:
    if not k.get("launches"):
        return "no launch in the source"
    if not k.get("occupancy"):
        return "block size unknown"
    cells = []
    for occ in k["occupancy"]:
        cell = _pct(occ["occupancy"])
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
    from grader.resources import _kib

    cell = _kib(k["static_smem"])
    dynamic = sorted({l["dynamic_smem"] for l in k.get("launches", []) if l.get("dynamic_smem")})
    if dynamic:
        cell += " + " + "/".join(_kib(d) for d in dynamic) + " dyn"
    if any(l.get("dynamic_smem") is None for l in k.get("launches", [])):
        cell += " + ? dyn"
    return cell


def _kernel_order(report: dict) -> list[dict]:
    return [k for k in report.get("kernels", []) if k["arch"] == report.get("arch")]


def resources_text(exercise: str, report: dict | None, verbose: bool = False, full: bool = True) -> str:
    """The resource report of one exercise for the terminal: per kernel (the architecture the GPU
    runs, else the newest built) registers, spills, shared memory, block size and occupancy, a note
    for each spill or limited occupancy, and the compiler's warnings (their count unless `verbose`).
    `full` False: one summary line (a grade of many exercises; report.md has the tables)."""
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
        return f"{exercise}: no kernel compiled yet"
    if not full:
        regs = [k["registers"] for k in kernels]
        occ = [o["occupancy"] for k in kernels for o in k.get("occupancy") or []]
        spills = sum(1 for k in kernels if k["spill_stores"] or k["spill_loads"])
        summary = (f"{exercise}: {len(kernels)} kernel{'s' if len(kernels) != 1 else ''} on {report.get('arch')}"
                   + (f", {min(regs)}-{max(regs)} registers" if regs else "")
                   + (f", {spills} spilling" if spills else ", no spills")
                   + (f", occupancy {_pct(min(occ))}-{_pct(max(occ))}" if occ else "")
                   + (f", {len(warnings)} compiler warning{'s' if len(warnings) != 1 else ''}" if warnings else ""))
        return summary
    if not kernels:
        missing = report.get("missing") or []
        lines.append(f"{exercise}: no kernel compiled yet" + (
            f" (nothing instantiates {', '.join(missing)}: the launches that would are yours to write)" if missing else ""))
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
    if warnings and verbose:
        lines.append(f"  compiler warnings in {exercise}'s files:")
        lines.extend("    " + l for w in warnings for l in w.splitlines())
    elif warnings:
        lines.append(f"  - the compiler warned {len(warnings)} time{'s' if len(warnings) != 1 else ''} about "
                     f"your files: `make grade EX={exercise[:2]} VERBOSE=1` shows where")
    return "\n".join(lines)
