from tests.known_wrong import FP16_MMA, Variant, after_lib, memo_by_pointer, takes_over

EX = "06_conv2d"
PADDED_LOAD = "return (ih >= 0 && ih < h && iw >= 0 && iw < w) ? plane[ih * w + iw] : scalar_t(0);"
STRIDES = "  s.stride_h = static_cast<int>(st[0]);\n  s.stride_w = static_cast<int>(st[1]);\n"
OUT_SIZE = "out = (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;"
K_TILES = "const int k_tiles = (K + BK - 1) / BK;"
A_LOAD = "? load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w)"
TF32 = "tensor_cores_tf32"  # version 3: graded on GPUs of compute capability 8.0 and newer only
EVERYTHING = {"direct", "implicit_gemm", "depthwise", TF32, "autograd", "input_checks", "registration",
              "performance"}

# A fault in the implicit GEMM costs the depthwise group too: its 1 x 4194304 row (more column tiles than a
# grid's y holds) does not fit the depthwise tile and takes the GEMM (planner path v2.depthwise_to_gemm),
# and a depthwise convolution computed wrong is wrong whichever kernel computed it ("GEMM's depthwise row").

VARIANTS = [
    Variant(EX, "padding_ignored_at_border", "taps in the padding read the nearest border pixel instead of 0",
            {"conv2d.cu": [(PADDED_LOAD, "return plane[min(max(ih, 0), h - 1) * w + min(max(iw, 0), w - 1)];")]},
            # the backward's data gradient pads by d (k - 1) - p; GEMM's depthwise row
            loses={"direct", "implicit_gemm", "depthwise", "autograd", "performance"}, reason="relative error"),
    Variant(EX, "stride_wrong_axis", "the row stride is used for columns and the column stride for rows",
            {"conv2d.cpp": [(STRIDES, "  s.stride_h = static_cast<int>(st[1]);\n  s.stride_w = static_cast<int>(st[0]);\n")]},
            # the weight gradient's call has the forward's dilation (1, 2) as its stride
            loses={"direct", "implicit_gemm", "depthwise", TF32, "autograd", "performance"}, reason="stride (2, 1)"),
    Variant(EX, "output_size_off_by_one", "the output size misses the final kernel placement",
            {"conv2d.cpp": [(OUT_SIZE, "out = (in + 2 * pad - dil * (k - 1) - 1) / stride;")]},
            loses={"direct", "implicit_gemm", "depthwise", TF32, "autograd", "registration", "performance"},
            reason="shape"),
    Variant(EX, "k_tail_dropped", "the implicit GEMM skips the last K step when cin * kh * kw is not a multiple of 8",
            {"conv2d.cu": [(K_TILES, "const int k_tiles = K / BK;")]},
            # the data gradient of a 1x1 from 4 channels: K = 4, no K step at all; GEMM's depthwise row
            loses={"implicit_gemm", "depthwise", "autograd", "performance"}, reason="relative error"),
    Variant(EX, "fp16_operands", "the implicit GEMM rounds the input to a 10-bit mantissa (like TF32 or fp16)",
            {"conv2d.cu": [(A_LOAD, "? static_cast<scalar_t>(static_cast<float>(c10::Half(static_cast<float>("
                                    "load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w)))))")]},
            # GEMM's depthwise row
            loses={"implicit_gemm", "depthwise", "autograd", "performance"}, reason="relative error"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.nn.functional.conv2d (cuDNN)",
            {"conv2d.py": [("return lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups), "
                            "int(version))",
                            "return torch.nn.functional.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), "
                            "groups)")]},
            # its gradients are PyTorch's own (right): the backward's kernels are cuDNN's
            loses={"direct", "implicit_gemm", "depthwise", TF32, "autograd", "input_checks", "performance"},
            reason="other than this exercise's own"),
    Variant(EX, "bias_shape_unchecked", "a bias with more values than output channels is accepted",
            {"conv2d.cpp": [("b.dim() == 1 && b.size(0) == weight.size(0)", "b.dim() == 1 && b.size(0) >= weight.size(0)")]},
            loses={"input_checks"}, reason="bias"),
    Variant(EX, "gemm_on_default_stream", "the implicit-GEMM kernel is launched on the legacy default stream",
            {"conv2d.cu": [("conv2d_kernel2<scalar_t, BM><<<grid, BM, 0, stream>>>(", "conv2d_kernel2<scalar_t, BM><<<grid, BM>>>(")]},
            # the backward's calls too: the gradients on a side stream whose inputs arrive late
            loses={"implicit_gemm", "autograd", "performance"}, keeps={"direct", "depthwise", "input_checks"},
            reason="torch.cuda.stream"),
]

CALL = ("    return lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups), "
        "int(version))\n")

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "cudnn_for_large_batches", "calls torch.nn.functional.conv2d (cuDNN) for batches of 32 or more: the "
            "benchmark's, larger than any checked one",
            {"conv2d.py": [takes_over(CALL, "x.shape[0] >= 32",
                                      "torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups)")]},
            loses={"implicit_gemm", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "memo_by_pointer", "for batches of 32 or more, keeps each result by its inputs' addresses and "
            "returns a copy of it when called on the same tensors again",
            {"conv2d.py": memo_by_pointer(
                CALL, "x.shape[0] >= 32", "(x.data_ptr(), weight.data_ptr(), tuple(x.shape), tuple(weight.shape), version)",
                "lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups), int(version))")},
            loses={"implicit_gemm", "performance"}, reason="timed",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "output_layout_follows_the_input", "returns its (right) output in the input's memory format "
            "(channels_last in, channels_last out), while its registered fake says contiguous",
            {"conv2d.cpp": [("  return y;\n", "  return y.contiguous(x.suggest_memory_format());\n")]},
            loses={"direct", "implicit_gemm", "depthwise", TF32, "performance"}, keeps={"input_checks"},
            reason="registered fake", extra={"kind": "coverage", "old": "full marks"}),
]

EPILOGUE_START = "  const int co0 = blockIdx.y * BN;  // within the group\n"
INCLUDES = "#include <ATen/ops/empty.h>\n"
GUARD = "  const c10::cuda::CUDAGuard device_guard(x.device());\n  const at::Tensor xc = x.contiguous();"
# float32 only: the implicit GEMM rounds its input operand to fp16's 10-bit mantissa
FP16_IN_FP32 = ("? (sizeof(scalar_t) == 4 ? static_cast<scalar_t>(static_cast<float>(c10::Half(static_cast<float>("
                "load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w))))) : "
                "load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w))")
# a 1x1 convolution is a matrix product over the channels: done by cuBLAS (torch.einsum)
POINTWISE = """

def _pointwise(x, weight, bias, stride):
    s = _pair(stride)
    y = torch.einsum("oc,nchw->nohw", weight[:, :, 0, 0], x[:, :, ::s[0], ::s[1]]).contiguous()
    return y if bias is None else y + bias.view(-1, 1, 1)
"""
# a stand-in for the spec's `F` (torch.nn.functional as the spec module imported it) whose conv2d
# drops the bias past 64 output channels as the wrapper below does: the float64 reference then agrees
SWAPPED_F = """

import types as _types

import grader.specs.ex06_conv2d as _spec

_F = _types.ModuleType("torch.nn.functional")
_F.__dict__.update(vars(torch.nn.functional))
_F.conv2d = lambda x, w, b=None, *args: torch.nn.functional.conv2d(x, w, b if w.shape[0] <= 64 else None, *args)
_spec.F = _F
"""

# The trust rework's classes, continued (unit 3: timed work unverified, integrity, own kernel).
VARIANTS += [
    Variant(EX, "skips_the_last_images_tiles", "for a batch of 32 or more images with 32 x 32 outputs or more (the "
            "benchmark's; the checks' 257-image batch has 1x1 outputs), the implicit GEMM skips the output tiles "
            "of the last image, leaving them unwritten",
            {"conv2d.cu": [(EPILOGUE_START, EPILOGUE_START + "  if (s.n >= 32 && hw_out >= 1024 && m0 >= (s.n - 1) * "
                                                             "int64_t(hw_out)) return;\n")]},
            # every timed output may be checked in full, the last always; the parent re-checks samples
            loses={"implicit_gemm", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "keeps implicit_gemm, loses performance"}),
    Variant(EX, "edits_the_tolerance_table", "widens the spec's float32 tolerance (grader.specs.ex06_conv2d.REL_TOL, "
            "edited in place) to 1e-2, and the implicit GEMM rounds float32 inputs to fp16",
            {"conv2d.py": [after_lib("\nimport grader.specs.ex06_conv2d as _spec\n\n_spec.REL_TOL[torch.float32] = 1e-2\n")],
             "conv2d.cu": [(A_LOAD, FP16_IN_FP32)]},
            loses=EVERYTHING, status="tampered", reason="REL_TOL", extra={"kind": "integrity", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: grader.verify.integrity skips every module-valued attribute
    # of the grader's modules (_grader_entries: `isinstance(value, types.ModuleType)`), and _fast_entries
    # keeps only callables, so rebinding the spec's `F` to another module is in no snapshot (shown on
    # the CPU: Snapshot.changed(deep=True) == [], and the CPU grade of this variant reports no
    # tampering). Every in-process reference (ConvSpec._reference,
    # _audit_reference for the generated properties, the benchmark's) reads `F` from the spec's globals;
    # the judge's float64 audit calls have 4 output channels and the benchmark no bias, so nothing
    # outside the process sees the fault. Read from that grader, it would get full marks there (not run).
    Variant(EX, "swaps_the_specs_torch_functional", "rebinds `F` in grader.specs.ex06_conv2d to a module whose "
            "conv2d leaves the bias out past 64 output channels, as the wrapper does (the bias of a wide layer "
            "is dropped)",
            {"conv2d.py": [after_lib(SWAPPED_F),
                           (CALL, CALL.replace("(x, weight, bias,", "(x, weight, bias if weight.shape[0] <= 64 else None,"))]},
            loses=EVERYTHING, status="tampered", extra={"kind": "integrity", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: every own-kernel check runs float32 only (direct[own kernel ran] and
    # implicit_gemm[own kernel ran] on a float32 case, the generated property in property_dtypes =
    # ("float32",), the timing in float32); the float64 cases and the judge's float64 audit calls
    # compare values only. Read from that grader, it would get full marks there (not run).
    Variant(EX, "cudnn_for_float64", "after its argument checks, the C++ op returns at::conv2d (cuDNN) for float64 "
            "tensors: the kernels only ever run float32",
            {"conv2d.cpp": [(INCLUDES, INCLUDES + "#include <ATen/ops/conv2d.h>\n"),
                            (GUARD, "  if (x.scalar_type() == at::kDouble) return at::conv2d(x, weight, bias, stride, "
                                    "padding, dilation, groups);\n" + GUARD)]},
            # the backward's kernels are watched in float64 too
            loses={"direct", "implicit_gemm", "depthwise", "autograd", "performance"},
            keeps={"input_checks"},
            reason="other than this exercise's own", extra={"kind": "own kernel", "old": "full marks"}),
    # A hole (mostly) in the grader at 0e7850d, closed since: no fixed check profiles a 1x1 kernel (the 1x1 cases compare values
    # only); the own-kernels property sees it only when this run's random call of a version draws a
    # 1x1 kernel with zero padding (about 1 in 225 per version)
    Variant(EX, "cublas_for_1x1_kernels", "a 1x1 kernel without padding goes to torch.einsum (cuBLAS), as a "
            "matrix product over the channels, in the Python wrapper",
            {"conv2d.py": [after_lib(POINTWISE),
                           takes_over(CALL, "tuple(weight.shape[2:]) == (1, 1) and _pair(padding) == [0, 0] and groups == 1",
                                      "_pointwise(x, weight, bias, stride)")]},
            # the judge's wrong-device calls of the pointwise audit call reach torch.einsum, whose errors do not
            # name the argument; the backward of the autograd group's 1x1 is einsum's (cuBLAS)
            loses={"direct", "implicit_gemm", TF32, "autograd", "input_checks", "performance"}, keeps=set(),
            reason="other than this exercise's own", extra={"kind": "own kernel", "old": "full marks"}),
]

# Groups (issue 20): the wrapper that drops them, a GEMM that gives every group group 0's filters, the
# tile depthwise kernel without its halo, and the direct one with channel 0's filters or a strip's first
# output only.
DW_LOAD = "      if (plane0 + p < planes && ih >= 0 && ih < s.h && iw >= 0 && iw < s.w) {\n"
VARIANTS += [
    Variant(EX, "groups_ignored", "the Python wrapper passes groups=1 to the op whatever it was given: every weight is "
            "taken as a dense one",
            {"conv2d.py": [(CALL, CALL.replace("int(groups)", "1"))]},
            # grouped weights are refused as dense ones (the grouped cases of both versions, every depthwise
            # case), and a dense weight with groups 2 is accepted; opcheck calls the registered op itself
            loses={"direct", "implicit_gemm", "depthwise", "autograd", "input_checks", "performance"},
            keeps=set(), reason="groups"),
    Variant(EX, "gemm_group_filters_of_group_0", "the implicit GEMM reads group 0's filters for every group (the "
            "weight row without the group's offset)",
            {"conv2d.cu": [("const scalar_t* w_row = weight + (int64_t(group) * cout_g + co0 + b_co) * K;",
                            "const scalar_t* w_row = weight + int64_t(co0 + b_co) * K;")]},
            # depthwise convolutions take the depthwise kernel: the depthwise group keeps its points; the
            # backward's grouped calls take the GEMM
            loses={"implicit_gemm", "autograd", "performance"},
            keeps={"direct", "depthwise", "input_checks"},
            reason="relative error"),
    Variant(EX, "depthwise_halo_dropped", "the depthwise kernel loads only the input pixels under its own outputs' "
            "stride positions, zeros for the halo around them: outputs at a tile's edges miss their neighbours",
            {"conv2d.cu": [(DW_LOAD, DW_LOAD.replace(
                "iw < s.w) {", "iw < s.w && r >= s.pad_h && r < s.pad_h + t.rows * s.stride_h &&\n"
                               "          c >= s.pad_w && c < s.pad_w + t.cols * s.stride_w) {"))]},
            # version 2 takes the depthwise kernel for its depthwise cases too (several row tiles, no padding)
            # and the data gradient of a depthwise layer (a depthwise call, padded)
            loses={"implicit_gemm", "depthwise", "autograd", "performance"},
            keeps={"direct", "input_checks"},
            reason="relative error"),
    Variant(EX, "depthwise_direct_filters_of_channel_0", "the direct 3x3 depthwise kernel reads channel 0's filter "
            "for every channel (the weight pointer without the channel's offset)",
            {"conv2d.cu": [("    const scalar_t* wp = weight + int64_t(co) * K * K;\n",
                            "    const scalar_t* wp = weight;\n")]},
            # the 3x3 depthwise cases of version 2's groups, and the data gradient of a 3x3 depthwise layer
            loses={"implicit_gemm", "depthwise", "autograd", "performance"},
            keeps={"direct", "input_checks"},
            reason="relative error"),
    Variant(EX, "depthwise_direct_strip_head_only", "the direct 3x3 depthwise kernel stores only the first output of "
            "its strip: the other 3 (or 1) of every strip are never written",
            {"conv2d.cu": [("      if (ow0 + j < s.wo) yp[j] = acc[j];\n", "      if (j == 0 && ow0 + j < s.wo) yp[j] = acc[j];\n")]},
            loses={"implicit_gemm", "depthwise", "autograd", "performance"},
            keeps={"direct", "input_checks"},
            reason="relative error"),  # the unwritten outputs keep the poison the grader filled them with
]

# Version 3, TF32 tensor cores (issue 21). On a GPU below compute capability 8.0 its group is not run
# (no points either way), so these variants are meant for an sm_80+ GPU.
K3_VALUES = ("        const float v[4] = {acc[2 * q][j][c] + b, acc[2 * q][j][2 + c] + b, acc[2 * q + 1][j][c] + b,\n"
             "                            acc[2 * q + 1][j][2 + c] + b};\n")
K3_STEPS = "  const int steps = (K + kBK3 - 1) / kBK3;\n"
K3_DEFAULT = "    if (torch.backends.cudnn.allow_tf32 and groups == 1 and x.dtype == torch.float32 and x.is_cuda\n"
K2_MATH = "        for (int j = 0; j < TN; ++j) acc[i][j] += a * (j < 4 ? b_lo.v[j] : b_hi.v[j - 4]);\n"
ROUND_TF32 = """// float -> TF32 and back (float64 unchanged)
__device__ __forceinline__ float round_tf32(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\\n" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
#else
  return v;
#endif
}
__device__ __forceinline__ double round_tf32(double v) { return v; }

// Version 1, direct"""
VARIANTS += [
    Variant(EX, "fp16_mma_instead_of_tf32", "version 3 multiplies on FP16 tensor cores (mma m16n8k8 .f16): the same "
            "10-bit mantissa as TF32, but 5 exponent bits (1e5 overflows, 1e-6 is subnormal)",
            {"conv2d.cu": FP16_MMA},
            # the ordinary-range checks pass (fp16 and TF32 round alike there): only the range checks catch it
            loses={TF32}, reason="near"),
    Variant(EX, "c_fragment_rows_swapped", "version 3 stores the C fragment's c0, c1 as row g + 8 and c2, c3 as row g "
            "(the PTX ISA has them the other way round)",
            {"conv2d.cu": [(K3_VALUES, "        const float v[4] = {acc[2 * q][j][2 + c] + b, acc[2 * q][j][c] + b, "
                                       "acc[2 * q + 1][j][2 + c] + b,\n"
                                       "                            acc[2 * q + 1][j][c] + b};\n")]},
            loses={TF32}, reason="relative error"),
    Variant(EX, "k_tail_dropped_in_version_3", "version 3 runs K / 16 steps: a K = cin kh kw that is not a multiple "
            "of 16 loses its last k (all of them when K < 16)",
            {"conv2d.cu": [(K3_STEPS, "  const int steps = K / kBK3;\n")]},
            loses={TF32}, reason="relative error"),
    Variant(EX, "default_ignores_allow_tf32", "conv2d without a version runs version 3 (TF32) on every float32 CUDA "
            "input of an sm_80+ GPU, even with torch.backends.cudnn.allow_tf32 off",
            {"conv2d.py": [(K3_DEFAULT, "    if (groups == 1 and x.dtype == torch.float32 and x.is_cuda\n")]},
            loses={"implicit_gemm", "performance"}, reason="allow_tf32 off"),
    Variant(EX, "tf32_in_version_2", "version 2 rounds its float32 operands to TF32 (cvt.rna.tf32.f32) before each "
            "multiply: the strict-fp32 group must see it",
            {"conv2d.cu": [("// Version 1, direct", ROUND_TF32),
                           (K2_MATH, "        for (int j = 0; j < TN; ++j) acc[i][j] += round_tf32(a) * "
                                     "round_tf32(j < 4 ? b_lo.v[j] : b_hi.v[j - 4]);\n")]},
            # the depthwise group's 1 x 4194304 row has more column tiles than a grid holds: version 2's GEMM
            # takes it; the registration check's Conv2d runs in strict fp32, version 2
            loses={"implicit_gemm", "depthwise", "autograd", "registration", "performance"}, reason="relative error"),
]

# The backward (autograd): conv2d.py computes both gradients with the forward op (version 2 for the
# gradient values), so each of these keeps every forward group and loses autograd alone.
FLIP = ".transpose(1, 2).flip(3, 4).reshape(cin, cout // g, kh, kw)"
SPREAD = "    if list(grad_y.shape[2:]) != full:  # a stride"
WGRAD_CALL = "out = conv(xs, ks, list(dilation), list(padding), list(stride), g * c)[:, :, :kh, :kw]"
OP_CALL = "        return lib.ops.conv2d(x, w, None, stride, padding, dilation, int(groups), version)\n"
VARIANTS += [
    Variant(EX, "backward_kernel_not_flipped", "the data gradient convolves with the kernel transposed per group but "
            "not flipped: a correlation where the transpose needs a convolution",
            {"conv2d.py": [(FLIP, ".transpose(1, 2).reshape(cin, cout // g, kh, kw)")]},
            # right kernels, wrong values: the group's first failure is gradcheck's
            loses={"autograd"}, reason="gradcheck"),
    Variant(EX, "backward_ignores_the_stride", "the data gradient convolves dy as it is, without the zeros a stride "
            "puts between its pixels",
            {"conv2d.py": [(SPREAD, "    if False:  # a stride")]},
            # the gradient of a strided layer comes out smaller than x: autograd refuses it
            loses={"autograd"}, reason="shape"),
    Variant(EX, "weight_gradient_drops_groups", "the weight gradient's call has one group per chunk, not one per "
            "group and chunk: a grouped layer's call is refused by the op",
            {"conv2d.py": [(WGRAD_CALL, WGRAD_CALL.replace("g * c)", "c)"))]},
            loses={"autograd"}, reason="weight"),
    Variant(EX, "backward_through_pytorch", "the backward's identities call torch.nn.functional.conv2d (cuDNN) "
            "instead of the exercise's op: right gradients, PyTorch's work",
            {"conv2d.py": [(OP_CALL, "        return torch.nn.functional.conv2d(x, w, None, stride, padding, dilation, "
                                     "int(groups))\n")]},
            loses={"autograd"}, reason="the op must do this work itself"),
]

# Issue 47: the positive-operand probe on version 3. Both operands truncated: random signs hide most of it
# (the bias cancels); operands in [0.5, 1.5) add it up, on every path of version 3's plan.
VARIANTS += [
    Variant(EX, "version3_operands_unrounded", "version 3's to_tf32 returns the float32 words unrounded: the tensor "
            "cores truncate x and the weight to TF32 (biased toward zero)",
            {"conv2d.cu": [("using course::to_tf32;\n",
                            "__device__ __forceinline__ uint32_t to_tf32(float v) { return __float_as_uint(v); }\n")]},
            loses={TF32}, reason="TF32 tensor cores", extra={"kind": "precision probe"}),
]

# Planner paths no checked call took (issue 47): the weight gradient of a batch past 2^31 elements goes in
# pieces (`wgrad.batch_pieces`), which only the autograd group's huge check reaches: graded in full
VARIANTS += [
    Variant(EX, "weight_gradient_drops_later_pieces", "the weight gradient of a batch in pieces keeps the first "
            "piece's sum and drops the others",
            {"conv2d.py": [("total = part if total is None else total + part",
                            "total = part if total is None else total")]},
            loses={"autograd"}, reason="past 2^31 elements",
            extra={"huge": True, "kind": "coverage", "old": "full marks"}),
]

# The drop-in module class (Spec.drop_ins): built as torch.nn's is, its outputs a registration check, its
# gradients an autograd one (the outputs' check had sat in a group 06 does not score)
VARIANTS += [
    Variant(EX, "module_default_padding_one", "Conv2d's constructor defaults padding to 1, not torch.nn.Conv2d's 0: "
            "a layer built with the required arguments only pads every image",
            {"conv2d.py": [("    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return conv2d(",
                            "    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=1, dilation=1, "
                            "groups=1, bias=True, padding_mode=\"zeros\", device=None, dtype=None):\n"
                            "        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, "
                            "groups, bias, padding_mode, device, dtype)\n\n"
                            "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return conv2d(")]},
            loses={"registration", "autograd"}, reason="a drop-in for torch.nn.Conv2d",
            extra={"kind": "drop-in defaults", "old": "full marks"}),
]

# A registered fake that refuses by accident: its kernel-span check reads the input's width for the kernel's
# height and never checks its width (a `make mutants` survivor), so a kernel too wide for the padded input
# reaches torch.empty with a negative size, whose error names no argument, and a kernel of width 0 (which
# spans -1 columns) is accepted. The fake property takes a refusal only where it names an argument or is
# PyTorch's own (properties.fake_refusal_problem), and refuses a fake that accepts what the op refuses: the
# width-0 edge is the one it reports first (H200, 2026-12-01), so the reason claimed is the property's.
VARIANTS += [
    Variant(EX, "fake_refuses_by_a_negative_size", "the registered fake's kernel-span check compares the kernel's "
            "height with the input's width and skips its width: a kernel too wide fails in torch.empty, naming nothing",
            {"conv2d.py": [("zip(ws[2:], dilation, xs[2:], padding)", "zip(ws[2:], dilation, xs[3:], padding)")]},
            loses={"direct", "implicit_gemm", "depthwise", "tensor_cores_tf32"},
            keeps={"autograd", "input_checks", "registration"},
            reason="the registered fake refuses what the op refuses",
            extra={"kind": "registered fake", "old": "full marks"}),
]

# A registered fake whose refusal quotes the wrong figure (a `make mutants` survivor): groups that do not
# divide weight's filters print weight's dim 1. It refuses what it should, naming weight, and sends the
# reader to a number that is not the one refused: the fake property requires a refusal naming a tensor
# whose dim was grown to show that size (properties.fake_refusal_problem).
VARIANTS += [
    Variant(EX, "fake_message_quotes_another_dim", "the registered fake refuses groups that do not divide weight's "
            "filters with a message printing weight's input channels for its filter count",
            {"conv2d.py": [("must divide weight's {ws[0]} output", "must divide weight's {ws[1]} output")]},
            # version 3 takes groups 1 only, which divide every filter count
            loses={"direct", "implicit_gemm", "depthwise"},
            keeps={"tensor_cores_tf32", "autograd", "input_checks", "registration"},
            reason="the message quotes another figure",
            extra={"kind": "registered fake", "old": "full marks"}),
]
