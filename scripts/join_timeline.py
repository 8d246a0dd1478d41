"""The join check's windows on a GPU, printed: for the first three calls with gradients of an exercise, the
side-stream gradients (grader.verify.properties.check_gradients with a stream) run REPS times, each window's
kernels (stream, start and end in microseconds from the first) with host_outran's and unjoined_work's
verdicts, and the check's verdict and time. For a join variant that passes or fails unexpectedly.

    python3 scripts/join_timeline.py 01_leaky_relu/backward_never_joined [REPS]   a known-wrong variant
    python3 scripts/join_timeline.py solution:09_conv_bn_relu_training [REPS]     a solution
"""
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch

from grader import specs
from grader.env import REPO
from grader.verify import properties as P
from grader.verify.observe import WATCH

if len(sys.argv) < 2:
    sys.exit(__doc__)
if not torch.cuda.is_available():
    sys.exit("join_timeline: needs a CUDA GPU (the windows are the GPU's timeline)")
which = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
if which.startswith("solution:"):
    ex = which.split(":", 1)[1]
    d = REPO / "solutions" / ex
else:
    from tests.known_wrong import all_variants
    v = next(x for x in all_variants() if x.id == which)
    ex = v.exercise
    d = v.materialize(Path(tempfile.mkdtemp()))
WATCH.start()
spec = specs.by_exercise(ex)
m = specs.import_exercise_module(d, spec)
ctx = specs.Context(module=m, seed=1, exercise_dir=d, kernel_rule=spec.kernel_rule())
real_outran, real_unjoined = P.host_outran, P.unjoined_work


def show(seen):
    if not seen.kernels:
        print("   (no kernels)")
        return
    t0 = seen.kernels[0].start_s
    for k in seen.kernels:
        print(f"   {k.stream:4d} {1e6 * (k.start_s - t0):10.1f} {1e6 * (k.start_s + k.duration_s - t0):10.1f}  {k.name[:60]}")


def outran(seen, stream):
    r = real_outran(seen, stream)
    print(f"  window (current stream {stream}): host_outran={r}")
    show(seen)
    return r


def unjoined(seen, stream, what):
    r = real_unjoined(seen, stream, what)
    print(f"  unjoined_work: {r and r[:120]}")
    return r


P.host_outran, P.unjoined_work = outran, unjoined
dtype = P._dtypes(spec)[0]
side = P.DEVICE.side_stream()
calls = [c for c in spec.audit_calls(P.DEVICE.name, dtype) if c.grad_args]
print(which, len(calls), "calls with gradients")
for call in calls[:3]:
    for rep in range(reps):
        t = time.perf_counter()
        try:
            P.check_gradients(ctx, call, P._fresh(call.args), f"diag {call.label}", stream=side)
            verdict = "passed"
        except P.CheckFailure as e:
            verdict = "FAILED " + str(e)[:160]
        print(f"{call.label} rep {rep}: {verdict} ({time.perf_counter() - t:.3f} s)")
