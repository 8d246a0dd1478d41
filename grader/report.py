"""Presenting a grading run: the terminal table, the Markdown and HTML feedback, the student's plot.

Every view shows the same cells per exercise (`cells`) and the same reasons (`reasons`): they are
computed here once, and each view only lays them out.
"""
from __future__ import annotations

import html
import textwrap
from pathlib import Path


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


def cells(row: dict) -> tuple[str, str, str, str, str, str]:
    """One exercise as every view shows it: exercise, tests passed (or the status), throughput, ratio to
    the reference, fraction of the device limit, points."""
    rate, ratio, frac = _perf_cells(row)
    tests = f"{row.get('passed', 0)}/{row.get('total_tests', 0)}" if row["status"] == "graded" else row["status"]
    return row["exercise"], tests, rate, ratio, frac, f"{_fmt_points(row['points'])}/{row['max_points']}"


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
    shown = [cells(row) for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in shown)) if shown else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*head))
    lines.append("  ".join("-" * w for w in widths))
    for row, c in zip(rows, shown):
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
        out.append("| " + " | ".join(cells(row)) + " |")
    for row in rows:
        lost = reasons(row)
        if lost:
            out += ["", f"## {row['exercise']}: what lost points", ""]
            out += ["```", *lost, "```"]
    return "\n".join(out) + "\n"


def feedback_html(rows: list[dict], header: dict) -> str:
    """The student's feedback page: the table of `cells`, each lost point's reason, the plot."""
    esc = html.escape
    body = [f"<h1>Feedback: {esc(header['target'])}</h1>",
            f"<p>Seed <code>{header['seed']}</code>: replay with <code>make grade SEED={header['seed']}</code>. "
            f"Graded {esc(header['date'])}.</p>",
            "<table><tr><th>exercise</th><th>tests passed</th><th>throughput</th><th>vs reference</th>"
            "<th>of limit</th><th>points</th></tr>"]
    for r in rows:
        cls = "full" if r["points"] == r["max_points"] else ("zero" if r["points"] == 0 else "part")
        body.append(f"<tr class='{cls}'>" + "".join(f"<td>{esc(c)}</td>" for c in cells(r)) + "</tr>")
    body.append("</table>")
    for r in rows:
        lost = reasons(r)
        if lost:
            body.append(f"<h2>{esc(r['exercise'])}: what lost points</h2><ul>")
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


def _timed(rows: list[dict]) -> list[dict]:
    """The rows with a measured throughput: those the plot shows."""
    return [r for r in rows if (r.get("performance") or {}).get("rate")]


def plot_student(rows: list[dict], path: Path) -> None:
    """The student's throughput beside the reference and the device limit, per timed exercise."""
    timed = _timed(rows)
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
