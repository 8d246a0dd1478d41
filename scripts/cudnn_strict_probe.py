#!/usr/bin/env python3
"""What PyTorch's own cuDNN path runs and how accurate it is (the contract exercise 10's strict fp32 follows), strict fp32 (allow_tf32 False for cuDNN and cuBLAS) beside TF32, cuDNN's autotuner off
("heur") and on ("bench"). PyTorch only: the course's extension is not built or used; grader.bench.model_shapes
and grader.specs.ex10_cudnn_conv give the shapes.

Shapes: TRANSFORM_WATCH's convolutions (3x3, stride 1, "same", C -> C; all three ops run on each), then every
distinct Conv layer of model_shapes.unique(all_layers()) at its declared batch (ResNet-50, UNet, then
MobileNetV2); a layer above MAX_GMAC (default 5) runs at a batch reduced to fit (shown "(a->b)x..."; the
watch's own shapes never are). Per shape and op (fwd = F.conv2d, bd/bw =
aten.convolution_backward's grad of x / of w), each of heur/bench x strict/tf32: one warm-up call (the
autotuner's search), then one profiled call (CUDA activity: its kernel names, kernel time) whose output is
compared with float64 (F.conv2d / convolution_backward on double copies, on the GPU): normwise
||out - ref|| / ||ref||.

The heur and bench calls run on two host threads, one each: PyTorch's cuDNN v8 plan cache is thread_local
and keyed without the autotuner flag, so in one thread the second mode would reuse the first's plan.
Calls are attributed to their kernels by marker kernels (torch.cuda._sleep) between them on the one stream.

    python3 scripts/cudnn_strict_probe.py > log   # about 60 s on an H200
    env: LIMIT_S (default 110: stops cleanly and prints what it has), MAX_GMAC (5), MAX_SHAPES (0: all)
"""
from __future__ import annotations

import math
import os
import re
import signal
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

T0 = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LIMIT_S = float(os.environ.get("LIMIT_S", "110"))
MAX_GMAC = float(os.environ.get("MAX_GMAC", "5"))
MAX_SHAPES = int(os.environ.get("MAX_SHAPES", "0"))
SEED = 1234
STRICT_TOL = 1e-5  # where a strict call's error says a transforming algorithm ran (the grader allows 1e-4)
OPS = ("fwd", "bd", "bw")
MATHS = ("strict", "tf32")
BENCHES = ("heur", "bench")
# kernel-name rules for "a TF32 kernel" to test
RULES = {
    "tf32": r"tf32",
    "tf32|tensorop": r"tf32|tensorop",
    "tf32|1688|16816|hmma|gmma|tensorop": r"tf32|1688|16816|16832|hmma|gmma|tensorop",
    "tensor-op markers only (no 'tf32')": r"1688|16816|16832|hmma|gmma|tensorop",
    "xmma": r"xmma",
    "not ffma": r"^(?!.*ffma)",
}


class TimeUp(Exception):
    pass


def elapsed() -> float:
    return time.perf_counter() - T0


def say(msg: str) -> None:
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------------------------- shapes
class Geo:
    def __init__(self, src, n, cin, h, w, cout, k, stride, pad, groups=1, count=1):
        self.src, self.n0, self.n, self.cin, self.h, self.w = src, n, n, cin, h, w
        self.cout, self.k, self.stride, self.pad, self.groups, self.count = cout, k, stride, pad, groups, count
        self.tags: list[str] = []

    @property
    def key(self):
        return (self.n0, self.cin, self.h, self.w, self.cout, self.k, self.stride, self.pad, self.groups)

    def out_hw(self):
        return tuple((s + 2 * self.pad - self.k) // self.stride + 1 for s in (self.h, self.w))

    def macs(self, n=None):
        ho, wo = self.out_hw()
        return (self.n if n is None else n) * self.cout * ho * wo * (self.cin // self.groups) * self.k * self.k

    def shape(self) -> str:
        g = ("dw" if self.groups == self.cin == self.cout and self.groups > 1 else f"g{self.groups}") if self.groups > 1 else ""
        n = f"{self.n}" if self.n == self.n0 else f"({self.n0}->{self.n})"
        return (f"{n}x{self.cin}x{self.h}x{self.w} {self.cin}->{self.cout} k{self.k}"
                + (f" s{self.stride}" if self.stride != 1 else "") + (f" p{self.pad}" if self.pad else "") + (f" {g}" if g else ""))


_SHORT_OP = {"forward": "fwd", "backward_input": "bd", "backward_weight": "bw"}


def build_shapes() -> list[Geo]:
    from grader.bench import model_shapes
    from grader.specs.ex10_cudnn_conv import TRANSFORM_WATCH

    shapes: dict[tuple, Geo] = {}
    for op, xs, ks, algo in TRANSFORM_WATCH:  # stride 1, "same" padding, C -> C (as the watch calls them)
        g = Geo("watch", xs[0], xs[1], xs[2], xs[3], xs[1], ks, 1, ks // 2)
        g = shapes.setdefault(g.key, g)
        g.tags.append(f"watch:{_SHORT_OP[op]}/{algo[:5] if algo == 'benchmark' else algo[:4]}")
    layers = [(layer, count) for layer, count in model_shapes.unique(model_shapes.all_layers())
              if isinstance(layer, model_shapes.Conv)]
    # MobileNetV2 last (1x1s, and depthwise layers that PyTorch runs with its own kernels), should time run out
    layers.sort(key=lambda lc: lc[0].model.startswith("MobileNet"))
    for layer, count in layers:
        g = Geo(f"{layer.model.split()[0]} {layer.name}", layer.n, layer.cin, layer.h, layer.w, layer.cout, layer.k,
                layer.stride, layer.padding, layer.groups, count)
        if g.key in shapes:
            shapes[g.key].tags.append(g.src)
            continue
        shapes[g.key] = g
    out = list(shapes.values())
    for g in out:  # the float64 references and the autotuner's search grow with the work: cap it by the batch
        per_image = g.macs(1)  # (the watch's own shapes, up to 7.4 GMAC, run as the grader runs them)
        if g.src != "watch" and g.macs() > MAX_GMAC * 1e9:
            g.n = max(1, int(MAX_GMAC * 1e9 // per_image))
    return out[:MAX_SHAPES] if MAX_SHAPES > 0 else out


# ------------------------------------------------------------------------------------------ kernel names
def classify(name: str) -> str:
    """The algorithm family a kernel's name suggests."""
    s = name.lower()
    if "winograd" in s:
        return "winograd"
    if "fft" in s or "cgemm" in s:
        return "fft"
    if "at::native" in s:
        return "pytorch-native"
    if any(t in s for t in ("implicit", "xmma", "cutlass", "fprop", "dgrad", "wgrad", "convolve")):
        return "implicit-gemm"
    if "gemm" in s or "im2col" in s:
        return "gemm"
    if any(t in s for t in ("nchwtonhwc", "nhwctonchw", "transpose", "convert", "copy", "memset", "memcpy")):
        return "layout/copy"
    if "reduce" in s or "splitk" in s:
        return "reduce"
    return "other"


CALL_ORDER = ("winograd", "fft", "implicit-gemm", "gemm", "pytorch-native", "other", "reduce", "layout/copy")


def call_class(kernels: list[str]) -> str:
    classes = {classify(k) for k in kernels}
    for c in CALL_ORDER:
        if c in classes:
            return c
    return "none"


def family(name: str) -> str:
    """A kernel name without its argument list and with tile sizes, stages and template numbers blanked."""
    s = name[5:] if name.startswith("void ") else name
    depth, cut = 0, len(s)
    for i in range(len(s) - 1, -1, -1):  # drop the trailing top-level "(...)" argument list
        if s[i] == ")":
            depth += 1
        elif s[i] == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    s = s[:cut] if s.endswith(")") else s
    s = re.sub(r"\d+x\d+(x\d+)*", "#x#", s)
    s = re.sub(r"(stage|warpsize|warpgroupsize|tilesize|align[a-z]?|_g)\d+", r"\1#", s)
    s = re.sub(r"\b\d+\b", "#", s)
    return s[:220]


def is_overhead(name: str) -> bool:
    """The profiler's own entries (not kernels of the calls)."""
    return name.startswith(("Activity Buffer", "cudaDeviceSynchronize", "cudaStreamSynchronize"))


def is_copy(name: str) -> bool:
    return name.startswith(("Memset", "Memcpy", "memset", "memcpy"))


# ----------------------------------------------------------------------------------------------- the run
def main() -> int:
    shapes = build_shapes()
    import torch

    say(f"strict_probe: {len(shapes)} shapes (LIMIT_S={LIMIT_S:g}, MAX_GMAC={MAX_GMAC:g}, MAX_SHAPES={MAX_SHAPES}); "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}")
    print("\n== shapes (idx, source, N x C x H x W Cin->Cout kernel stride pad groups, GMAC at the batch run, count, also)")
    for i, g in enumerate(shapes):
        print(f"{i:3d} {g.src[:34]:34} {g.shape():44} {g.macs() / 1e9:6.2f} x{g.count:<2d} {' '.join(g.tags)}")
    print(f"total {sum(g.macs() for g in shapes) / 1e9:.1f} GMAC per op", flush=True)

    if not torch.cuda.is_available():
        print(f"\nstrict_probe: no CUDA device visible here (torch {torch.__version__}); the shapes above are what "
              "it would run. Run it on a GPU machine: python3 scripts/cudnn_strict_probe.py > log",
              flush=True)
        return 2

    import torch.nn.functional as F
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    say(f"device {torch.cuda.get_device_name()} cc {'.'.join(map(str, torch.cuda.get_device_capability()))}, "
        f"cuDNN {torch.backends.cudnn.version()}")

    def set_math(mode: str) -> None:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"

    def cuda_events(prof):
        evs = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not is_overhead(e.name)]
        return sorted(evs, key=lambda e: e.time_range.start)

    # the marker kernel's name (the one that ran once per torch.cuda._sleep), and the profiler's first (slow) start
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.cuda._sleep(1000)
        torch.cuda.synchronize()
    seen = [e.name for e in cuda_events(prof)]
    names = sorted({n for n in seen if seen.count(n) == 3})
    if len(names) != 1:
        names = [n for n in names if "sleep" in n.lower() or "spin" in n.lower()]
    if len(names) != 1:
        print(f"strict_probe: 3 x torch.cuda._sleep ran {sorted(set(seen))} under the profiler, expected one kernel "
              "three times: calls cannot be told apart", flush=True)
        return 3
    MARK = names[0]
    say(f"marker kernel: {MARK[:80]}")

    def marker():
        torch.cuda._sleep(1000)

    def op_call(op, t, g: Geo):
        s, p, d = [g.stride] * 2, [g.pad] * 2, [1, 1]
        if op == "fwd":
            return F.conv2d(t["x"], t["w"], None, g.stride, g.pad, 1, g.groups)
        mask = [op == "bd", op == "bw", False]
        r = torch.ops.aten.convolution_backward(t["gy"], t["x"], t["w"], None, s, p, d, False, [0, 0], g.groups, mask)
        return r[0] if op == "bd" else r[1]

    def job(bench: str, t, g: Geo, profiled: bool):
        torch.backends.cudnn.benchmark = bench == "bench"
        outs = {}
        for mm in MATHS:
            set_math(mm)
            for op in OPS:
                if profiled:
                    marker()
                outs[(mm, op)] = op_call(op, t, g)
        if profiled:
            marker()
        torch.cuda.synchronize()
        return outs

    workers = {b: ThreadPoolExecutor(max_workers=1, thread_name_prefix=b) for b in BENCHES}
    seq = []  # the call after each marker, in launch order (None: a job's closing marker)
    for b in BENCHES:
        seq += [(b, m, op) for m in MATHS for op in OPS] + [None]

    records: dict[tuple, dict] = {}  # (shape idx, bench, math, op) -> {"kernels", "us", "err"}
    done: list[int] = []
    notes: list[str] = []
    durations: list[float] = []

    def on_alarm(signum, frame):
        raise TimeUp()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(1.0, LIMIT_S - elapsed()))
    stopped = ""
    try:
        for i, g in enumerate(shapes):
            # its time: that of the done shape nearest in work, scaled up by at most 4 (per-call overheads
            # dominate small shapes); 2 s before the first
            if done:
                near, d = min(zip(done, durations), key=lambda jd: abs(math.log(max(1, shapes[jd[0]].macs()) / max(1, g.macs()))))
                predicted = 1.5 * d * min(4.0, max(1.0, g.macs() / max(1, shapes[near].macs())))
            else:
                predicted = 2.0
            if elapsed() + predicted > LIMIT_S - 3:
                stopped = f"stopped before shape {i} of {len(shapes)}: {elapsed():.0f}s + ~{predicted:.1f}s predicted > LIMIT_S"
                break
            t_shape = time.perf_counter()
            try:
                torch.manual_seed(SEED)
                ho, wo = g.out_hw()
                t = {"x": torch.randn(g.n, g.cin, g.h, g.w, device="cuda"),
                     "w": torch.randn(g.cout, g.cin // g.groups, g.k, g.k, device="cuda") * (g.cin // g.groups * g.k * g.k) ** -0.5,
                     "gy": torch.randn(g.n, g.cout, ho, wo, device="cuda")}
                for b in BENCHES:  # warm-up: the plan (the autotuner's search in bench), outside the profile
                    workers[b].submit(job, b, t, g, False).result()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    outs = {b: workers[b].submit(job, b, t, g, True).result() for b in BENCHES}
                    torch.cuda.synchronize()
                evs = cuda_events(prof)
                marks = sum(e.name == MARK for e in evs)
                per_call: dict[tuple, list] = {c: [] for c in seq if c}
                stray = []
                j = 0
                for e in evs:
                    if e.name == MARK:
                        j += 1
                        continue
                    c = seq[j - 1] if 0 < j <= len(seq) else None
                    (per_call[c] if c else stray).append(e)
                if marks != len(seq):
                    notes.append(f"shape {i}: {marks} markers, expected {len(seq)}: its kernels are not attributed")
                    per_call = {c: [] for c in per_call}
                elif stray:
                    notes.append(f"shape {i}: {len(stray)} kernels outside the calls: {sorted({e.name[:60] for e in stray})[:3]}")
                # float64 references (main thread; its own plan cache)
                torch.backends.cudnn.benchmark = False
                set_math("strict")
                td = {k: v.double() for k, v in t.items()}
                ref = {"fwd": F.conv2d(td["x"], td["w"], None, g.stride, g.pad, 1, g.groups)}
                ref["bd"], ref["bw"], _ = torch.ops.aten.convolution_backward(
                    td["gy"], td["x"], td["w"], None, [g.stride] * 2, [g.pad] * 2, [1, 1], False, [0, 0], g.groups,
                    [True, True, False])
                norms = {op: ref[op].norm().item() for op in OPS}
                for b in BENCHES:
                    for m in MATHS:
                        for op in OPS:
                            evl = per_call[(b, m, op)]
                            err = ((outs[b][(m, op)].double() - ref[op]).norm().item() / norms[op]) if norms[op] else float("nan")
                            records[(i, b, m, op)] = {
                                "kernels": [e.name for e in evl],
                                "us": sum(e.time_range.end - e.time_range.start for e in evl if not is_copy(e.name)),
                                "err": err}
                del t, td, ref, outs, prof, evs
                done.append(i)
            except TimeUp:
                raise
            except Exception as e:  # noqa: BLE001 -- one shape's failure is that shape's
                notes.append(f"shape {i} ({g.shape()}): failed: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
                say(f"shape {i}: FAILED {type(e).__name__}")
                try:
                    torch.cuda.synchronize()
                except Exception as e2:  # noqa: BLE001 -- a sticky CUDA error: report what there is
                    stopped = f"CUDA unusable after shape {i}: {type(e2).__name__}"
                    break
                continue
            dt = time.perf_counter() - t_shape
            durations.append(dt)
            errs = " ".join(f"{op}:" + "/".join(f"{records[(i, b, 'strict', op)]['err']:.0e}" for b in BENCHES) for op in OPS)
            cls = " ".join(f"{op}:" + "/".join(call_class(records[(i, b, 'strict', op)]['kernels'])[:4] for b in BENCHES) for op in OPS)
            say(f"{i + 1}/{len(shapes)} {g.shape()} {dt:.2f}s | strict err heur/bench {errs} | {cls}")
    except TimeUp:
        stopped = f"LIMIT_S reached during shape {len(done)} of {len(shapes)} (that shape dropped)"
    signal.setitimer(signal.ITIMER_REAL, 0)
    if stopped:
        say(stopped)
    report(shapes, done, records, notes, stopped)
    sys.stdout.flush()
    os._exit(0)  # a worker thread may still be inside a call cut off by the limit


# ----------------------------------------------------------------------------------------------- report
def fmt(x: float) -> str:
    return "     -" if x is None or x != x else f"{x:.1e}"


def report(shapes, done, records, notes, stopped) -> None:
    print(f"\n######## strict_probe report: {len(done)} of {len(shapes)} shapes measured"
          + (f" ({stopped})" if stopped else ""))
    if not done:
        return
    # ---------------------------------------------------------------- 1. kernel names
    strict_names: dict[str, int] = {}
    tf32_names: dict[str, int] = {}
    for (i, b, m, op), r in records.items():
        for k in set(r["kernels"]):
            if is_copy(k):
                continue
            d = strict_names if m == "strict" else tf32_names
            d[k] = d.get(k, 0) + 1
    tf32_only = {k: c for k, c in tf32_names.items() if k not in strict_names}
    print(f"\n== 1. kernel names: {len(strict_names)} distinct in strict calls, {len(tf32_names)} in TF32 calls, "
          f"{len(tf32_only)} only in TF32 calls")
    fams: dict[str, list] = {}
    for k in set(strict_names) | set(tf32_names):
        f = fams.setdefault(family(k), [0, 0, classify(k)])
        f[0] += strict_names.get(k, 0)
        f[1] += tf32_names.get(k, 0)
    print("families (calls that ran one: strict, tf32; class; family name with sizes blanked):")
    for f, (cs, ct, cl) in sorted(fams.items(), key=lambda kv: (kv[1][0] == 0, kv[1][2], kv[0])):
        print(f"  {cs:4d} {ct:4d} {cl[:13]:13} {'TF32-ONLY ' if cs == 0 else ''}{f}")

    helpers = ("layout/copy", "reduce")  # TF32-only helpers (layout, split-K reductions) need not match
    math_only = [k for k in tf32_only if classify(k) not in helpers]
    print(f"\nrules for 'a TF32 kernel': must match every TF32-only math kernel ({len(math_only)}; TF32-only helpers "
          f"{', '.join(helpers)}: {len(tf32_only) - len(math_only)}, not required) and no strict kernel:")
    print(f"  {'rule':38} {'TF32-only math':>14} {'helpers':>8} {'strict (false alarms)':>22}  verdict")
    for label, pat in RULES.items():
        rx = re.compile(pat, re.I)
        miss_t = [k for k in math_only if not rx.search(k)]
        hit_h = sum(1 for k in tf32_only if classify(k) in helpers and rx.search(k))
        hit_s = [k for k in strict_names if rx.search(k)]
        ok = not hit_s and not miss_t
        print(f"  {label:38} {len(math_only) - len(miss_t):6d}/{len(math_only):<7d} {hit_h:4d}/{len(tf32_only) - len(math_only):<4d}"
              f"{len(hit_s):10d}/{len(strict_names):<11d}  " + ("SEPARATES" if ok else "fails"))
        if label in ("tf32", "tf32|1688|16816|hmma|gmma|tensorop") and not ok:
            for k in hit_s[:10]:
                print(f"      strict kernel matching (counterexample): {k[:200]}")
            for k in miss_t[:10]:
                print(f"      TF32-only math kernel not matching: {k[:200]}")
    rx = re.compile(RULES["tf32"], re.I)
    print("\nper call, rule 'tf32': TF32-mode calls that ran no kernel matching it (they ran fp32 math), by op and autotuner:")
    for op in OPS:
        row = []
        for b in BENCHES:
            calls = [r for (i, bb, m, o), r in records.items() if bb == b and m == "tf32" and o == op and r["kernels"]]
            none = [r for r in calls if not any(rx.search(k) for k in r["kernels"])]
            row.append(f"{b} {len(none)}/{len(calls)} ({', '.join(sorted({call_class(r['kernels']) for r in none})) or '-'})")
        print(f"  {op}: " + "; ".join(row))
    print("\nall distinct kernel names (strict calls, tf32 calls, class, name):")
    for k in sorted(set(strict_names) | set(tf32_names), key=lambda k: (k not in strict_names, classify(k), k)):
        print(f"  {strict_names.get(k, 0):4d} {tf32_names.get(k, 0):4d} {classify(k)[:13]:13} {k[:200]}")

    same = sum(1 for i in done for op in OPS for mm in MATHS
               if set(records[(i, "heur", mm, op)]["kernels"]) == set(records[(i, "bench", mm, op)]["kernels"]))
    print(f"\nheur and bench ran the same kernels in {same} of {len(done) * len(OPS) * len(MATHS)} (shape, op, math) calls "
          "(all the same would mean the two modes shared one plan cache, and the bench columns repeat heur's)")

    # ---------------------------------------------------------------- 2. errors
    print("\n== 2. normwise relative error against float64 (F.conv2d / convolution_backward on double copies)")
    print(f"  {'op':3} {'mode':12} {'max':>8} {'median':>8} {'>1e-5':>6}  shape of the max")
    for op in OPS:
        for m in MATHS:
            for b in BENCHES:
                es = [(records[(i, b, m, op)]["err"], i) for i in done if (i, b, m, op) in records]
                if not es:
                    continue
                mx = max(es)
                print(f"  {op:3} {m + '/' + b:12} {fmt(mx[0]):>8} {fmt(statistics.median(e for e, _ in es)):>8} "
                      f"{sum(e > STRICT_TOL for e, _ in es):6d}  {mx[1]}: {shapes[mx[1]].shape()}")
    print("\nper shape and op: strict errors (heur, bench), their ratio, TF32 (bench), strict call class (heur/bench), "
          "kernel us (strict heur, strict bench, tf32 bench); '!' strict error > 1e-5")
    print(f"  {'idx':>3} {'op':3} {'s/heur':>8} {'s/bench':>8} {'ratio':>6} {'t/bench':>8}  "
          f"{'class heur/bench':29} {'us s/h':>8} {'us s/b':>8} {'us t/b':>8}  shape")
    ratios = []
    for i in done:
        for op in OPS:
            r = {(b, m): records[(i, b, m, op)] for b in BENCHES for m in MATHS}
            sh, sb = r[("heur", "strict")]["err"], r[("bench", "strict")]["err"]
            ratio = max(sh, sb) / min(sh, sb) if min(sh, sb) > 0 else float("nan")
            ratios.append((ratio, i, op))
            flag = "!" if max(sh, sb) > STRICT_TOL else " "
            cls = f"{call_class(r[('heur', 'strict')]['kernels'])}/{call_class(r[('bench', 'strict')]['kernels'])}"
            print(f"{flag} {i:3d} {op:3} {fmt(sh):>8} {fmt(sb):>8} {ratio:6.1f} {fmt(r[('bench', 'tf32')]['err']):>8}  "
                  f"{cls:29} {r[('heur', 'strict')]['us']:8.0f} {r[('bench', 'strict')]['us']:8.0f} "
                  f"{r[('bench', 'tf32')]['us']:8.0f}  {shapes[i].shape()}")
    ratios = [x for x in ratios if x[0] == x[0]]
    if ratios:
        mx = max(ratios)
        print(f"largest strict heur/bench error ratio (two cuDNN picks on the same inputs): {mx[0]:.1f} at shape {mx[1]} {mx[2]}; "
              f"median {statistics.median(x[0] for x in ratios):.2f}")

    # ---------------------------------------------------------------- 3. algorithm families per op
    print("\n== 3. call class by kernel names (a call's class: the first of " + " > ".join(CALL_ORDER) + "), calls per op")
    classes = [c for c in CALL_ORDER if any(call_class(r["kernels"]) == c for r in records.values())] + ["none"]
    print(f"  {'op':3} {'mode':12} " + " ".join(f"{c[:14]:>14}" for c in classes))
    for op in OPS:
        for m in MATHS:
            for b in BENCHES:
                rs = [records[(i, b, m, op)] for i in done if (i, b, m, op) in records]
                counts = {c: 0 for c in classes}
                for r in rs:
                    counts[call_class(r["kernels"])] += 1
                print(f"  {op:3} {m + '/' + b:12} " + " ".join(f"{counts[c]:14d}" for c in classes))
    if notes:
        print("\nnotes:")
        for n in notes:
            print(f"  {n}")
    print(f"\nstrict_probe done in {elapsed():.1f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
