"""Exercise 05's version 4 on each shape class beside cuBLAS strict fp32 (needs a CUDA GPU):

    python3 scripts/time_matmul_shapes.py            # every class
    python3 scripts/time_matmul_shapes.py --quick    # one shape per class
    python3 scripts/time_matmul_shapes.py --version 5 [--bf16]   # kernel 5 beside cuBLAS TF32 (BF16)
    python3 scripts/time_matmul_shapes.py --version 6 [--bf16]   # kernel 6 (Hopper's wgmma), the same

Builds solutions/05_matmul (cached, as the grader does), checks each product against float64 first
(normwise), then times it with grader.verify.timer.time_fn (L2 flushed, warm-up, median) beside torch.matmul
with TF32 off, on two rotated input sets, and prints the median time, TFLOP/s, GB/s of distinct data
(A, B and C once), the ratio to cuBLAS (cuBLAS time / ours: above 1 is faster), and both errors against
float64. Issue 20's goal: at least 0.8x on each class, the large-K error within 10x of cuBLAS's.
With --version 5 (or 6) both sides run on tensor cores: ours in TF32 (float32 inputs) beside torch.matmul with
TF32 allowed, or with --bf16 both in bfloat16 (issue 21's goal: at least 0.5x).
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.verify.checks import relative_error  # noqa: E402
from grader.verify.timer import L2Flusher, math_mode, time_fn  # noqa: E402

# (class, batch, M, N, K[, layout]); batch 0: 2-D operands
SHAPES = [
    ("tiles", 0, 4096, 4096, 4096),
    ("tiles", 0, 1031, 1000, 4099),
    ("gemv N == 1", 0, 16384, 1, 16384),
    ("gemv N == 1", 0, 4096, 1, 1000),
    ("gemv M == 1", 0, 1, 16384, 16384),
    ("gemv M == 1", 0, 1, 2304, 768),  # GPT-2 small, one-token decoding
    ("dot", 0, 1, 1, 1 << 24),
    ("split K", 0, 64, 64, 1 << 20),
    ("split K", 0, 256, 256, 1 << 18),
    ("split K", 0, 1024, 1024, 1 << 16),
    ("batched", 64, 256, 256, 256),
    ("batched", 8, 1024, 1024, 1024),
    ("batched gemv", 128, 1, 4096, 4096),
    ("small M", 0, 32, 1000, 2048),  # ResNet-50's fully connected layer at batch 32
    ("small M", 0, 64, 3072, 768),  # GPT-2 small's MLP up-projection, 64 tokens
    ("mid tiles", 0, 1024, 1024, 1024),
    ("mid tiles", 0, 1100, 1100, 1100),  # 81 of kernel 4's tiles: more than half the SMs, fewer than all
    ("mid tiles", 0, 1400, 1400, 700),  # 121 tiles, K short
    ("mid tiles", 0, 1200, 1200, 1200),  # 100 tiles: three quarters of the SMs
    ("mid tiles", 0, 1500, 1500, 500),  # 144 tiles: a few more than the SMs
    ("small M", 0, 32, 1000, 1280),  # MobileNetV2's classifier at batch 32 (32 x 1280 by 1280 x 1000)
    ("gemv M == 1", 0, 1, 768, 768),  # GPT-2 small's decoding: attention out, MLP up and down
    ("gemv M == 1", 0, 1, 3072, 768),
    ("gemv M == 1", 0, 1, 768, 3072),
    ("model", 0, 8192, 2304, 768),  # GPT-2 small's prompt (8 x 1024 tokens): attention in, MLP down
    ("model", 0, 8192, 768, 3072),
    # transposed views (layout: At, A a transposed view; Bt, B one): version 4's tiles read either, or
    # both, in place (kernel 4's loader); the matrix-vector
    # products run on the matrix's own storage; x @ W.t() is nn.Linear's product (GPT-2's MLP at
    # 8 x 1024 tokens, and one token)
    ("transposed", 0, 4096, 4096, 4096, "At"),
    ("transposed", 0, 4096, 4096, 4096, "Bt"),
    ("transposed", 0, 4096, 4096, 4096, "AtBt"),
    ("transposed", 0, 1031, 1000, 4099, "At"),
    ("transposed", 0, 1031, 1000, 4099, "Bt"),
    ("transposed", 0, 1031, 1000, 4099, "AtBt"),
    ("transposed", 0, 8192, 3072, 768, "Bt"),
    ("transposed", 0, 8192, 768, 3072, "Bt"),
    ("transposed", 8, 1024, 1024, 1024, "AtBt"),
    ("transposed gemv", 0, 16384, 1, 16384, "At"),
    ("transposed gemv", 0, 1, 16384, 16384, "Bt"),
    ("transposed gemv", 0, 1, 3072, 768, "Bt"),
    ("transposed gemv", 0, 1, 768, 3072, "Bt"),
    ("transposed gemv", 16, 1, 1024, 1024, "Bt"),
]
QUICK = {0, 2, 4, 7, 10, 13}


def load_solution(folder: Path):
    spec = importlib.util.spec_from_file_location("matmul05", folder / "matmul.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--solution", type=Path, default=ROOT / "solutions" / "05_matmul",
                        help="the exercise folder to time (default: the reference)")
    parser.add_argument("--only", default="", help="only the classes whose name contains this")
    parser.add_argument("--version", type=int, default=4, choices=(4, 5, 6))
    parser.add_argument("--bf16", action="store_true", help="version 5 or 6 in bfloat16 (default: float32, TF32)")
    args = parser.parse_args()
    mod = load_solution(args.solution)
    flush = L2Flusher()
    v = args.version
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    tf32 = v >= 5  # cuBLAS on tensor cores too (float32 inputs: TF32; bfloat16 is unaffected)
    what = "bfloat16 beside torch.matmul in bfloat16" if args.bf16 else (
        "TF32 beside torch.matmul with TF32 allowed" if tf32 else "beside torch.matmul (TF32 off)")
    print(f"{torch.cuda.get_device_name()}; version {v} {what}")
    print(f"{'class':14} {'shape':>26} {'ours us':>9} {'cuBLAS us':>9} {'TFLOP/s':>8} {'GB/s':>7} {'ratio':>6} "
          f"{'err':>8} {'cuBLAS err':>10}")
    for i, (label, batch, m, n, k, *layout) in enumerate(SHAPES):
        if (args.quick and i not in QUICK) or args.only not in label:
            continue
        lead = (batch,) if batch else ()
        g = torch.Generator(device="cuda").manual_seed(i)

        def operand(rows, cols, transposed):  # a (rows, cols) matrix, or the transposed view of a (cols, rows) one
            if transposed:
                return torch.randn(*lead, cols, rows, generator=g, device="cuda").to(dtype).transpose(-1, -2)
            return torch.randn(*lead, rows, cols, generator=g, device="cuda").to(dtype)

        layout = layout[0] if layout else ""
        inputs = [(operand(m, k, "At" in layout), operand(k, n, "Bt" in layout)) for _ in range(2)]
        a, b = inputs[0]
        ref = a.double() @ b.double()
        ours_err = relative_error(mod.matmul(a, b, v), ref)
        with math_mode(tf32=tf32):
            theirs_err = relative_error(torch.matmul(a, b), ref)
            del ref
            ours = time_fn(lambda inp: mod.matmul(inp[0], inp[1], v), inputs, flush=flush)
            theirs = time_fn(lambda inp: torch.matmul(inp[0], inp[1]), inputs, flush=flush)
        count = max(batch, 1)
        flops = 2 * count * m * n * k
        nbytes = a.element_size() * count * (m * k + k * n + m * n)
        shape = (f"{batch} x " if batch else "") + f"{m} x {n} x {k}" + (f" {layout}" if layout else "")
        print(f"{label:14} {shape:>26} {ours.median_s * 1e6:9.1f} {theirs.median_s * 1e6:9.1f} "
              f"{flops / ours.median_s / 1e12:8.2f} {nbytes / ours.median_s / 1e9:7.0f} "
              f"{theirs.median_s / ours.median_s:6.2f} {ours_err:8.2e} {theirs_err:10.2e}", flush=True)


if __name__ == "__main__":
    main()
