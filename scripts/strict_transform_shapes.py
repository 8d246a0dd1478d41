"""Where 10's strict-fp32 watch should look (TRANSFORM_WATCH in grader/specs/ex10_cudnn_conv.py): 10's solution
(strict fp32 takes every algorithm but Tensor Core ones, as PyTorch), each op (forward, backward-data,
backward-filter) over a grid of 3x3 and 5x5 convolutions, in both algorithm modes, a fresh plan each time
(cache_clear), once idle and twice beside another process's GEMMs (a class grading's load). Prints each call
where the strict plan ran a transforming algorithm in some trial, one mark per trial (W: Winograd, F: FFT,
.: neither): a watch call should be marked in every trial. Needs a GPU.

    python scripts/strict_transform_shapes.py
"""
import re, subprocess, sys, tempfile, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere
from grader import env
env.configure()
import torch
from grader import specs
from grader.toolchain.build import write_slot

SOL = ROOT / "solutions" / "10_cudnn_conv"
slot = Path(tempfile.mkdtemp()) / "10_cudnn_conv"
write_slot(slot, SOL)
m = specs.import_exercise_module(slot, specs.by_exercise("10_cudnn_conv"))
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
WINOGRAD, FFT = re.compile(r"(?i)winograd"), re.compile(r"(?i)fft")


def family_ran(fn) -> str:
    """W, F or . for the transform the strict plan of a fresh call ran."""
    m.cache_clear()  # a fresh plan: benchmark mode times the algorithms again
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    return "W" if any(WINOGRAD.search(n) for n in names) else "F" if any(FFT.search(n) for n in names) else "."


SHAPES = [(16, 128, 28), (16, 256, 28), (8, 128, 56), (32, 64, 56), (8, 32, 28), (8, 64, 28), (32, 128, 28), (16, 512, 14)]
marks = {}


def sweep(loaded: bool):
    for op in ("forward", "backward_input", "backward_weight"):
        for ks in (3, 5):
            for (n, c, h) in SHAPES:
                for mode in ("benchmark",) if loaded else ("benchmark", "heuristic"):  # heuristics ignore load
                    x = torch.randn(n, c, h, h, device="cuda")
                    w = torch.randn(c, c, ks, ks, device="cuda") * (c * ks * ks) ** -0.5
                    g = torch.randn(n, c, h, h, device="cuda")
                    p = ks // 2
                    fn = {"forward": lambda: m.conv2d(x, w, None, 1, p, mode=mode),
                          "backward_input": lambda: m.conv2d_backward_input(g, w, tuple(x.shape), 1, p, mode=mode),
                          "backward_weight": lambda: m.conv2d_backward_weight(g, x, tuple(w.shape), 1, p, mode=mode)}[op]
                    marks.setdefault((op, (n, c, h, h), ks, mode), []).append(family_ran(fn))


sweep(loaded=False)
hog = subprocess.Popen([sys.executable, "-c", "import torch\na = torch.randn(8192, 8192, device='cuda')\nwhile True: a @ a"])
try:
    time.sleep(4)
    sweep(loaded=True)
    sweep(loaded=True)
finally:
    hog.kill()
for (op, xs, ks, mode), seen in marks.items():
    if any(mark != "." for mark in seen):
        print(f"{op:15} x {xs} {ks}x{ks} {mode:9} {''.join(seen)}", flush=True)
