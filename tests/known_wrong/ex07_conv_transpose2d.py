from tests.known_wrong import IN_TIMING, LAZY, SIDE_STREAM, UNOBSERVED, Variant, after_lib, takes_over

EX = "07_conv_transpose2d"
STRIDES = "  s.stride_h = static_cast<int>(st[0]);\n  s.stride_w = static_cast<int>(st[1]);\n"
OUT_SIZE = "out = (in - 1) * stride - 2 * pad + dil * (k - 1) + output_pad + 1;"

VARIANTS = [
    Variant(EX, "padding_ignored_at_border", "a tap past the input's last row or column reads the border pixel instead of 0",
            {"conv_transpose2d.cu": [("return i < in_size ? i : -1;", "return i < in_size ? i : in_size - 1;")]},
            loses={"gather"}, reason="relative error"),
    Variant(EX, "stride_wrong_axis", "the row stride is used for columns and the column stride for rows",
            {"conv_transpose2d.cpp": [(STRIDES, "  s.stride_h = static_cast<int>(st[1]);\n  s.stride_w = static_cast<int>(st[0]);\n")]},
            # the backward's calls have stride 1, but gradcheck differentiates the forward with stride (2, 1)
            loses={"gather", "implicit_gemm", "autograd", "performance"}, reason="stride (2, 1)"),
    Variant(EX, "output_size_off_by_one", "the output size misses the last position",
            {"conv_transpose2d.cpp": [(OUT_SIZE, "out = (in - 1) * stride - 2 * pad + dil * (k - 1) + output_pad;")]},
            loses={"gather", "implicit_gemm", "autograd", "registration", "performance"}, reason="shape"),
    Variant(EX, "output_padding_ignored", "the output size leaves out output_padding",
            {"conv_transpose2d.cpp": [(OUT_SIZE, "out = (in - 1) * stride - 2 * pad + dil * (k - 1) + 1;")]},
            loses={"gather", "implicit_gemm", "autograd", "registration", "performance"}, reason="output_padding"),
    Variant(EX, "dilation_ignored", "the kernel taps are taken as adjacent whatever the dilation",
            {"conv_transpose2d.cu": [("source_index(oh, kh * s.dil_h,", "source_index(oh, kh,"),
                                     ("source_index(ow, kw * s.dil_w,", "source_index(ow, kw,")]},
            loses={"gather"}, reason="dilation"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.nn.functional.conv_transpose2d (cuDNN)",
            {"conv_transpose2d.py": [("return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),\n                                    int(groups), _pair(dilation), int(version))",
                                      "return torch.nn.functional.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)")]},
            # its gradients are PyTorch's own (right): the backward's kernels are cuDNN's
            loses={"gather", "implicit_gemm", "autograd", "input_checks", "performance"},
            reason="other than this exercise's own"),
    Variant(EX, "bias_shape_unchecked", "a bias with more values than output channels is accepted",
            {"conv_transpose2d.cpp": [("b.dim() == 1 && b.size(0) == weight.size(1) * groups",
                                       "b.dim() == 1 && b.size(0) >= weight.size(1) * groups")]},
            loses={"input_checks"}, reason="bias"),
]

CALL = "    return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),\n"

# The trust rework's classes (issue: grader trust), written against the grader before it.
VARIANTS += [
    Variant(EX, "cudnn_when_timed", "calls torch.nn.functional.conv_transpose2d when its call stack shows the timer",
            {"conv_transpose2d.py": [takes_over(CALL, IN_TIMING, "torch.nn.functional.conv_transpose2d(x, weight, bias, "
                                                                 "stride, padding, output_padding, groups, dilation)")]},
            loses={"implicit_gemm", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
]

BIAS = "  const at::Tensor bc = bias.has_value() ? bias->contiguous() : at::Tensor();"
# the taps along the height are taken as adjacent whatever the dilation: wrong wherever dilation[0] > 1,
# which neither the judge's audit call (dilation (1, 2)) nor the benchmark (1) has
HEIGHT_DILATION_IGNORED = [("source_index(oh, kh * s.dil_h,", "source_index(oh, kh,")]
FULL_CALL = CALL + "                                    int(groups), _pair(dilation), int(version))\n"
# float32 only, and no NaN or infinity moves: the bias is left out (the judge's audit calls are
# float64, the benchmark has no bias)
BIAS_DROPPED_IN_FP32 = [("scalar_t acc = bias ? bias[co] : scalar_t(0);",
                         "scalar_t acc = bias && sizeof(scalar_t) == 8 ? bias[co] : scalar_t(0);")]
OWN_CALL = ("lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding), "
            "int(groups), _pair(dilation), int(version))")
LARGE = "x.shape[0] >= 32"
OUT_SHAPE = ("[x.shape[0], weight.shape[1] * groups] + [output_size(x.shape[2 + i], weight.shape[2 + i], _pair(stride)[i], "
             "_pair(padding)[i], _pair(output_padding)[i], _pair(dilation)[i]) for i in range(2)]")
# cuDNN's transposed convolution in strict float32 (its default for convolutions, TF32, would miss the
# checks' tolerance)
STRICT_CUDNN = """

def _strict_cudnn(x, weight, bias, stride, padding, output_padding, groups, dilation):
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        return torch.nn.functional.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)
"""
# float64 references computed by the exercise's own op (so they share its faults)
OWN_REFERENCE = """

import torch.nn.functional as _F

_F.conv_transpose2d = lambda x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1: (
    lib.ops.conv_transpose2d(x, w, b, _pair(stride), _pair(padding), _pair(output_padding), groups, _pair(dilation), 2))
"""
# a kernel for aten::linalg_vector_norm under the BackendSelect dispatch key, which every call passes
# through (the default included key set): every vector norm is 0, so every normwise relative error
# ||a - e|| / ||e|| the checks compute is 0
ZERO_NORMS_BACKEND_SELECT = """

_aten = torch.library.Library("aten", "IMPL")
_aten.impl("linalg_vector_norm", lambda x, *args, **kwargs: torch.zeros((), dtype=x.dtype, device=x.device),
           "BackendSelect")
"""

# The trust rework's classes, continued (unit 3: timed work unverified, coverage, integrity, own
# kernel and aliasing).
VARIANTS += [
    Variant(EX, "side_stream_for_large_batches", "for batches of 32 or more (the benchmark's), runs the op on a "
            "stream of its own that never joins the current one: the timer's events see none of the work",
            {"conv_transpose2d.py": [takes_over(CALL, LARGE, "_on_a_side_stream(lambda: " + OWN_CALL + ")"),
                                     after_lib(SIDE_STREAM)]},
            # the kernel starts during the timer's GPU sleep, before the current stream reaches the call:
            # the watched timed calls see it (speed.unordered_work), and implicit_gemm, the group the timed
            # calls vouch for, loses (winograd, autograd, registration and performance with it). Its timed
            # outputs were right in every checked call (H200, 2026-12-02), and only the timing was refused,
            # until the order itself was judged; the huge winograd check's reads raced the side stream (it
            # lost once, H200 2026-12-01)
            loses={"implicit_gemm", "performance"}, reason="the benchmark's shape",
            extra={"timed": True, "kind": "timed work unverified", "old": "loses performance"}),
    Variant(EX, "cudnn_when_not_profiled", "for batches of 32 or more (the benchmark's), calls cuDNN in strict "
            "float32 whenever no profiler is on: its own kernel runs only while the grader profiles it",
            {"conv_transpose2d.py": [after_lib(STRICT_CUDNN), takes_over(CALL, f"{LARGE} and {UNOBSERVED}",
                                     "_strict_cudnn(x, weight, bias, stride, padding, output_padding, groups, dilation)")]},
            # right results, and its own kernels whenever the torch profiler is on; the grader's kernel watch
            # is not that profiler, so the watched timed calls at the benchmark's shape and autograd's huge
            # batch (past 2^31 elements) see cuDNN's kernels (H200, 2026-11-30); winograd, registration
            # and performance count only once implicit_gemm passes
            loses={"implicit_gemm", "winograd", "autograd", "registration", "performance"},
            reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "computes_when_read", "for batches of 32 or more (the benchmark's), returns a Tensor subclass that "
            "runs the op only when something reads it (after the timing)",
            {"conv_transpose2d.py": [after_lib(LAZY), takes_over(CALL, LARGE, f"_lazy({OUT_SHAPE}, x, lambda: {OWN_CALL})")]},
            # both versions' large-batch calls return it (measured on the H100)
            loses={"gather", "implicit_gemm", "performance"}, reason="plain torch.Tensor",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "bias_read_as_contiguous", "passes the bias to the kernel without .contiguous(): a strided view is "
            "read as if its values were adjacent",
            {"conv_transpose2d.cpp": [(BIAS, "  const at::Tensor bc = bias.has_value() ? *bias : at::Tensor();")]},
            # the generated property passes each tensor argument, bias too, as a strided view
            loses={"gather", "implicit_gemm", "performance"}, keeps={"input_checks"}, reason="strided",
            extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "replaces_the_float64_reference", "replaces torch.nn.functional.conv_transpose2d (the checks' "
            "float64 reference) with the exercise's own op, and ignores the dilation along the height",
            {"conv_transpose2d.py": [after_lib(OWN_REFERENCE)], "conv_transpose2d.cu": HEIGHT_DILATION_IGNORED},
            loses={"gather", "implicit_gemm", "autograd", "input_checks", "registration", "performance"},
            status="tampered", reason="torch.nn.functional.conv_transpose2d",
            extra={"kind": "integrity", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: grader.verify.integrity hashes the dispatcher's table only on
    # the keys CPU, CUDA, Autograd*, CompositeImplicitAutograd and CompositeExplicitAutograd
    # (DISPATCH_KEYS); a kernel registered under BackendSelect (in every call's key set, below
    # autograd) intercepts the op for CPU and CUDA tensors alike and is in no snapshot (shown on the
    # CPU: relative_error(a, a + 1) == 0.0 and Snapshot.changed(deep=True) == [], and the CPU grade of
    # this variant reports no tampering). The judge's float64 audit calls and the bias-free benchmark
    # are right, and no NaN or infinity moves. Read from that grader, it would get full marks there (not run).
    Variant(EX, "zero_norms_under_backend_select", "registers a kernel for aten::linalg_vector_norm under the "
            "BackendSelect dispatch key that returns 0 (every normwise relative error reads 0), and leaves the "
            "bias out in float32",
            {"conv_transpose2d.py": [after_lib(ZERO_NORMS_BACKEND_SELECT)], "conv_transpose2d.cu": BIAS_DROPPED_IN_FP32},
            loses={"gather", "implicit_gemm", "autograd", "input_checks", "registration", "performance"},
            status="tampered", extra={"kind": "integrity", "old": "full marks"}),
    Variant(EX, "cudnn_for_dilation", "calls torch.nn.functional.conv_transpose2d (cuDNN) when the dilation is above 1",
            {"conv_transpose2d.py": [takes_over(CALL, "max(_pair(dilation)) > 1", "torch.nn.functional.conv_transpose2d("
                                                "x, weight, bias, stride, padding, output_padding, groups, dilation)")]},
            # the own-kernels property profiles the audit call, dilation (1, 2); the judge's wrong-device calls
            # (that same call, x on the CPU) get PyTorch's "Input type ... and weight type ..." error, which
            # does not name x; the autograd group's dilated case gets cuDNN's backward
            loses={"gather", "implicit_gemm", "autograd", "input_checks", "performance"}, keeps=set(),
            reason="other than this exercise's own", extra={"kind": "own kernel", "old": "loses input_checks"}),
    Variant(EX, "one_output_buffer_per_shape", "computes into one buffer per shape and dtype and returns it every "
            "time, so a second call overwrites the first call's result",
            {"conv_transpose2d.py": [(FULL_CALL, f"    return _reuse({OWN_CALL})\n"),
                                     after_lib("\n_buffers = {}\n\n\ndef _reuse(y):\n"
                                               "    key = (tuple(y.shape), y.dtype, y.device)\n"
                                               "    return _buffers.setdefault(key, torch.empty_like(y)).copy_(y)\n")]},
            # "two results held at once" keeps both results of one shape
            loses={"gather", "implicit_gemm", "performance"}, keeps={"input_checks"}, reason="shares memory",
            extra={"kind": "aliasing", "old": "full marks"}),
]

# Version 2, the implicit GEMM: its own faults cost its group (and the speed it unlocks), not the gather's.
VARIANTS += [
    Variant(EX, "gemm_phase_taps_from_tap_0", "the implicit GEMM takes every stride phase's taps from tap 0 "
            "(tap 0, step, 2 step, ..) instead of from the first tap that reaches the phase's outputs",
            {"conv_transpose2d.cu": [("    if ((r * dil) % stride == want) {", "    if (true) {")]},
            # the backward's calls have stride 1; gradcheck differentiates the strided forward
            loses={"implicit_gemm", "autograd", "performance"}, reason="stride"),
    Variant(EX, "gemm_first_phase_only", "the launcher runs stride phase (0, 0) only: at a stride, the outputs of "
            "the other phases are never written",
            {"conv_transpose2d.cu": [("  const int phases = s.stride_h * s.stride_w;", "  const int phases = 1;")]},
            loses={"implicit_gemm", "autograd", "performance"}, reason="stride"),
    Variant(EX, "gemm_bias_dropped", "the implicit GEMM's epilogue leaves the bias out",
            {"conv_transpose2d.cu": [("    const T b = bias ? bias[co] : T(0);", "    const T b = T(0);")]},
            # gradcheck: the forward does not depend on the bias its backward differentiates
            loses={"implicit_gemm", "autograd", "performance"}, reason="relative error"),
]

# Groups (issue 20): the check that let a grouped call through with the wrong channels, and each
# version's group offsets.
VARIANTS += [
    Variant(EX, "weight_check_ignores_groups", "the argument checks never test that groups divides x's channels: a "
            "weight that groups=1 accepts goes through with groups that do not fit x, and the op returns "
            "weight.size(1) * groups channels computed from the wrong input channels instead of an error",
            {"conv_transpose2d.cpp": [("TORCH_CHECK(x.size(1) % groups == 0,", "TORCH_CHECK(true || x.size(1) % groups == 0,")]},
            loses={"input_checks"}, reason="groups"),
    Variant(EX, "gather_weight_offset_by_output_group", "the gather offsets the weight by the group's output channels "
            "(g * cout/groups, as a conv2d weight's rows would be) instead of its input channels (g * cin/groups)",
            {"conv_transpose2d.cu": [("const scalar_t* wg = weight + (int64_t(g) * cin_g * cout_g + cg) * taps;",
                                      "const scalar_t* wg = weight + (int64_t(g) * cout_g + cg) * taps;")]},
            # the same as the right offset where each group has one input channel (depthwise); ResNeXt's differ
            loses={"gather"}, keeps={"implicit_gemm", "autograd", "input_checks", "performance"},
            reason="relative error"),
    Variant(EX, "gemm_gathers_group_0", "the implicit GEMM's gather reads group 0's input channels for every group",
            {"conv_transpose2d.cu": [("base = x + (int64_t(n) * s.cin + int64_t(group) * (s.cin / s.groups)) * H * W;",
                                      "base = x + int64_t(n) * s.cin * H * W;")]},
            loses={"implicit_gemm", "autograd", "performance"}, keeps={"gather", "input_checks"},
            reason="relative error"),
]

# The backward (autograd): conv_transpose2d.py computes both gradients with the forward op (version 2
# for the gradient values), so each of these keeps every forward group and loses autograd alone.
FLIP = "weight.reshape(g, cin // g, cout_g, kh, kw).transpose(1, 2).flip(3, 4)\n"
SAMPLE = "    return sample(full, [min(q, 0) for q in pad], stride, (h, w))\n"
WGRAD_CALL = "full = convt(z, kernel, [1, 1], [max(q, 0) for q in pad], [0, 0], g * c, list(stride))"
OP_CALL = ("        return lib.ops.conv_transpose2d(x, w, None, stride, padding, output_padding, int(groups), dilation, "
           "version)\n")
VARIANTS += [
    Variant(EX, "backward_kernel_not_flipped", "the data gradient's stride-1 transposed convolution takes the kernel "
            "transposed per group but not flipped",
            {"conv_transpose2d.py": [(FLIP, FLIP.replace(".flip(3, 4)", ""))]},
            # right kernels, wrong values: the group's first failure is gradcheck's
            loses={"autograd"}, reason="gradcheck"),
    Variant(EX, "backward_ignores_the_stride", "the data gradient keeps the first rows and columns of its stride-1 "
            "result instead of every s-th",
            {"conv_transpose2d.py": [(SAMPLE, SAMPLE.replace(", stride, (h, w))", ", [1, 1], (h, w))"))]},
            loses={"autograd"}, reason="gradcheck"),
    Variant(EX, "weight_gradient_drops_groups", "the weight gradient's call has one group per chunk, not one per "
            "group and chunk: a grouped layer's result has too few channels",
            {"conv_transpose2d.py": [(WGRAD_CALL, WGRAD_CALL.replace("g * c,", "c,"))]},
            loses={"autograd"}, reason="invalid"),
    Variant(EX, "backward_through_pytorch", "the backward's identities call torch.nn.functional.conv_transpose2d "
            "(cuDNN) instead of the exercise's op: right gradients, PyTorch's work",
            {"conv_transpose2d.py": [(OP_CALL, "        return torch.nn.functional.conv_transpose2d(x, w, None, stride, "
                                               "padding, output_padding, int(groups), dilation)\n")]},
            loses={"autograd"}, reason="the op must do this work itself"),
]

# Version 3, Winograd (issue 20): a transform's constant wrong, and the conv form's padding dropped.
VARIANTS += [
    Variant(EX, "winograd_output_transform_row_2", "version 3's output transform takes row 2 of A^T as (0, 1, 1, 2, "
            "2, 0) instead of (0, 1, 1, 4, 4, 0): the third row and column of every 4 x 4 tile are wrong",
            {"conv_transpose2d.cu": [("  o[2] = s1 + 4 * s2;\n", "  o[2] = s1 + 2 * s2;\n")]},
            loses={"winograd"}, reason="relative error"),
    Variant(EX, "winograd_input_tiles_unpadded", "version 3's input tiles start at the image's corner, not 2 - padding "
            "before it: every output is shifted by the padding",
            {"conv_transpose2d.cu": [("        x, V, flags, s, 2 - s.pad_h, 2 - s.pad_w, th, tw);\n",
                                     "        x, V, flags, s, 0, 0, th, tw);\n")]},
            loses={"winograd"}, reason="relative error"),
]

# Parameter values never graded (issue 47): each an edge of a declared domain (grader.verify.spec.Edge), which the
# generated checks reach in every dtype whatever the seed.
VARIANTS += [
    Variant(EX, "winograd_padding_past_2_not_cropped", "version 3 pads its correlation by max(2 - padding, 0): a "
            "padding of 3 or more, which should crop, is taken as 2 (the hand-written cases' paddings stop at 2)",
            {"conv_transpose2d.cu": [("x, V, flags, s, 2 - s.pad_h, 2 - s.pad_w, th, tw);",
                                      "x, V, flags, s, std::max(2 - s.pad_h, 0), std::max(2 - s.pad_w, 0), th, tw);")]},
            # the generated checks at the padding's edges 3 and the widest (Winograd's 3 x 3 stride-1 calls)
            loses={"winograd"}, reason="padding=", extra={"kind": "coverage", "old": "full marks"}),
]

# Planner paths no checked call took (issue 47): the weight gradient of a batch past 2^31 elements goes in
# pieces (`wgrad.batch_pieces`), which only the autograd group's huge check reaches: graded in full
VARIANTS += [
    Variant(EX, "weight_gradient_drops_later_pieces", "the weight gradient of a batch in pieces keeps the first "
            "piece's sum and drops the others",
            {"conv_transpose2d.py": [("total = part if total is None else total + part",
                                      "total = part if total is None else total")]},
            loses={"autograd"}, reason="past 2^31 elements",
            extra={"huge": True, "kind": "coverage", "old": "full marks"}),
]

# The drop-in module class (Spec.drop_ins): built as torch.nn's is, its outputs a registration check, its
# gradients an autograd one (the outputs' check had sat in a group 07 does not score)
VARIANTS += [
    Variant(EX, "module_default_dilation_two", "ConvTranspose2d's constructor defaults dilation to 2, not "
            "torch.nn.ConvTranspose2d's 1: a layer built without it spreads its kernel taps",
            {"conv_transpose2d.py": [("    def forward(self, x: torch.Tensor, output_size=None) -> torch.Tensor:\n",
                                      "    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, "
                                      "output_padding=0, groups=1, bias=True, dilation=2, padding_mode=\"zeros\", "
                                      "device=None, dtype=None):\n"
                                      "        super().__init__(in_channels, out_channels, kernel_size, stride, padding, "
                                      "output_padding, groups, bias, dilation, padding_mode, device, dtype)\n\n"
                                      "    def forward(self, x: torch.Tensor, output_size=None) -> torch.Tensor:\n")]},
            loses={"registration", "autograd"}, reason="a drop-in for torch.nn.ConvTranspose2d",
            extra={"kind": "drop-in defaults", "old": "full marks"}),
]

# A registered fake that lets a kernel of no rows (or no columns) through, `and` written `or` (a `make
# mutants` survivor): each axis of the weight's kernel at 0 is a declared edge (spec.conv_empty_kernel).
VARIANTS += [
    Variant(EX, "fake_accepts_a_kernel_of_no_rows", "the registered fake checks that the kernel has rows or "
            "columns, not both: a weight of kernel height 0 traces to an output the op refuses to compute",
            {"conv_transpose2d.py": [("torch._check(ws[2] > 0 and ws[3] > 0,",
                                      "torch._check(ws[2] > 0 or ws[3] > 0,")]},
            loses={"gather", "implicit_gemm", "winograd"}, keeps={"autograd", "input_checks", "registration"},
            reason="torch.compile would trace a wrong shape", extra={"kind": "registered fake", "old": "full marks"}),
]

# The default version's estimate of Winograd's transforms with one dimension's tiles miscounted (a `make
# mutants` survivor, 07:conv_transpose2d.py:39:constant:e5c53ada): each spatial dimension at the edge alone.
VARIANTS += [
    Variant(EX, "winograd_estimate_counts_5_columns_as_one_tile", "default_version counts the output's columns "
            "in tiles of 5, not 4: past 2^31 transform elements by the kernel's count, it still picks Winograd, "
            "which refuses the call",
            {"conv_transpose2d.py": [("tiles = x.shape[0] * -(-ho // 4) * -(-wo // 4)",
                                      "tiles = x.shape[0] * -(-ho // 4) * -(-wo // 5)")]},
            loses={"winograd"}, reason="version=None must choose a version that takes these arguments",
            extra={"kind": "coverage", "old": "full marks"}),
]
