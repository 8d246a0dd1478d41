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
    for check in row.get("not_run", []):  # costs nothing (but in a strict grade, where its group says so)
        out.append(f"not run on this GPU: {check}")
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
    """Feedback for a person: the score table, each lost point's reason, and how to replay."""
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
    return "\n".join(out) + "\n"
