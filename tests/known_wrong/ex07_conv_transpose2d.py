from tests.known_wrong import IN_TIMING, Variant, takes_over

EX = "07_conv_transpose2d"
STRIDES = "  s.stride_h = static_cast<int>(st[0]);\n  s.stride_w = static_cast<int>(st[1]);\n"
OUT_SIZE = "out = (in - 1) * stride - 2 * pad + dil * (k - 1) + output_pad + 1;"

VARIANTS = [
    Variant(EX, "padding_ignored_at_border", "a tap past the input's last row or column reads the border pixel instead of 0",
            {"conv_transpose2d.cu": [("return i < in_size ? i : -1;", "return i < in_size ? i : in_size - 1;")]},
            loses={"forward", "performance"}, reason="relative error"),
    Variant(EX, "stride_wrong_axis", "the row stride is used for columns and the column stride for rows",
            {"conv_transpose2d.cpp": [(STRIDES, "  s.stride_h = static_cast<int>(st[1]);\n  s.stride_w = static_cast<int>(st[0]);\n")]},
            loses={"forward", "performance"}, reason="stride (2, 1)"),
    Variant(EX, "output_size_off_by_one", "the output size misses the last position",
            {"conv_transpose2d.cpp": [(OUT_SIZE, "out = (in - 1) * stride - 2 * pad + dil * (k - 1) + output_pad;")]},
            loses={"forward", "registration", "performance"}, reason="shape"),
    Variant(EX, "output_padding_ignored", "the output size leaves out output_padding",
            {"conv_transpose2d.cpp": [(OUT_SIZE, "out = (in - 1) * stride - 2 * pad + dil * (k - 1) + 1;")]},
            loses={"forward", "registration", "performance"}, reason="output_padding"),
    Variant(EX, "dilation_ignored", "the kernel taps are taken as adjacent whatever the dilation",
            {"conv_transpose2d.cu": [("source_index(oh, kh * s.dil_h,", "source_index(oh, kh,"),
                                     ("source_index(ow, kw * s.dil_w,", "source_index(ow, kw,")]},
            loses={"forward", "performance"}, reason="dilation"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.nn.functional.conv_transpose2d (cuDNN)",
            {"conv_transpose2d.py": [("return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),\n                                    _pair(dilation))",
                                      "return torch.nn.functional.conv_transpose2d(x, weight, bias, stride, padding, output_padding, 1, dilation)")]},
            loses={"forward", "input_checks", "performance"}, reason="other than this exercise's own"),
    Variant(EX, "bias_shape_unchecked", "a bias with more values than output channels is accepted",
            {"conv_transpose2d.cpp": [("b.dim() == 1 && b.size(0) == weight.size(1)", "b.dim() == 1 && b.size(0) >= weight.size(1)")]},
            loses={"input_checks"}, reason="bias"),
]

CALL = "    return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),\n"

# The trust rework's classes (issue: grader trust), written against the grader before it.
VARIANTS += [
    Variant(EX, "cudnn_when_timed", "calls torch.nn.functional.conv_transpose2d when its call stack shows the timer",
            {"conv_transpose2d.py": [takes_over(CALL, IN_TIMING, "torch.nn.functional.conv_transpose2d(x, weight, bias, "
                                                                 "stride, padding, output_padding, 1, dilation)")]},
            loses={"forward", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
]
