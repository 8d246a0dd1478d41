"""Try register budgets and ring depths for 06's version 3 (TF32 tensor cores) and time each beside
cuDNN with TF32 allowed.

    python scripts/tune_conv3.py [--configs A,B,C] [--out /tmp/tune3]

Each configuration is a copy of solutions/06_conv2d whose version-3 constants (ring stages, blocks
per SM the register budget must allow for 64- and 128-channel tiles) are rewritten; the copies are
built in parallel (one process each, as the grader builds), checked against float64 with 06's TF32
tolerance, then timed on the benchmark's shape and the extra shapes of `make bench` with
grader.verify.timer.time_fn (L2 flushed, median) beside F.conv2d with TF32 allowed and cuDNN's autotuner on.
One row per configuration and shape (a developer's tool: nothing is graded or written to the repo).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# name: (ring stages, blocks per SM for BN3 = 64, for BN3 = 128)
CONFIGS = {
    "A": (3, 4, 2),
    "B": (3, 3, 2),  # the solution's
    "C": (3, 3, 1),
    "D": (4, 4, 2),
    "E": (4, 3, 2),
    "F": (3, 2, 1),
    "G": (4, 3, 1),
}
LINES = {
    r"constexpr int kStages3 = \d+;": "constexpr int kStages3 = {0};",
    r"constexpr int kMinBlocks3 = BN3 == 64 \? \d+ : \d+;": "constexpr int kMinBlocks3 = BN3 == 64 ? {1} : {2};",
}
# (label, x shape, weight shape, stride, padding)
SHAPES = [
    ("bench 32x64x56x56 64->64 3x3", (32, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("32x128x28x28 128->128 3x3", (32, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    ("32x512x7x7 512->512 3x3", (32, 512, 7, 7), (512, 512, 3, 3), 1, 1),
    ("32x128x28x28 128->256 3x3 s2", (32, 128, 28, 28), (256, 128, 3, 3), 2, 1),
    ("32x256x56x56 256->64 1x1", (32, 256, 56, 56), (64, 256, 1, 1), 1, 0),
]


def write_copy(name: str, config: tuple, out: Path) -> Path:
    folder = out / f"config_{name}" / "06_conv2d"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(REPO / "solutions" / "06_conv2d", folder)
    source = folder / "conv2d.cu"
    text = source.read_text()
    for pattern, template in LINES.items():
        text, count = re.subn(pattern, template.format(*config), text)
        if count != 1:
            raise SystemExit(f"conv2d.cu: {pattern!r} found {count} times; this script knows the solution's constants")
    source.write_text(text)
    return folder


def build(folder: Path) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, "-m", "grader.toolchain.build", str(folder)], cwd=REPO, capture_output=True, text=True)
    return done.returncode == 0, done.stderr[-3000:]


def measure(folders: dict[str, Path]) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from grader.specs import by_exercise, import_exercise_module
    from grader.specs.ex06_conv2d import tf32_tolerance
    from grader.verify.timer import L2Flusher, math_mode, time_fn

    spec = by_exercise("06_conv2d")
    flush = L2Flusher()
    g = torch.Generator(device="cuda").manual_seed(6)
    # (x shape, weight shape, stride, padding, dilation): channels off and on whole steps of 16 (the
    # generic and the tap-major order), strides, dilations and a non-square kernel
    checks = []
    for xs, ws, st, pd, dl in (((3, 37, 23, 19), (70, 37, 3, 3), (1, 1), (1, 1), (1, 1)),
                               ((2, 64, 17, 13), (72, 64, 3, 3), (2, 2), (1, 1), (1, 1)),
                               ((2, 32, 15, 11), (40, 32, 1, 1), (1, 1), (0, 0), (1, 1)),
                               ((2, 16, 21, 18), (136, 16, 3, 5), (1, 2), (2, 1), (2, 1))):
        x = torch.randn(xs, generator=g, device="cuda")
        w = torch.randn(ws, generator=g, device="cuda") * (ws[1] * ws[2] * ws[3]) ** -0.5
        b = torch.randn(ws[0], generator=g, device="cuda")
        exact = F.conv2d(x.double(), w.double(), b.double(), st, pd, dl)
        checks.append((x, w, b, st, pd, dl, exact, tf32_tolerance(x, w, b, st, pd, dl)))
    base, rows = {}, []
    for name, folder in folders.items():
        module = import_exercise_module(folder, spec)
        # the worst error as a fraction of its tolerance (ok: <= 1)
        err = max(((module.conv2d(x, w, b, st, pd, dl, version=3).double() - exact).norm() / exact.norm()).item() / tol
                  for x, w, b, st, pd, dl, exact, tol in checks)
        with math_mode(tf32=True, cudnn_benchmark=True):
            for label, xs, ws, s, p in SHAPES:
                inputs = [(torch.randn(xs, generator=g, device="cuda"),
                           torch.randn(ws, generator=g, device="cuda") * (ws[1] * ws[2] * ws[3]) ** -0.5)
                          for _ in range(2)]
                ours = time_fn(lambda inp: module.conv2d(inp[0], inp[1], None, s, p, version=3), inputs, flush=flush)
                if label not in base:
                    base[label] = time_fn(lambda inp: F.conv2d(inp[0], inp[1], None, s, p), inputs, flush=flush).median_s
                row = {"config": name, "stages": CONFIGS[name][0], "min_blocks": CONFIGS[name][1:], "shape": label,
                       "error_vs_tolerance": err, "ok": err <= 1, "us": round(ours.median_s * 1e6, 1),
                       "cudnn_us": round(base[label] * 1e6, 1), "vs_cudnn_tf32": round(base[label] / ours.median_s, 3)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", type=Path, default=Path("/tmp/tune3"))
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args()
    names = args.configs.split(",")
    folders = {name: write_copy(name, CONFIGS[name], args.out) for name in names}
    with ThreadPoolExecutor(args.jobs) as pool:
        built = dict(zip(names, pool.map(build, folders.values())))
    for name, (ok, log) in built.items():
        if not ok:
            print(f"config {name} {CONFIGS[name]}: build failed\n{log}")
    rows = measure({k: v for k, v in folders.items() if built[k][0]})
    print(f"{'config':6s} {'stages':>6s} {'blocks':>7s}  {'shape':32s} {'us':>8s} {'cuDNN':>8s} {'ratio':>6s} {'err/tol':>8s}")
    for r in rows:
        print(f"{r['config']:6s} {r['stages']:6d} {str(r['min_blocks']):>7s}  {r['shape']:32s} {r['us']:8.1f} "
              f"{r['cudnn_us']:8.1f} {r['vs_cudnn_tf32']:6.3f} {r['error_vs_tolerance']:8.2f}{'' if r['ok'] else '!'}")
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
