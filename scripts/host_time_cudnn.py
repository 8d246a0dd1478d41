"""Exercise 10 on a GPU: where a cached call's host time goes, and throughput against F.conv2d.

    python3 scripts/host_time_cudnn.py            (from the repository root; about a minute on an H100)

1. Builds solutions/10_cudnn_conv with the grader's build (cached by source hash) and imports it.
2. Host time per call on 1x16x7x7, 16 -> 16, 3x3, padding 1, strict fp32, cudnn.benchmark on:
   2000 calls in loops of 200 with no sync inside a loop, divided (grader.bench.benchmark_extras's
   host_us_per_call), for F.conv2d, our Python API (cached in both algorithm modes, uncached; cached
   with the launch cache on, which replays a CUDA graph since every call has the same buffers, and
   off), our op without the Python wrapper (both ways), and torch.empty (the allocation every call
   makes).
3. Where it goes: one profiler run per call (CPU and CUDA activity): the op's own time, the
   allocation inside it, each CUDA runtime/driver call, the kernels per call and their GPU time
   (ours cached with graphs on and off).
4. cuDNN alone, through ctypes (no extension, no PyTorch on the path): host time of cudnnSetStream
   and of cudnnConvolutionForward for every algorithm cudnnFind returns on the same convolution,
   with its kernels per call. The difference to (2) is what our layers add. Then (4b) the same
   convolution through the graph (backend) API that PyTorch uses: a finalized execution plan run with
   cudnnBackendExecute, with the variant pack kept and built per call. The difference between (4) and
   (4b) is what the legacy API itself costs per call.
5. Throughput against F.conv2d on the two graded shapes, strict fp32 and TF32 (the spec's
   throughput(): grader.verify.timer.time_fn, median, L2 flushed).
6. Every legacy algorithm cuDNN offers for those shapes under each math type (FMA, TENSOR_OP,
   TENSOR_OP_ALLOW_CONVERSION, DEFAULT): cudnnFind's times, then the fastest two re-timed with
   time_fn and their error against float64, beside F.conv2d's time. This says whether any algorithm
   of the legacy API reaches 0.98x of PyTorch's in TF32.
"""
from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from grader.bench import benchmark_extras as extras  # noqa: E402
from grader import env  # noqa: E402
from grader.verify.timer import L2Flusher, math_mode, time_fn  # noqa: E402
from grader.specs import import_exercise_module  # noqa: E402
from grader.specs import ex10_cudnn_conv as ex10  # noqa: E402

HOST_TARGET_US = 10.0
RATIO_TARGET = 0.98
ALGO_NAMES = ["IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
              "WINOGRAD_NONFUSED"]
MATH_NAMES = {0: "DEFAULT", 1: "TENSOR_OP", 2: "TENSOR_OP_ALLOW_CONVERSION", 3: "FMA"}


def stats(values: list[float]) -> str:
    return f"{min(values):7.1f} {statistics.median(values):7.1f}"


# ------------------------------------------------------------------------------------ profiler split
def profile_split(fn, calls: int, op_names: tuple[str, ...]) -> dict:
    """Per call, from one profiler run: the op's time, aten::empty inside it, each CUDA runtime or
    driver call, and the kernels (count, names, GPU time). Profiling inflates host times; the split
    is what counts."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    op_us = empty_us = 0.0
    api: dict[str, list[float]] = {}
    kernels: dict[str, list[float]] = {}
    for e in prof.events():
        us = e.time_range.elapsed_us()
        if e.device_type == DeviceType.CUDA:
            kernels.setdefault(e.name, []).append(us)
        elif e.name in op_names:
            op_us += us
        elif e.name == "aten::empty":
            empty_us += us
        elif e.name.startswith("cu") and e.name not in ("cudaDeviceSynchronize", "cudaStreamSynchronize"):
            api.setdefault(e.name, []).append(us)
    return {"op_us": op_us / calls, "empty_us": empty_us / calls,
            "api": {k: (len(v) / calls, sum(v) / calls) for k, v in sorted(api.items())},
            "kernels": {k: (len(v) / calls, sum(v) / calls) for k, v in sorted(kernels.items())}}


def print_split(name: str, s: dict) -> None:
    api_us = sum(t for _, t in s["api"].values())
    print(f"  {name}: op {s['op_us']:.1f} us/call = aten::empty {s['empty_us']:.1f} + CUDA API {api_us:.1f} "
          f"+ the rest {s['op_us'] - s['empty_us'] - api_us:.1f} (host logic: ours and cuDNN's)")
    for k, (n, t) in s["api"].items():
        print(f"      {n:4.1f} x {k:<36s} {t:6.2f} us/call")
    gpu = sum(t for _, t in s["kernels"].values())
    print(f"      kernels: {sum(n for n, _ in s['kernels'].values()):.1f}/call, {gpu:.1f} us of GPU time/call")
    for k, (n, t) in s["kernels"].items():
        print(f"      {n:4.1f} x {k[:90]:<90s} {t:6.2f} us")


# ------------------------------------------------------------------------------ cuDNN through ctypes
class FwdPerf(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int), ("mathType", ctypes.c_int),
                ("reserved", ctypes.c_int * 3)]


class Cudnn:
    """The few legacy calls needed, straight from PyTorch's libcudnn.so.9."""

    def __init__(self):
        import nvidia.cudnn

        path = os.path.join(list(nvidia.cudnn.__path__)[0], "lib", "libcudnn.so.9")
        self.lib = lib = ctypes.CDLL(path)
        lib.cudnnGetErrorString.restype = ctypes.c_char_p
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        self.version = lib.cudnnGetVersion()
        self.handle = ctypes.c_void_p()
        self.check(lib.cudnnCreate(ctypes.byref(self.handle)))
        self.stream = torch.cuda.current_stream().cuda_stream
        self.check(lib.cudnnSetStream(self.handle, ctypes.c_void_p(self.stream)))

    def check(self, status: int) -> None:
        if status != 0:
            raise RuntimeError(f"cuDNN error {self.lib.cudnnGetErrorString(status).decode()}")

    def conv(self, x_shape, k: int, pad: int = 1):
        """Descriptors for x (NCHW float), w (k, C, 3, 3), a cross-correlation with `pad`, and y."""
        lib, c_int = self.lib, ctypes.c_int
        xd, wd, yd, cd = (ctypes.c_void_p() for _ in range(4))
        self.check(lib.cudnnCreateTensorDescriptor(ctypes.byref(xd)))
        self.check(lib.cudnnCreateTensorDescriptor(ctypes.byref(yd)))
        self.check(lib.cudnnCreateFilterDescriptor(ctypes.byref(wd)))
        self.check(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)))
        n, c, h, w = x_shape
        self.check(lib.cudnnSetTensor4dDescriptor(xd, 0, 0, n, c, h, w))  # NCHW, FLOAT
        self.check(lib.cudnnSetFilter4dDescriptor(wd, 0, 0, k, c, 3, 3))
        self.check(lib.cudnnSetConvolution2dDescriptor(cd, pad, pad, 1, 1, 1, 1, 1, 0))  # CROSS_CORRELATION
        dims = [c_int() for _ in range(4)]
        self.check(lib.cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, *map(ctypes.byref, dims)))
        y_shape = tuple(d.value for d in dims)
        self.check(lib.cudnnSetTensor4dDescriptor(yd, 0, 0, *y_shape))
        return xd, wd, cd, yd, y_shape

    def set_math(self, cd, math: int) -> None:
        self.check(self.lib.cudnnSetConvolutionMathType(cd, math))

    def workspace_size(self, descs, algo: int) -> int | None:
        xd, wd, cd, yd, _ = descs
        size = ctypes.c_size_t()
        status = self.lib.cudnnGetConvolutionForwardWorkspaceSize(self.handle, xd, wd, cd, yd, algo, ctypes.byref(size))
        return size.value if status == 0 else None

    def find(self, descs, x, w, y) -> list[FwdPerf]:
        """cudnnFindConvolutionForwardAlgorithmEx with every algorithm requested and a workspace as
        large as the hungriest one wants (at most 4 GiB), as the solution does."""
        xd, wd, cd, yd, _ = descs
        need = [self.workspace_size(descs, a) for a in range(len(ALGO_NAMES))]
        ws_bytes = min(max([n for n in need if n is not None] + [0]), 4 << 30)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")
        perf = (FwdPerf * len(ALGO_NAMES))()
        returned = ctypes.c_int()
        self.check(self.lib.cudnnFindConvolutionForwardAlgorithmEx(
            self.handle, xd, ctypes.c_void_p(x.data_ptr()), wd, ctypes.c_void_p(w.data_ptr()), cd, yd,
            ctypes.c_void_p(y.data_ptr()), len(ALGO_NAMES), ctypes.byref(returned), perf,
            ctypes.c_void_p(ws.data_ptr()), ctypes.c_size_t(ws_bytes)))
        return list(perf[: returned.value])

    def forward_fn(self, descs, x, w, y, algo: int, math: int):
        """A no-argument call of cudnnConvolutionForward with this algorithm and math type (set on
        the descriptor now) and its own workspace; None if cuDNN cannot size it."""
        xd, wd, cd, yd, _ = descs
        self.set_math(cd, math)
        ws_bytes = self.workspace_size(descs, algo)
        if ws_bytes is None:
            return None
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        args = (self.handle, ctypes.byref(one), xd, ctypes.c_void_p(x.data_ptr()), wd, ctypes.c_void_p(w.data_ptr()),
                cd, algo, ctypes.c_void_p(ws.data_ptr()), ctypes.c_size_t(ws_bytes), ctypes.byref(zero), yd,
                ctypes.c_void_p(y.data_ptr()))
        f, check = self.lib.cudnnConvolutionForward, self.check

        def call():
            check(f(*args))

        call._keep = (ws, one, zero)  # alive as long as the call
        return call


def cudnn_host_costs() -> None:
    print("\n4. cuDNN alone (ctypes), 1x16x7x7 16->16 3x3, strict fp32 (CUDNN_FMA_MATH): host time per call, "
          "min and median us of 10 loops of 200 calls")
    cu = Cudnn()
    print(f"  libcudnn {cu.version} (torch reports {torch.backends.cudnn.version()})")
    x, w = extras.host_inputs()
    descs = cu.conv(tuple(x.shape), extras.HOST_CASE[1])
    y = torch.empty(descs[4], device="cuda")
    cu.set_math(descs[2], 3)
    floor = extras.host_us_per_call(lambda: cu.lib.cudnnGetVersion())
    print(f"  {'ctypes floor (cudnnGetVersion)':<44s} {stats(floor)}")
    s = ctypes.c_void_p(cu.stream)
    set_stream = extras.host_us_per_call(lambda: cu.lib.cudnnSetStream(cu.handle, s))
    print(f"  {'cudnnSetStream (same stream)':<44s} {stats(set_stream)}")
    perf = cu.find(descs, x, w, y)
    reference = F.conv2d(x.double(), w.double(), None, 1, 1)
    print(f"  {'algorithm (Find order, math)':<44s} {'min':>7s} {'median':>7s}  Find GPU us  kernels/call  error")
    for p in perf:
        label = f"{ALGO_NAMES[p.algo]} ({MATH_NAMES.get(p.mathType, p.mathType)})"
        if p.status != 0:
            print(f"  {label:<44s} status {cu.lib.cudnnGetErrorString(p.status).decode()}")
            continue
        try:
            fn = cu.forward_fn(descs, x, w, y, p.algo, 3)
            if fn is None:
                print(f"  {label:<44s} no workspace size")
                continue
            t = extras.host_us_per_call(fn)
            split = profile_split(fn, 50, ())
        except RuntimeError as e:
            print(f"  {label:<44s} failed: {e}")
            continue
        nk = sum(n for n, _ in split["kernels"].values())
        err = ((y.double() - reference).norm() / reference.norm()).item()
        print(f"  {label:<44s} {stats(t)}  {p.time * 1e3:10.1f}  {nk:12.1f}  {err:.1e}  "
              f"{'; '.join(name[:40] for name in split['kernels'])}")


# --------------------------------------------------------------------- the graph API, for comparison
# cuDNN's backend (graph) API, enough for one forward convolution. Values from cudnn_graph.h (9.x).
T_HANDLE, T_DATA_TYPE, T_INT64, T_FLOAT, T_VOID_PTR = 0, 1, 3, 4, 6  # cudnnBackendAttributeType_t
T_CONV_MODE, T_HEUR_MODE, T_NOTE, T_DESC = 7, 8, 11, 15
D_CONV, D_ENGINE, D_ENGINECFG, D_ENGINEHEUR, D_PLAN = 1, 2, 3, 4, 5  # cudnnBackendDescriptorType_t
D_CONV_FWD, D_GRAPH, D_VARIANT_PACK, D_TENSOR = 10, 15, 16, 17


class Backend:
    """A finalized execution plan for x (NCHW float) * w (k, C, 3, 3), padding 1, strict fp32: the
    first engine config of cuDNN's heuristic without the Tensor Core note, as PyTorch filters them."""

    def __init__(self, cu: Cudnn, x, w, y, heur_mode: int = 0):
        lib = self.lib = cu.lib
        self.cu = cu
        lib.cudnnBackendCreateDescriptor.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
        lib.cudnnBackendSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                                 ctypes.c_void_p]
        lib.cudnnBackendGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
        lib.cudnnBackendFinalize.argtypes = [ctypes.c_void_p]
        lib.cudnnBackendDestroyDescriptor.argtypes = [ctypes.c_void_p]
        lib.cudnnBackendExecute.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.keep = []  # everything a descriptor points at stays alive

        def tensor(t, uid):
            d = self.create(D_TENSOR)
            self.set(d, 901, T_DATA_TYPE, ctypes.c_int(0))  # DATA_TYPE FLOAT
            self.set_array(d, 902, T_INT64, ctypes.c_int64, list(t.shape))
            self.set_array(d, 903, T_INT64, ctypes.c_int64, list(t.stride()))
            self.set(d, 906, T_INT64, ctypes.c_int64(uid))
            self.set(d, 900, T_INT64, ctypes.c_int64(16))
            cu.check(lib.cudnnBackendFinalize(d))
            return d

        xd, wd, yd = tensor(x, 1), tensor(w, 2), tensor(y, 3)
        conv = self.create(D_CONV)
        self.set(conv, 100, T_DATA_TYPE, ctypes.c_int(0))
        self.set(conv, 101, T_CONV_MODE, ctypes.c_int(1))  # CROSS_CORRELATION
        self.set(conv, 106, T_INT64, ctypes.c_int64(2))
        for attr, values in ((102, [1, 1]), (103, [1, 1]), (104, [1, 1]), (105, [1, 1])):
            self.set_array(conv, attr, T_INT64, ctypes.c_int64, values)
        cu.check(lib.cudnnBackendFinalize(conv))
        op = self.create(D_CONV_FWD)
        for attr, d in ((704, xd), (703, wd), (705, yd), (702, conv)):
            self.set(op, attr, T_DESC, d)
        self.set(op, 700, T_FLOAT, ctypes.c_float(1.0))
        self.set(op, 701, T_FLOAT, ctypes.c_float(0.0))
        cu.check(lib.cudnnBackendFinalize(op))
        graph = self.create(D_GRAPH)
        self.set(graph, 800, T_HANDLE, cu.handle)
        self.set(graph, 801, T_DESC, op)
        cu.check(lib.cudnnBackendFinalize(graph))
        heur = self.create(D_ENGINEHEUR)
        self.set(heur, 201, T_DESC, graph)
        self.set(heur, 200, T_HEUR_MODE, ctypes.c_int(heur_mode))
        cu.check(lib.cudnnBackendFinalize(heur))
        count = ctypes.c_int64()
        cu.check(lib.cudnnBackendGetAttribute(heur, 202, T_DESC, 0, ctypes.byref(count), None))
        configs = (ctypes.c_void_p * count.value)(*[self.create(D_ENGINECFG).value for _ in range(count.value)])
        cu.check(lib.cudnnBackendGetAttribute(heur, 202, T_DESC, count.value, ctypes.byref(count), configs))
        self.plan = None
        for i in range(count.value):
            cfg = ctypes.c_void_p(configs[i])
            engine = self.create(D_ENGINE)
            n = ctypes.c_int64()
            cu.check(lib.cudnnBackendGetAttribute(cfg, 300, T_DESC, 1, ctypes.byref(n), ctypes.byref(engine)))
            notes = (ctypes.c_int * 32)()
            cu.check(lib.cudnnBackendGetAttribute(engine, 1303, T_NOTE, 32, ctypes.byref(n), notes))
            if 0 in list(notes[: n.value]):  # CUDNN_NUMERICAL_NOTE_TENSOR_CORE: TF32, not strict fp32
                continue
            index = ctypes.c_int64()
            cu.check(lib.cudnnBackendGetAttribute(engine, 1301, T_INT64, 1, ctypes.byref(n), ctypes.byref(index)))
            plan = self.create(D_PLAN)
            self.set(plan, 400, T_HANDLE, cu.handle)
            self.set(plan, 401, T_DESC, cfg)
            if lib.cudnnBackendFinalize(plan) != 0:
                continue
            self.plan, self.engine, self.rank = plan, index.value, i
            break
        if self.plan is None:
            raise RuntimeError(f"none of the heuristic's {count.value} engine configs finalized without Tensor Cores")
        ws_bytes = ctypes.c_int64()
        cu.check(lib.cudnnBackendGetAttribute(self.plan, 402, T_INT64, 1, ctypes.byref(n), ctypes.byref(ws_bytes)))
        self.ws = torch.empty(max(ws_bytes.value, 1), dtype=torch.uint8, device="cuda")
        self.uids = (ctypes.c_int64 * 3)(1, 2, 3)
        self.ptrs = (ctypes.c_void_p * 3)(x.data_ptr(), w.data_ptr(), y.data_ptr())
        self.ws_ptr = ctypes.c_void_p(self.ws.data_ptr())
        self.pack = self.variant_pack()

    def create(self, kind: int) -> ctypes.c_void_p:
        d = ctypes.c_void_p()
        self.cu.check(self.lib.cudnnBackendCreateDescriptor(kind, ctypes.byref(d)))
        self.keep.append(d)
        return d

    def set(self, d, attr: int, kind: int, value) -> None:
        self.keep.append(value)
        self.cu.check(self.lib.cudnnBackendSetAttribute(d, attr, kind, 1, ctypes.byref(value)))

    def set_array(self, d, attr: int, kind: int, ctype, values) -> None:
        array = (ctype * len(values))(*values)
        self.keep.append(array)
        self.cu.check(self.lib.cudnnBackendSetAttribute(d, attr, kind, len(values), array))

    def variant_pack(self) -> ctypes.c_void_p:
        lib, check = self.lib, self.cu.check
        vp = ctypes.c_void_p()
        check(lib.cudnnBackendCreateDescriptor(D_VARIANT_PACK, ctypes.byref(vp)))
        check(lib.cudnnBackendSetAttribute(vp, 1000, T_INT64, 3, self.uids))
        check(lib.cudnnBackendSetAttribute(vp, 1001, T_VOID_PTR, 3, self.ptrs))
        check(lib.cudnnBackendSetAttribute(vp, 1003, T_VOID_PTR, 1, ctypes.byref(self.ws_ptr)))
        check(lib.cudnnBackendFinalize(vp))
        return vp

    def execute(self) -> None:
        """One call with the variant pack built once (pointers unchanged)."""
        self.cu.check(self.lib.cudnnBackendExecute(self.cu.handle, self.plan, self.pack))

    def execute_new_pack(self) -> None:
        """One call as PyTorch makes it: a variant pack for this call's pointers, then execute."""
        vp = self.variant_pack()
        self.cu.check(self.lib.cudnnBackendExecute(self.cu.handle, self.plan, vp))
        self.lib.cudnnBackendDestroyDescriptor(vp)


def graph_api_host_costs() -> None:
    print("\n4b. The same convolution through cuDNN's graph API (ctypes; strict fp32: first heuristic engine "
          "config without Tensor Cores), host time per call, min and median us")
    cu = Cudnn()
    x, w = extras.host_inputs()
    y = torch.zeros(x.shape[0], w.shape[0], *x.shape[2:], device="cuda")
    reference = F.conv2d(x.double(), w.double(), None, 1, 1)
    for mode, name in ((0, "INSTANT"), (3, "A")):
        b = Backend(cu, x, w, y, mode)
        y.zero_()
        b.execute()
        torch.cuda.synchronize()
        err = ((y.double() - reference).norm() / reference.norm()).item()
        split = profile_split(b.execute, 50, ())
        nk = sum(n for n, _ in split["kernels"].values())
        print(f"  heuristic {name}: engine {b.engine} (config {b.rank}), workspace {b.ws.numel()} B, error {err:.1e}, "
              f"{nk:.1f} kernels/call: {'; '.join(k[:50] for k in split['kernels'])}")
        print(f"  {'    cudnnBackendExecute, variant pack kept':<44s} {stats(extras.host_us_per_call(b.execute))}")
        print(f"  {'    variant pack per call (as PyTorch), execute':<44s} "
              f"{stats(extras.host_us_per_call(b.execute_new_pack))}")


# ------------------------------------------------------------------------------------ TF32 question
def algorithm_tables(flush) -> None:
    print("\n6. Legacy algorithms per math type on the graded shapes: cudnnFind's time, then the fastest two "
          "re-timed (time_fn median, L2 flushed) with their error against float64")
    cu = Cudnn()
    for x_shape, k in ex10.BENCH:
        x, w = extras.host_inputs(x_shape, k)
        descs = cu.conv(x_shape, k)
        y = torch.empty(descs[4], device="cuda")
        reference = F.conv2d(x.double(), w.double(), None, 1, 1)
        for tf32 in (False, True):
            with math_mode(tf32=tf32, cudnn_benchmark=True):
                base = time_fn(lambda _: F.conv2d(x, w, None, 1, 1), [None], flush=flush, max_seconds=1.0)
            print(f"  {'x'.join(map(str, x_shape))} {x_shape[1]}->{k}, F.conv2d {'TF32' if tf32 else 'strict'}: "
                  f"{base.median_s * 1e6:.1f} us")
        for math in (3, 1, 2, 0):
            cu.set_math(descs[2], math)
            perf = [p for p in cu.find(descs, x, w, y) if p.status == 0]
            row = ", ".join(f"{ALGO_NAMES[p.algo]}/{MATH_NAMES.get(p.mathType, p.mathType)} {p.time * 1e3:.0f}"
                            for p in perf)
            print(f"    math {MATH_NAMES[math]:<26s} Find (us): {row}")
            for p in perf[:2]:
                fn = cu.forward_fn(descs, x, w, y, p.algo, p.mathType)
                if fn is None:
                    continue
                t = time_fn(lambda _: fn(), [None], flush=flush, max_seconds=1.0)
                err = ((y.double() - reference).norm() / reference.norm()).item()
                label = f"{ALGO_NAMES[p.algo]}/{MATH_NAMES.get(p.mathType, p.mathType)}"
                print(f"      {label:<50s} {t.median_s * 1e6:8.1f} us  error {err:.1e}")


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    t0 = time.perf_counter()
    m = import_exercise_module(env.REPO / "solutions" / ex10.SPEC.exercise, ex10.SPEC)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"solutions/10 built and loaded in {time.perf_counter() - t0:.1f} s (namespace {m.lib.namespace})")
    flush = L2Flusher()
    verdicts = []

    with math_mode(cudnn_benchmark=True):  # strict fp32, PyTorch at its fastest algorithm
        x, w = extras.host_inputs()
        calls = extras.host_calls(m, x, w)
        mode = m.MODES["benchmark"]
        calls["op without the Python wrapper"] = lambda: m._conv2d(x, w, None, 1, 1, 1, 1, mode)
        calls[f"op without the Python wrapper, {extras.GRAPHS_OFF}"] = lambda: m._conv2d(x, w, None, 1, 1, 1, 1, mode)
        calls["torch.empty of the output"] = lambda: torch.empty((1, 16, 7, 7), device="cuda")
        print("\n2. Host time per call, 1x16x7x7 16->16 3x3 pad 1, strict fp32 (us, min and median of 10 loops "
              "of 200 calls)")
        m.cache_clear()
        host = extras.host_times(m, calls)
        for name, times in host.items():
            print(f"  {name:<52s} {stats(times)}")
        print(f"  launch cache: {m.cache_stats()}")
        ours = min(host["cached, benchmark"])
        verdicts.append(f"host time per cached call {ours:.1f} us with the launch cache (target <= "
                        f"{HOST_TARGET_US:.0f}; without it {min(host['cached, benchmark, ' + extras.GRAPHS_OFF]):.1f}; "
                        f"F.conv2d {min(host['F.conv2d']):.1f})")

        print("\n3. Where it goes (profiler, per call; profiling inflates host times)")
        ns = m.lib.namespace
        print_split("F.conv2d", profile_split(calls["F.conv2d"], 200, ("aten::conv2d",)))
        print_split("ours, cached (graph replay)", profile_split(calls["cached, benchmark"], 200, (f"{ns}::conv2d",)))
        with ex10.launch_cache(m, False):
            print_split("ours, cached, graphs off", profile_split(calls["cached, benchmark"], 200, (f"{ns}::conv2d",)))
        print_split("ours, uncached", profile_split(calls["uncached"], 20, (f"{ns}::conv2d",)))

    try:
        with math_mode(cudnn_benchmark=True):
            cudnn_host_costs()
    except Exception as e:  # a diagnostic: the rest still runs
        print(f"  failed: {type(e).__name__}: {e}")

    try:
        with math_mode(cudnn_benchmark=True):
            graph_api_host_costs()
    except Exception as e:
        print(f"  failed: {type(e).__name__}: {e}")

    print("\n5. Throughput against F.conv2d (cudnn.benchmark on), median GPU time")
    rows = extras.throughput(m, flush)
    for name, r in rows.items():
        print(f"  {name:<28s} ours {r['ours_us']:8.1f} us  F.conv2d {r['pytorch_us']:8.1f} us  ratio {r['ratio']:.2f}x")
        verdicts.append(f"{name}: {r['ratio']:.2f}x of F.conv2d (target >= {RATIO_TARGET})")

    try:
        algorithm_tables(flush)
    except Exception as e:
        print(f"  failed: {type(e).__name__}: {e}")

    print("\nSummary:")
    for v in verdicts:
        print(f"  {v}")
    print(f"cache: {m.cache_stats()}; total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
