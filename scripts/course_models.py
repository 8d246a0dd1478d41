"""ResNet-50 and MobileNetV2 built from the course's modules, against PyTorch's, on a GPU.

    python3 scripts/course_models.py                      (from the repository root; a few minutes on an H100)
    python3 scripts/course_models.py --root exercises     a student's tree instead of solutions/
    python3 scripts/course_models.py --models MobileNetV2 --time-batch 64

Per model (grader.bench.models, built through grader.bench.course_models.CourseLayers: 09's FusedConvBNReLU in
training and 08's inference fusion in eval where a dense convolution is followed by BatchNorm and ReLU,
10's conv2d + PyTorch's BatchNorm2d elsewhere; weights copied from PyTorch's model):
1. Errors against PyTorch's model in strict float32 (TF32 off), at --batch x 3 x --size x --size:
   normwise and largest absolute of the training output, the gradients of every parameter (the worst
   and the median over parameters), BatchNorm's running statistics after the step, the eval output
   and the eval-mode gradients; beside each, PyTorch's own float32 and the course's distance to
   PyTorch's model in float64. PASS / FAIL by the tolerances of grader/bench/course_models.py (the same
   as tests/test_course_models.py's).
2. The profiler's word: no PyTorch convolution ran in the course model's training step, eval forward
   and eval backward, and 10's, 09's and 08's ops did (grader.bench.course_models.check_course_kernels).
3. One training step (forward and backward) of the course model and of PyTorch's, timed with
   grader.verify.timer.time_fn (median GPU time, L2 flushed, two input sets rotated) at --time-batch x 3 x
   --time-size x --time-size, in strict float32 and in TF32 (PyTorch's default for convolutions; the
   course's 10 follows the same flag, 09's kernels are float32), PyTorch with cuDNN's autotuner on.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from grader.bench import course_models as cm  # noqa: E402
from grader.verify.checks import CheckFailure  # noqa: E402
from grader.bench.models import MODELS  # noqa: E402
from grader.verify.timer import L2Flusher, math_mode, time_fn  # noqa: E402


def row(what: str, e: cm.Errors) -> str:
    return (f"  {what:44s} {e.vs_torch:9.2e} {e.max_vs_torch:9.2e}   {e.course_vs_fp64:9.2e} {e.torch_vs_fp64:9.2e}")


def report_errors(r: cm.Comparison) -> bool:
    print(f"  {'':44s} {'normwise':>9s} {'max abs':>9s}   {'course':>9s} {'PyTorch':>9s}")
    print(f"  {'':44s} {'vs PyTorch float32':>19s}   {'vs PyTorch float64':>19s}   (worst: nearest its tolerance)")
    print(row("training output", r.output))
    for label, grads in (("training", r.grads), ("eval", r.eval_grads)):
        # the worst: the one nearest its tolerance (a gradient that is ~0 exactly has a large relative
        # error in every float32 model)
        worst_name, worst = max(grads.items(), key=lambda kv: cm.margin(kv[1], cm.GRAD_TOL))
        median = statistics.median(e.vs_torch for e in grads.values())
        median64 = statistics.median(e.course_vs_fp64 for e in grads.values())
        median_torch = statistics.median(e.torch_vs_fp64 for e in grads.values())
        print(f"  {label + ' gradients, median of ' + str(len(grads)):44s} {median:9.2e} {'':9s}   "
              f"{median64:9.2e} {median_torch:9.2e}")
        print(row(f"{label} gradients, worst: {worst_name}"[:44], worst))
    worst_name, worst = max(r.stats.items(), key=lambda kv: cm.margin(kv[1], cm.OUT_TOL))
    print(row(f"running stats, worst: {worst_name}"[:44], worst))
    print(f"  {'num_batches_tracked':44s} {'    equal' if r.batches_tracked_equal else 'DIFFERENT'}")
    print(row("eval output", r.eval_output))
    problems = r.problems()
    print(f"  tolerances (grader/bench/course_models.py): {'PASS' if not problems else 'FAIL'}")
    for p in problems[:10]:
        print(f"    {p}")
    return not problems


def time_step(model, batch: int, size: int, seed: int):
    inputs = [cm.inputs(batch, size, seed + i) for i in range(2)]
    return time_fn(lambda inp: cm.train_step(model, *inp), inputs, flush=L2Flusher())


def report_times(name: str, root, batch: int, size: int, seed: int) -> None:
    reference, course = cm.build_pair(name, root, seed)
    print(f"  training step (forward + backward), {batch}x3x{size}x{size}:")
    for label, tf32 in (("strict fp32", False), ("TF32", True)):
        with math_mode(tf32=tf32, cudnn_benchmark=True):
            ours = time_step(course, batch, size, seed)
            theirs = time_step(reference, batch, size, seed)
        print(f"    {label:12s} course {ours.median_s * 1e3:8.2f} ms   PyTorch {theirs.median_s * 1e3:8.2f} ms   "
              f"course / PyTorch {ours.median_s / theirs.median_s:5.2f}x   (wall {ours.wall_median_s * 1e3:.2f} / "
              f"{theirs.wall_median_s * 1e3:.2f} ms)")
    del reference, course
    torch.cuda.empty_cache()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--root", type=Path, default=None, help="the exercise folders' parent (default: solutions/)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-batch", type=int, default=32)
    parser.add_argument("--time-size", type=int, default=224)
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU on this machine: the course's kernels need one")
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}; course modules from {args.root or 'solutions/'}")
    ok = True
    for name in args.models:
        print(f"\n{name}: errors at {args.batch}x3x{args.size}x{args.size}, seed {args.seed}, strict fp32")
        ok &= report_errors(cm.compare(name, args.root, args.batch, args.size, args.seed))
        try:
            counts = cm.check_course_kernels(name, args.root, args.batch, args.size, args.seed)
            print("  own kernels: no PyTorch convolution ran; " + ", ".join(
                f"{k.split('::')[-1]} x{v}" for k, v in sorted(counts.items()) if k.startswith("train:")))
        except CheckFailure as e:
            ok = False
            print(f"  own kernels: FAIL: {e}")
        if not args.no_timing:
            report_times(name, args.root, args.time_batch, args.time_size, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
