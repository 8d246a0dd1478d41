"""`make bench`: every exercise's reference kernels beside PyTorch and the device's limits.

Each exercise is timed in its own process (a fault in one costs only its row) with the harness
that grading uses (grader.verify.timer). The device's limits (copy bandwidth; strict-fp32 cuBLAS) are
measured in the same run. Writes bench-report/results.{json,md} and PNG plots.

    python -m grader.bench.benchmarks [--ex 01 02] [--out bench-report]
"""
from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader import env
from grader.bench import model_shapes

# ---------------------------------------------------------------------------- one exercise (child)


def bench_one(exercise: str) -> dict:
    import torch

    from grader.verify.timer import L2Flusher, time_fn
    from grader.verify.speed import Refill
    from grader.specs import by_exercise, import_exercise_module

    spec = by_exercise(exercise)
    bench = spec.benchmark()
    module = import_exercise_module(env.REPO / "solutions" / spec.exercise, spec)
    with spec.math():  # the state grading times in
        flush = L2Flusher()
        refill = Refill(bench)  # fresh values before every timed call, as in grading
        inputs = [bench.make_inputs(1000)]
        rows = []
        for name, call in spec.versions().items():
            t = time_fn(lambda inp, call=call: call(module, inp), inputs, refill=refill, flush=flush)
            rows.append({"version": name, "time_s": t.median_s, "rate": t.rate(bench.work), "samples": t.samples})
        base = time_fn(bench.baseline, inputs, refill=refill, flush=flush)
        rows.append({"version": "PyTorch", "time_s": base.median_s, "rate": base.rate(bench.work), "samples": base.samples})
    result = {"exercise": spec.exercise, "title": spec.title, "label": bench.label, "unit": bench.unit,
              "work": bench.work, "flops": bench.flops, "min_bytes": bench.min_bytes, "rows": rows}
    try:  # an extra report must not cost the main numbers
        from grader.bench.benchmark_extras import EXTRAS

        if spec.exercise in EXTRAS:
            result["extra"] = EXTRAS[spec.exercise]()
    except Exception as e:
        result["extra"] = {"error": f"{type(e).__name__}: {e}"}
    torch.cuda.synchronize()
    return result


def limits() -> dict:
    from grader.verify.timer import L2Flusher, copy_bandwidth, matmul_flops

    flush = L2Flusher()
    return {"copy_bandwidth": copy_bandwidth(2 << 30, flush=flush), "fp32_matmul": matmul_flops(8192, flush=flush)}


def system_info() -> dict:
    import torch

    info = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
            "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    info["driver"] = (env.nvidia_smi("driver_version") or ["?"])[0]
    return info


# ---------------------------------------------------------------------------- the run (parent)


def _child(args: list[str], timeout: float = 600) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [sys.executable, "-m", "grader.bench.benchmarks", *args, "--child-json", out.name]
        proc = subprocess.run(cmd, cwd=env.REPO, capture_output=True, text=True, timeout=timeout)
        try:
            return json.loads(Path(out.name).read_text())
        except ValueError:
            return {"error": (proc.stderr or proc.stdout)[-2000:] or f"exit code {proc.returncode}"}


def fmt_rate(rate: float, unit: str) -> str:
    return f"{rate / 1e9:,.0f} GB/s" if unit == "B" else f"{rate / 1e12:,.2f} TFLOP/s"


def tf32_lines(extra: dict) -> list[str]:
    """One terminal line per row of an extra table of a TF32 version beside cuDNN with TF32 allowed
    (rows with "vs_cudnn_tf32", e.g. 06's version 3)."""
    out = []
    for table in extra.values():
        for row in table if isinstance(table, list) else ():
            if isinstance(row, dict) and "vs_cudnn_tf32" in row:
                out.append(f"{'':28s} TF32 {row['shape'][:40]}: {row['tflops']:.1f} TFLOP/s, cuDNN TF32 "
                           f"{row['cudnn_tf32_tflops']:.1f}: {row['vs_cudnn_tf32']:.2f}x")
    return out


def layers_summary(rows: list[dict]) -> str:
    """One line: how the op did over the model layers (shape classes included), against PyTorch strict and
    with TF32, and the shape classes' worst apart."""
    timed = [r for r in rows if "skipped" not in r]
    if not timed:
        return f"model layers: none timed ({len(rows)} skipped)"
    strict = sorted(r["vs_strict"] for r in timed)
    tf32 = sorted(r["vs_tf32"] for r in timed)
    failed = sum(r.get("skipped", "").startswith("failed") for r in rows)
    skipped = len(rows) - len(timed) - failed
    classes = [r for r in timed if r.get("model") == model_shapes.CLASSES]
    return (f"model layers: {len(timed)} timed, vs PyTorch strict fp32 {strict[0]:.2f}x-{strict[-1]:.2f}x "
            f"(median {strict[len(strict) // 2]:.2f}x), vs TF32 allowed {tf32[0]:.2f}x-{tf32[-1]:.2f}x "
            f"(median {tf32[len(tf32) // 2]:.2f}x)"
            + (f"; the {len(classes)} shape classes' worst {min(r['vs_strict'] for r in classes):.2f}x strict, "
               f"{min(r['vs_tf32'] for r in classes):.2f}x TF32" if classes else "")
            + (f"; {skipped} not supported yet" if skipped else "") + (f"; {failed} FAILED" if failed else ""))


def layers_table(rows: list[dict]) -> list[str]:
    """The layers as a Markdown table: time and rate, and PyTorch's time / ours in both math modes."""
    out = ["Layers of real models and shape classes the models lack (grader/bench/model_shapes.py), each distinct "
           "shape once (count: how many layers have it). vs = PyTorch's time / ours: above 1.00x ours is faster. "
           "TF32: PyTorch with TF32 allowed "
           "(its default for convolutions) beside our TF32 version where there is one, else our strict time.", "",
           "| model | layer | shape | count | ours | TFLOP/s | vs strict fp32 | vs TF32 |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['model']} | {r['layer']} | {r['shape']} | {r['count']} | not run: {r['skipped']} | | | |")
        else:
            out.append(f"| {r['model']} | {r['layer']} | {r['shape']} | {r['count']} | {r['ours_us']:,.1f} us | "
                       f"{r['tflops']:.2f} | {r['vs_strict']:.2f}x | {r['vs_tf32']:.2f}x |")
    return out


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return "" if value is None else str(value).replace("|", "/")


def _records(value) -> list[dict] | None:
    """`value` as table rows of scalars: a list of flat records; a mapping of flat records (its key
    becomes the first column, "case"), one or two levels deep; or a flat mapping (one row per key)."""
    if isinstance(value, list) and value and all(isinstance(r, dict) and all(map(_scalar, r.values())) for r in value):
        return value
    if not isinstance(value, dict) or not value:
        return None
    if all(map(_scalar, value.values())):
        return [{"case": k, "value": v} for k, v in value.items()]
    rows = []
    for key, inner in value.items():
        if isinstance(inner, dict) and all(map(_scalar, inner.values())):
            rows.append({"case": key, **inner})
        elif isinstance(inner, dict) and all(isinstance(x, dict) and all(map(_scalar, x.values())) for x in inner.values()):
            rows += [{"case": f"{key} / {name}", **x} for name, x in inner.items()]
        else:
            return None
    return rows


def extras_markdown(extra: dict) -> list[str]:
    """An exercise's other measurements on the results page: single values as a list, records as
    tables (one column per field), anything shaped otherwise as JSON."""
    singles = [f"- {key}: {_cell(value)}" for key, value in extra.items() if _scalar(value)]
    out = singles + ([""] if singles else [])
    for key, value in extra.items():
        if _scalar(value):
            continue
        rows = _records(value)
        if rows is None:
            out += [f"**{key}**", "", "```json", json.dumps(value, indent=1), "```", ""]
            continue
        columns = list(dict.fromkeys(k for row in rows for k in row))
        out += [f"**{key}**", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        out += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
        out.append("")
    return out


def render(results: list[dict], lim: dict, info: dict) -> tuple[str, str]:
    """The terminal table and the Markdown page."""
    lines = [f"{info['gpu']} · driver {info['driver']} · CUDA {info['cuda']} · cuDNN {info['cudnn']} · "
             f"torch {info['torch']} · {info['date']}",
             f"limits measured in this run: copy {fmt_rate(lim['copy_bandwidth'], 'B')}, "
             f"strict-fp32 cuBLAS {fmt_rate(lim['fp32_matmul'], 'FLOP')}", ""]
    md = ["# Benchmarks", "", f"- device: {info['gpu']} ({info['sms']} SMs), driver {info['driver']}",
          f"- software: torch {info['torch']}, CUDA {info['cuda']}, cuDNN {info['cudnn']}",
          f"- date: {info['date']}",
          f"- limits measured in the same run: device-to-device copy {fmt_rate(lim['copy_bandwidth'], 'B')} "
          f"(bytes read + written), strict-fp32 cuBLAS 8192^3 {fmt_rate(lim['fp32_matmul'], 'FLOP')}", "",
          "Median of many runs, CUDA events, L2 flushed between runs, inputs rotated. Rates count the "
          "fewest bytes the op must move (B) or its floating-point operations (FLOP).", "",
          "| exercise | shape | version | time | throughput | vs PyTorch | of limit |",
          "|---|---|---|---:|---:|---:|---:|"]
    head = f"{'exercise':28s} {'version':14s} {'time':>10s} {'throughput':>16s} {'vs PyTorch':>10s} {'of limit':>8s}"
    lines += [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"{r.get('exercise', '?'):28s} ERROR {r['error'].splitlines()[-1][:80]}")
            md.append(f"| {r.get('exercise', '?')} | | error | | | | |")
            continue
        limit = lim["copy_bandwidth"] if r["unit"] == "B" else lim["fp32_matmul"]
        base = next(x for x in r["rows"] if x["version"] == "PyTorch")
        for x in r["rows"]:
            ratio = x["rate"] / base["rate"]
            cells = (f"{x['time_s'] * 1e6:,.1f} us", fmt_rate(x["rate"], r["unit"]), f"{ratio:.2f}x",
                     f"{x['rate'] / limit:.0%}")
            lines.append(f"{r['exercise']:28s} {x['version']:14s} {cells[0]:>10s} {cells[1]:>16s} {cells[2]:>10s} {cells[3]:>8s}")
            md.append(f"| {r['exercise']} | {r['label']} | {x['version']} | " + " | ".join(cells) + " |")
        if r.get("extra"):
            rest = {k: v for k, v in r["extra"].items() if k != model_shapes.EXTRA_KEY}
            if rest:
                lines.append(f"{'':28s} extra: {json.dumps(rest)[:200]}")
            lines += tf32_lines(rest)
            if r["extra"].get(model_shapes.EXTRA_KEY):
                lines.append(f"{'':28s} {layers_summary(r['extra'][model_shapes.EXTRA_KEY])}")
    extras = [r for r in results if r.get("extra")]
    if extras:
        md += ["", "## More measurements", ""]
        for r in extras:
            rest = {k: v for k, v in r["extra"].items() if k != model_shapes.EXTRA_KEY}
            md += [f"### {r['exercise']}", ""]
            if rest:
                md += extras_markdown(rest)
            if r["extra"].get(model_shapes.EXTRA_KEY):
                md += layers_table(r["extra"][model_shapes.EXTRA_KEY]) + [""]
    md += ["", "![throughput](throughput.png)", "", "![roofline](roofline.png)", ""]
    if layer_ratios(results):
        md += ["![each op on the model layers: worst and median time ratio against PyTorch](layers.png)", ""]
    return "\n".join(lines), "\n".join(md)


def layer_ratios(results: list[dict]) -> list[tuple[str, dict]]:
    """(exercise, {mode: (worst, median)}) for each exercise with timed model-layer rows, mode "strict fp32"
    and "TF32 allowed": PyTorch's time / ours over its distinct layers (above 1, ours is faster)."""
    out = []
    for r in results:
        timed = [x for x in (r.get("extra") or {}).get(model_shapes.EXTRA_KEY, []) if "skipped" not in x]
        if timed:
            ratios = {}
            for mode, key in (("strict fp32", "vs_strict"), ("TF32 allowed", "vs_tf32")):
                values = sorted(x[key] for x in timed)
                ratios[mode] = (values[0], values[len(values) // 2])
            out.append((r["exercise"], ratios))
    return out


def plot(results: list[dict], lim: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if "rows" in r]
    # 1) throughput per exercise, as a fraction of the device's limit for its kind of work
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(ok) + 2), 4.2))
    versions = sorted({x["version"] for r in ok for x in r["rows"]}, key=lambda v: (v == "PyTorch", v))
    # the reference in one strong colour, PyTorch in light grey, each numbered version in its own
    # colour (tab10's grey, index 7, would look like PyTorch's)
    palette = [plt.get_cmap("tab10")(i) for i in (1, 2, 3, 4, 5, 6, 8, 9)]
    numbered = [v for v in versions if v not in ("reference", "PyTorch")]
    colors = {v: palette[i % len(palette)] for i, v in enumerate(numbered)}
    colors.update({"reference": plt.get_cmap("tab10")(0), "PyTorch": "0.75"})
    labelled = set()
    for j, r in enumerate(ok):  # each exercise's bars side by side, centred on its tick
        limit = lim["copy_bandwidth"] if r["unit"] == "B" else lim["fp32_matmul"]
        rows = sorted(r["rows"], key=lambda x: versions.index(x["version"]))
        width = 0.8 / len(rows)
        for i, row in enumerate(rows):
            v = row["version"]
            ax.bar(j - 0.4 + (i + 0.5) * width, 100 * row["rate"] / limit, width, color=colors[v],
                   edgecolor="0.3", linewidth=0.5, label=None if v in labelled else v)
            labelled.add(v)
    ax.axhline(100, color="k", lw=1, ls="--", label="device limit (measured)")
    _save_bars(fig, ax, [r["exercise"] for r in ok], "% of the limit (copy bandwidth or fp32 cuBLAS)",
               "Throughput of the reference kernels and PyTorch", out / "throughput.png")

    # 2) roofline: achieved FLOP/s against arithmetic intensity, under the measured ceilings
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    bw, peak = lim["copy_bandwidth"], lim["fp32_matmul"]
    import numpy as np

    ai = np.logspace(-2, 3, 200)
    ax.loglog(ai, np.minimum(bw * ai, peak) / 1e12, "k-", lw=1, label="roofline (measured)")
    markers = "osD^vP*Xhp"  # exercises of one intensity and rate (LeakyReLU, ELU) stay apart
    for k, r in enumerate(ok):
        flops = r["work"] if r["unit"] == "FLOP" else r.get("flops")
        nbytes = r["work"] if r["unit"] == "B" else r.get("min_bytes")
        if not flops or not nbytes:
            continue
        best = max((x for x in r["rows"] if x["version"] != "PyTorch"), key=lambda x: x["rate"])
        seconds = best["time_s"]
        ax.loglog([flops / nbytes], [flops / seconds / 1e12], markers[k % len(markers)], label=r["exercise"],
                  markersize=9 - (k % 3) * 2, alpha=0.85)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of the fewest bytes moved)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("Roofline of the reference kernels")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "roofline.png", dpi=120)
    plt.close(fig)

    # 3) each op on the model layers: its worst and its median ratio against PyTorch, in both math modes
    ops = layer_ratios(results)
    if ops:
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(ops) + 2), 4.2))
        for i, (mode, color) in enumerate((("strict fp32", plt.get_cmap("tab10")(0)),
                                           ("TF32 allowed", plt.get_cmap("tab10")(1)))):
            xs = [j - 0.2 + 0.4 * i for j in range(len(ops))]
            medians = [ratios[mode][1] for _, ratios in ops]
            worst = [ratios[mode][0] for _, ratios in ops]
            ax.bar(xs, medians, 0.38, color=color, alpha=0.85, label=f"median, {mode}")
            ax.plot(xs, worst, "v", color="k", markersize=7, label="worst layer" if i == 0 else None)
        ax.axhline(1.0, color="k", lw=1, ls="--", label="PyTorch")
        ax.axhline(0.8, color="0.5", lw=1, ls=":", label="0.8x")
        _save_bars(fig, ax, [e for e, _ in ops], "PyTorch's time / ours (above 1: faster)",
                   "The reference ops on the layers of real models", out / "layers.png")


def _save_bars(fig, ax, exercises: list[str], ylabel: str, title: str, path: Path) -> None:
    """A chart of one group of bars per exercise: its labels, the legend beside it, written to `path`."""
    import matplotlib.pyplot as plt

    ax.set_xticks(range(len(exercises)))
    ax.set_xticklabels(exercises, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


README_BEGIN = "<!-- bench:begin (written by `make bench PUBLISH=1`) -->"
README_END = "<!-- bench:end -->"


def publish(report: Path, docs: Path = env.REPO / "docs" / "results", readme: Path = env.REPO / "README.md") -> Path:
    """Copy a `make bench` report into docs/results/<gpu>/ and put its table into the README.

    The README shows the table and the throughput plot between the bench markers; the folder keeps
    the page, the JSON (every sample) and the plots, named by the device so runs on different
    GPUs sit side by side."""
    data = json.loads((report / "results.json").read_text())
    info = data["info"]
    slug = re.sub(r"[^a-z0-9]+", "-", info["gpu"].lower()).strip("-")
    folder = docs / slug
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("results.json", "results.md", "throughput.png", "roofline.png", "layers.png"):
        if (report / name).exists():
            (folder / name).write_bytes((report / name).read_bytes())
    _, md = render(data["results"], data["limits"], info)
    lines = md.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("| exercise |"))
    table = "\n".join(itertools.takewhile(lambda l: l.startswith("|"), lines[start:]))
    rel = folder.relative_to(readme.parent)
    block = "\n".join([
        README_BEGIN,
        f"Measured by `make bench` on {info['gpu']} (driver {info['driver']}, CUDA {info['cuda']}, cuDNN "
        f"{info['cudnn']}, torch {info['torch']}), {info['date']}; the limits were measured in the same run "
        f"(copy {fmt_rate(data['limits']['copy_bandwidth'], 'B')}, strict-fp32 cuBLAS "
        f"{fmt_rate(data['limits']['fp32_matmul'], 'FLOP')}). Details: [{rel}/results.md]({rel}/results.md).",
        "",
        table,
        "",
        f"![throughput of each reference kernel against PyTorch and the device limit]({rel}/throughput.png)",
        README_END,
    ])
    text = readme.read_text()
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        text = head + block + rest.split(README_END, 1)[1]
    else:
        text = text.rstrip() + "\n\n## Measured speed\n\n" + block + "\n"
    readme.write_text(text)
    return folder


def main(argv: list[str] | None = None) -> int:
    from grader.run.cli import UsageParser  # as `python -m grader`: a wrong usage in one line

    parser = UsageParser(prog="python -m grader.bench.benchmarks", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ex", nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=env.REPO / "bench-report")
    parser.add_argument("--publish", action="store_true",
                        help="then copy the report into docs/results/<gpu>/ and its table into README.md")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--limits", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    env.configure()

    if args.one or args.limits:
        data = bench_one(args.one) if args.one else {"limits": limits(), "info": system_info()}
        args.child_json.write_text(json.dumps(data))
        return 0

    if not env.gpu_present():
        print("make bench needs a CUDA GPU; none here.")
        return 1
    from grader.specs import select

    specs = [s for s in select(args.ex) if s.benchmark() is not None and (env.REPO / "solutions" / s.exercise).is_dir()]
    from grader.run.grading import build_all

    build_all([env.REPO / "solutions" / s.exercise for s in specs], jobs=4)
    head = _child(["--limits"])
    if "error" in head:
        print(head["error"])
        return 1
    results = []
    for s in specs:
        print(f"timing {s.exercise} ...", flush=True)
        r = _child(["--one", s.exercise])
        r.setdefault("exercise", s.exercise)
        results.append(r)
    text, md = render(results, head["limits"], head["info"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({**head, "results": results}, indent=1))
    (args.out / "results.md").write_text(md)
    plot(results, head["limits"], args.out)
    print()
    print(text)
    print(f"\nwrote {args.out}/results.md, results.json, throughput.png, roofline.png")
    ok = all("error" not in r for r in results)
    if args.publish:
        if ok and not args.ex:
            print(f"published to {publish(args.out)} and README.md")
        else:
            print("not published: only a full run with no failed exercise is published")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
