"""Try tile shapes for 05's kernel 5 (tensor cores) and time each beside cuBLAS at the same precision.

    python scripts/tune_matmul5.py [--n 4096] [--configs A,C,E] [--out /tmp/tune5]

Each configuration is a copy of solutions/05_matmul whose kernel-5 constants (block tile, warps,
ring depth, blocks per SM) are rewritten; the copies are built in parallel (one process each, as the
grader builds), checked against float64 on an odd-sized product, then timed at n^3 in TF32
(float32 inputs) and BF16 with grader.verify.timer.time_fn (L2 flushed, median), beside torch.matmul with
TF32 allowed and in bfloat16. Prints one row per configuration; the fastest correct one is what
the solution's constants should become (a developer's tool: nothing is graded or written to the repo).
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

# name: (block rows, block columns, warps down, warps across, ring stages, blocks per SM, 16-byte chunks of k
# per A row per stage)
CONFIGS = {
    "A": (128, 128, 2, 4, 3, 2, 4),  # 8 warps of 64 x 32
    "B": (128, 128, 2, 4, 4, 2, 4),
    "C": (128, 128, 2, 2, 3, 2, 4),  # 4 warps of 64 x 64: half the fragment loads per mma
    "D": (128, 128, 2, 2, 4, 2, 4),
    "E": (128, 256, 2, 4, 3, 1, 4),  # 8 warps of 64 x 64
    "F": (128, 256, 2, 4, 4, 1, 4),
    "G": (256, 128, 4, 2, 3, 1, 4),
    "H": (256, 128, 4, 2, 4, 1, 4),
    "I": (128, 128, 2, 2, 3, 3, 4),  # C with three blocks per SM (3 x 48 KiB of ring)
    "J": (128, 128, 2, 2, 4, 3, 4),
    "K": (128, 128, 2, 2, 3, 2, 8),  # C with 128 bytes of k per A row per stage, half the barriers (the solution's)
    "L": (128, 128, 2, 2, 4, 1, 8),
    "M": (128, 128, 2, 2, 2, 2, 8),
    "N": (128, 256, 2, 4, 3, 1, 8),
    "O": (256, 128, 4, 2, 3, 1, 8),  # 8 warps of 64 x 64, one block per SM (3 x 48 KiB of ring)
    "R": (256, 128, 4, 2, 4, 1, 8),
    "S": (128, 128, 2, 4, 3, 2, 8),  # 8 warps of 64 x 32, two blocks per SM: 16 warps hiding latency
    "T": (128, 128, 4, 2, 3, 2, 8),  # 8 warps of 32 x 64
}
KERNEL5 = "matmul_tensor_cores.cu"  # kernel 5's file in solutions/05_matmul
LINES = {  # the constant lines of KERNEL5, as the solution writes them, and their templates
    r"constexpr int kBM5 = \d+, kBN5 = \d+;": "constexpr int kBM5 = {0}, kBN5 = {1};",
    r"constexpr int kWarpsM5 = \d+, kWarpsN5 = \d+;": "constexpr int kWarpsM5 = {2}, kWarpsN5 = {3};",
    r"constexpr int kStages5 = \d+;": "constexpr int kStages5 = {4};",
    r"constexpr int kMinBlocks5 = \d+;": "constexpr int kMinBlocks5 = {5};",
    r"constexpr int kAChunks5 = \d+;": "constexpr int kAChunks5 = {6};",
}


def write_copy(name: str, config: tuple, out: Path) -> Path:
    folder = out / f"config_{name}" / "05_matmul"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(REPO / "solutions" / "05_matmul", folder)
    source = folder / KERNEL5
    text = source.read_text()
    for pattern, template in LINES.items():
        text, count = re.subn(pattern, template.format(*config), text)
        if count != 1:
            raise SystemExit(f"{KERNEL5}: {pattern!r} found {count} times; this script knows the solution's constants")
    source.write_text(text)
    return folder


def build(folder: Path) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, "-m", "grader.toolchain.build", str(folder)], cwd=REPO, capture_output=True, text=True)
    return done.returncode == 0, done.stderr[-3000:]


def measure(folders: dict[str, Path], n: int) -> list[dict]:
    import torch

    from grader.specs import by_exercise, import_exercise_module
    from grader.verify.timer import L2Flusher, math_mode, time_fn

    spec = by_exercise("05_matmul")
    flush = L2Flusher()
    g = torch.Generator(device="cuda").manual_seed(5)
    # odd sizes (element-wise copies) and sizes of whole chunks (16-byte copies), both off the tiles
    checks = []
    for rows_a, inner, cols_b in ((1001, 777, 1203), (1000, 768, 1040)):
        a = torch.randn(rows_a, inner, generator=g, device="cuda", dtype=torch.float64)
        b = torch.randn(inner, cols_b, generator=g, device="cuda", dtype=torch.float64)
        checks.append((a, b, a @ b))
    rows = []
    base = {}
    for name, folder in folders.items():
        module = import_exercise_module(folder, spec)
        row = {"config": name, "tile": "x".join(map(str, CONFIGS[name][:2])),
               "warps": "x".join(map(str, CONFIGS[name][2:4])), "stages": CONFIGS[name][4], "min_blocks": CONFIGS[name][5],
               "a_chunks": CONFIGS[name][6]}
        for dtype, label, tol in ((torch.float32, "tf32", 2e-3), (torch.bfloat16, "bf16", 2e-2)):
            err = max(((module.matmul(a.to(dtype), b.to(dtype), 5).double() - exact).norm() / exact.norm()).item()
                      for a, b, exact in checks)
            inputs = [tuple(torch.randn(n, n, generator=g, device="cuda").to(dtype) for _ in range(2)) for _ in range(2)]
            with math_mode(tf32=True):
                ours = time_fn(lambda inp: module.matmul(inp[0], inp[1], 5), inputs, flush=flush)
                if label not in base:
                    base[label] = time_fn(lambda inp: torch.matmul(inp[0], inp[1]), inputs, flush=flush).median_s
            flops = 2 * n**3
            row[label] = {"error": err, "ok": err < tol, "us": round(ours.median_s * 1e6, 1),
                          "tflops": round(flops / ours.median_s / 1e12, 1), "vs_cublas": round(base[label] / ours.median_s, 3)}
        rows.append(row)
        print(json.dumps(row), flush=True)  # as it goes: a run cut short still tells
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", type=Path, default=Path("/tmp/tune5"))
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args()
    names = args.configs.split(",")
    folders = {name: write_copy(name, CONFIGS[name], args.out) for name in names}
    with ThreadPoolExecutor(args.jobs) as pool:
        built = dict(zip(names, pool.map(build, folders.values())))
    for name, (ok, log) in built.items():
        if not ok:
            print(f"config {name} {CONFIGS[name]}: build failed\n{log}")
    rows = measure({k: v for k, v in folders.items() if built[k][0]}, args.n)
    print(f"{'config':6s} {'tile':>8s} {'warps':>6s} {'stages':>6s} {'min':>4s} {'kch':>4s}  "
          f"{'TF32 TFLOP/s':>12s} {'vs cuBLAS':>9s} {'error':>8s}   {'BF16 TFLOP/s':>12s} {'vs cuBLAS':>9s} {'error':>8s}")
    for r in rows:
        t, b = r["tf32"], r["bf16"]
        print(f"{r['config']:6s} {r['tile']:>8s} {r['warps']:>6s} {r['stages']:>6d} {r['min_blocks']:>4d} {r['a_chunks']:>4d}  "
              f"{t['tflops']:12.1f} {t['vs_cublas']:9.3f} {t['error']:8.1e}{'' if t['ok'] else '!'}   "
              f"{b['tflops']:12.1f} {b['vs_cublas']:9.3f} {b['error']:8.1e}{'' if b['ok'] else '!'}")
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["tf32"]["ok"] and r["bf16"]["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
