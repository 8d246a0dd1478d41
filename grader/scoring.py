"""Turning test outcomes into points: all-or-nothing per group, tiers for speed."""
from __future__ import annotations

from grader.spec import PERFORMANCE, Spec


def score_exercise(spec: Spec, tests: list[dict], status: str = "graded", error: str = "") -> dict:
    """The exercise's row of the report: points per group, reasons, speed."""
    row = {
        "exercise": spec.exercise,
        "title": spec.title,
        "status": status,
        "error": error,
        "points": 0.0,
        "max_points": spec.total,
        "groups": {},
        "tests": tests,
        "performance": None,
    }
    if status != "graded":
        for group, pts in spec.points.items():
            row["groups"][group] = {"points": 0.0, "max": pts, "state": status, "reason": error}
        return row
    by_group: dict[str, list[dict]] = {}
    for t in tests:
        by_group.setdefault(t.get("group") or "", []).append(t)
    for group, pts in spec.points.items():
        if group == PERFORMANCE:
            continue
        members = by_group.get(group, [])
        failed = [t for t in members if t["outcome"] == "failed"]
        unfinished = [t for t in members if t["outcome"] in ("skipped", "not run")]
        if not members:
            state, reason = "not run", "no test of this group ran (deselected?)"
        elif failed:
            state, reason = "failed", f"{failed[0]['name']}: {failed[0]['reason']}"
            if len(failed) > 1:
                reason += f" (and {len(failed) - 1} more failed)"
        elif unfinished:
            state, reason = "skipped", f"{unfinished[0]['name']}: {unfinished[0]['reason']}"
        else:
            state, reason = "passed", ""
        row["groups"][group] = {
            "points": float(pts) if state == "passed" else 0.0,
            "max": pts,
            "state": state,
            "reason": reason,
            "passed": sum(t["outcome"] == "passed" for t in members),
            "total": len(members),
        }
    if PERFORMANCE in spec.points:
        row["groups"][PERFORMANCE] = _score_performance(spec, by_group.get(PERFORMANCE, []), row["groups"])
        perf_test = (by_group.get(PERFORMANCE) or [None])[0]
        if perf_test:
            row["performance"] = perf_test.get("properties", {}).get("performance")
    row["points"] = sum(g["points"] for g in row["groups"].values())
    row["passed"] = sum(t["outcome"] == "passed" for t in tests)
    row["total_tests"] = len(tests)
    return row


def _score_performance(spec: Spec, tests: list[dict], groups: dict) -> dict:
    pts = spec.points[PERFORMANCE]
    entry = {"points": 0.0, "max": pts, "state": "not run", "reason": "", "passed": 0, "total": 1}
    if not tests:
        entry["reason"] = "the timing did not run"
        return entry
    test = tests[0]
    perf = test.get("properties", {}).get("performance") or {}
    missing = [g for g in spec.perf_requires if groups.get(g, {}).get("state") != "passed"]
    if test["outcome"] in ("skipped", "not run"):
        entry.update(state="skipped", reason=test["reason"] or "not run")
    elif missing:
        entry.update(state="failed", reason=f"speed counts only once {', '.join(missing)} passes")
    elif test["outcome"] == "failed" and not perf.get("tier_fraction"):
        entry.update(state="failed", reason=test["reason"])
    else:
        fraction = perf.get("tier_fraction", 0.0)
        entry.update(points=round(pts * fraction, 2), state="passed" if fraction >= 1 else "partial",
                     reason="" if fraction >= 1 else f"{perf.get('ratio', 0):.2f}x of the reference earns {fraction:.0%}",
                     passed=1)
    return entry
