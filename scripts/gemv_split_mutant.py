"""05's matrix-vector split (plan4, N == 1): the solution against its mutant 05:matmul_pipeline.cu:464 (k per split
a multiple of 3, not 4, which sends split rows to the scalar path), both checked against float64, then timed in
turn on the same inputs with cuBLAS beside them: 5 rounds of 200 calls each, L2 flushed, medians. Needs a GPU.

    python scripts/gemv_split_mutant.py
"""
import sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grader import env
env.configure()
import torch
from grader import specs
from grader.toolchain.build import write_slot
SOL = Path(__file__).resolve().parents[1] / "solutions" / "05_matmul"
spec = specs.by_exercise("05_matmul")
text = (SOL / "matmul_pipeline.cu").read_text()
old = "std::min(K / kGemvRowsMinK, kMaxSplits), 4);"
assert text.count(old) == 1
slot = Path(tempfile.mkdtemp()) / "05_matmul"
write_slot(slot, SOL, {"matmul_pipeline.cu": text.replace(old, "std::min(K / kGemvRowsMinK, kMaxSplits), 3);")})
t = time.time(); sol = specs.import_exercise_module(SOL, spec); print(f"solution loaded in {time.time()-t:.0f} s", flush=True)
t = time.time(); mut = specs.import_exercise_module(slot, spec); print(f"mutant built in {time.time()-t:.0f} s", flush=True)
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
def timed(fn, reps=200):
    out = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); out.append(a.elapsed_time(b) * 1e3)
    out.sort(); return out[len(out) // 2]
for M, K in [(768, 3072), (1024, 4096), (768, 8192), (4096, 4096), (3072, 768 * 4), (1000, 2048), (1000, 5000)]:
    A = torch.randn(M, K, device="cuda"); x = torch.randn(K, 1, device="cuda")
    ref = A.double() @ x.double()
    for m in (sol, mut):
        err = ((m.matmul(A, x, 4).double() - ref).abs().max() / ref.abs().max()).item(); assert err < 1e-5, err
    ts, tm, tc = [], [], []
    for _ in range(5):
        ts.append(timed(lambda: sol.matmul(A, x, 4))); tm.append(timed(lambda: mut.matmul(A, x, 4))); tc.append(timed(lambda: A @ x))
    s, mm, c = (sorted(v)[2] for v in (ts, tm, tc))
    print(f"M={M} K={K} N=1: solution {s:.2f} us, mutant {mm:.2f} us ({mm / s:.3f}x), cuBLAS {c:.2f} us; rounds sol {['%.2f' % v for v in ts]} mut {['%.2f' % v for v in tm]}", flush=True)
