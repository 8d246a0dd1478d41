"""Which shapes would make 10's strict-fp32 plans run a Winograd or FFT kernel if they were allowed to: 10's
solution built with transforms_the_data() answering false (every algorithm allowed), each op (forward,
backward-data, backward-filter) at a grid of 3x3 and 5x5 convolutions, in both algorithm modes, under the
profiler. Prints each call where a transforming kernel ran: a shape for the strict watch of
grader/specs/ex10_cudnn_conv.py (_check_own_forward, _check_own_backward) to profile, so that a plan
letting that algorithm through is seen. Needs a GPU.

    python scripts/strict_transform_shapes.py
"""
import re, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere
from grader import env
env.configure()
import torch
from grader import specs
from grader.toolchain.build import write_slot
SOL = Path(__file__).resolve().parents[1] / "solutions" / "10_cudnn_conv"
text = (SOL / "cudnn_conv.cu").read_text()
i = text.index("bool transforms_the_data(Op op, int algo) {")
j = text.index("switch (op) {", i)
text = text[:j] + "return false;\n  " + text[j:]
slot = Path(tempfile.mkdtemp()) / "10_cudnn_conv"
write_slot(slot, SOL, {"cudnn_conv.cu": text})
spec = specs.by_exercise("10_cudnn_conv")
t = time.time(); m = specs.import_exercise_module(slot, spec); print(f"built in {time.time()-t:.0f} s", flush=True)
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
TR = re.compile(r"(?i)winograd|fft")
def kernels(fn):
    fn(); torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        fn(); torch.cuda.synchronize()
    return sorted({e.name for e in p.events() if TR.search(e.name)})
found = 0
for n, c, k, h in [(4,16,32,28),(8,32,32,28),(8,64,64,28),(16,64,64,56),(32,64,64,56),(8,128,128,28),(16,128,128,28),(32,256,256,14),(32,512,512,7),(8,256,256,28),(64,64,64,56)]:
    for ks in (3, 5):
        x = torch.randn(n, c, h, h, device="cuda"); w = torch.randn(k, c, ks, ks, device="cuda") * (c*ks*ks) ** -0.5
        g = torch.randn(n, k, h, h, device="cuda"); p = ks // 2
        for mode in ("benchmark", "heuristic"):
            for name, fn in (("forward", lambda: m.conv2d(x, w, None, 1, p, mode=mode)),
                             ("backward_input", lambda: m.conv2d_backward_input(g, w, tuple(x.shape), 1, p, mode=mode)),
                             ("backward_weight", lambda: m.conv2d_backward_weight(g, x, tuple(w.shape), 1, p, mode=mode))):
                try:
                    ks_ = kernels(fn)
                except Exception as e:
                    print("error", name, n, c, k, h, ks, mode, str(e)[:100]); continue
                if ks_:
                    found += 1
                    print(f"TRANSFORM {name} x=({n},{c},{h},{h}) w=({k},{c},{ks},{ks}) pad {p} mode={mode}: {ks_[0][:90]}", flush=True)
print("found", found)
