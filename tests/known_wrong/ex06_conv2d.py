from tests.known_wrong import Variant, memo_by_pointer, takes_over

EX = "06_conv2d"
PADDED_LOAD = "return (ih >= 0 && ih < h && iw >= 0 && iw < w) ? plane[ih * w + iw] : scalar_t(0);"
STRIDES = "  s.stride_h = static_cast<int>(st[0]);\n  s.stride_w = static_cast<int>(st[1]);\n"
OUT_SIZE = "out = (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;"
K_TILES = "const int k_tiles = (K + BK - 1) / BK;"
A_LOAD = "? load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w)"
EVERYTHING = {"direct", "implicit_gemm", "input_checks", "registration", "performance"}

VARIANTS = [
    Variant(EX, "padding_ignored_at_border", "taps in the padding read the nearest border pixel instead of 0",
            {"conv2d.cu": [(PADDED_LOAD, "return plane[min(max(ih, 0), h - 1) * w + min(max(iw, 0), w - 1)];")]},
            loses={"direct", "implicit_gemm", "performance"}, reason="relative error"),
    Variant(EX, "stride_wrong_axis", "the row stride is used for columns and the column stride for rows",
            {"conv2d.cpp": [(STRIDES, "  s.stride_h = static_cast<int>(st[1]);\n  s.stride_w = static_cast<int>(st[0]);\n")]},
            loses={"direct", "implicit_gemm", "performance"}, reason="stride (2, 1)"),
    Variant(EX, "output_size_off_by_one", "the output size misses the final kernel placement",
            {"conv2d.cpp": [(OUT_SIZE, "out = (in + 2 * pad - dil * (k - 1) - 1) / stride;")]},
            loses={"direct", "implicit_gemm", "registration", "performance"}, reason="shape"),
    Variant(EX, "k_tail_dropped", "the implicit GEMM skips the last K step when cin * kh * kw is not a multiple of 8",
            {"conv2d.cu": [(K_TILES, "const int k_tiles = K / BK;")]},
            loses={"implicit_gemm", "performance"}, reason="relative error"),
    Variant(EX, "fp16_operands", "the implicit GEMM rounds the input to a 10-bit mantissa (like TF32 or fp16)",
            {"conv2d.cu": [(A_LOAD, "? static_cast<scalar_t>(static_cast<float>(c10::Half(static_cast<float>("
                                    "load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w)))))")]},
            loses={"implicit_gemm", "performance"}, reason="relative error"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.nn.functional.conv2d (cuDNN)",
            {"conv2d.py": [("return lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(version))",
                            "return torch.nn.functional.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation))")]},
            loses={"direct", "implicit_gemm", "input_checks", "performance"}, reason="other than this exercise's own"),
    Variant(EX, "bias_shape_unchecked", "a bias with more values than output channels is accepted",
            {"conv2d.cpp": [("b.dim() == 1 && b.size(0) == weight.size(0)", "b.dim() == 1 && b.size(0) >= weight.size(0)")]},
            loses={"input_checks"}, reason="bias"),
    Variant(EX, "gemm_on_default_stream", "the implicit-GEMM kernel is launched on the legacy default stream",
            {"conv2d.cu": [("conv2d_kernel2<scalar_t, BM><<<grid, BM, 0, stream>>>(", "conv2d_kernel2<scalar_t, BM><<<grid, BM>>>(")]},
            loses={"implicit_gemm", "performance"}, keeps={"direct", "input_checks"}, reason="torch.cuda.stream"),
]

CALL = "    return lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(version))\n"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "cudnn_for_large_batches", "calls torch.nn.functional.conv2d (cuDNN) for batches of 32 or more: the "
            "benchmark's, larger than any checked one",
            {"conv2d.py": [takes_over(CALL, "x.shape[0] >= 32",
                                      "torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation)")]},
            loses={"implicit_gemm", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "memo_by_pointer", "for batches of 32 or more, keeps each result by its inputs' addresses and "
            "returns a copy of it when called on the same tensors again",
            {"conv2d.py": memo_by_pointer(
                CALL, "x.shape[0] >= 32", "(x.data_ptr(), weight.data_ptr(), tuple(x.shape), tuple(weight.shape), version)",
                "lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(version))")},
            loses={"implicit_gemm", "performance"}, reason="timed",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "output_layout_follows_the_input", "returns its (right) output in the input's memory format "
            "(channels_last in, channels_last out), while its registered fake says contiguous",
            {"conv2d.cpp": [("  return y;\n", "  return y.contiguous(x.suggest_memory_format());\n")]},
            loses={"direct", "implicit_gemm", "performance"}, keeps={"input_checks", "registration"},
            reason="registered fake", extra={"kind": "coverage", "old": "full marks"}),
]
