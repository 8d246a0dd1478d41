from tests.known_wrong import SIDE_STREAM, Variant, after_lib, takes_over

EX = "08_conv_bn_relu_inference"
CU = "conv_bn_relu_inference.cu"
TF32 = "tensor_cores_tf32"  # version 2: graded on GPUs of compute capability 8.0 and newer only

VARIANTS = [
    Variant(EX, "bias_not_folded", "the conv bias is left out of the BatchNorm shift",
            {CU: [("shift = beta[m] + (b - running_mean[m]) * scale;", "shift = beta[m] - running_mean[m] * scale;")]},
            # both versions fold BatchNorm with fold_bn
            loses={"forward", TF32, "performance"}, reason="relative error"),
    Variant(EX, "eps_outside_sqrt", "1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps)",
            {CU: [("scale = gamma[m] / sqrt(running_var[m] + eps);", "scale = gamma[m] / (sqrt(running_var[m]) + eps);")]},
            loses={"forward", TF32, "performance"}, reason="relative error"),
    Variant(EX, "relu_missing", "the epilogue applies BatchNorm but not the ReLU",
            {CU: [("v[j] = relu(acc[i][j] * scale + shift);", "v[j] = acc[i][j] * scale + shift;")]},
            loses={"forward", "performance"}, reason="relative error"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls PyTorch's conv2d, batch_norm and relu",
            {"conv_bn_relu_inference.py": [
                ("    return lib.ops.conv_bn_relu_inference(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, float(eps),\n",
                 "    return torch.relu(torch.nn.functional.batch_norm(torch.nn.functional.conv2d(\n"
                 "        x, weight, bias, stride, padding, dilation), running_mean, running_var, bn_weight, bn_bias,\n"
                 "        False, 0.0, eps))\n"
                 "    return lib.ops.conv_bn_relu_inference(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, float(eps),\n")]},
            loses={"forward", TF32, "performance"}, keeps=set(), reason="other than this exercise's own"),
]

# the layer in PyTorch's ops (the fall-back the checks must see)
PYTORCH_LAYER = ("torch.relu(torch.nn.functional.batch_norm(torch.nn.functional.conv2d(x, weight, bias, stride, padding, "
                 "dilation), running_mean, running_var, bn_weight, bn_bias, {training}, {momentum}, eps))")
CALL = "    return lib.ops.conv_bn_relu_inference(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, float(eps),\n"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "pytorch_for_large_batches", "runs PyTorch's conv2d, batch_norm and relu for batches of 32 or more: "
            "the benchmark's, larger than any checked one",
            {"conv_bn_relu_inference.py": [takes_over(CALL, "x.shape[0] >= 32", PYTORCH_LAYER.format(training=False, momentum=0.0))]},
            loses={"forward", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "bn_weight_read_as_contiguous", "passes bn_weight to the kernel without .contiguous(): a strided "
            "view is read as if its elements were adjacent",
            {"conv_bn_relu_inference.cpp": [("const at::Tensor gamma = bn_weight.contiguous(), beta = bn_bias.contiguous();",
                                             "const at::Tensor gamma = bn_weight, beta = bn_bias.contiguous();")]},
            # the generated checks give every tensor argument non-contiguous, version 2's audit calls too
            loses={"forward", TF32, "performance"}, reason="strided", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "module_ignores_dilation", "ConvBNReLUInference's forward passes dilation 1 whatever the Conv2d's",
            {"conv_bn_relu_inference.py": [("bn.eps, c.stride, c.padding, c.dilation)", "bn.eps, c.stride, c.padding, 1)")]},
            loses={"forward", "performance"}, reason="dilation", extra={"kind": "coverage", "old": "full marks"}),
]

EPILOGUE = "v[j] = relu(acc[i][j] * scale + shift);"
FOLD_BIAS = "const T b = bias != nullptr ? bias[m] : T(0);"
# a torch-function mode entered for good at import: every vector norm reads 0, so every normwise
# relative error ||a - e|| / ||e|| the checks compute is 0
ZERO_NORMS = """

class _AllNormsZero(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.linalg.vector_norm:
            return torch.zeros((), dtype=torch.float64, device=args[0].device)
        return func(*args, **(kwargs or {}))


_AllNormsZero().__enter__()
"""
# runs the op on a stream of its own that does not wait for the current one (the timed call's GPU
# sleep), then has the current stream wait for it: the kernel runs while the timer's sleep does
AHEAD = """
_side = []


def _ahead(op):
    if not _side:
        _side.append(torch.cuda.Stream())
    current = torch.cuda.current_stream()
    with torch.cuda.stream(_side[0]):
        y = op()
    current.wait_stream(_side[0])
    y.record_stream(current)
    return y
"""

VARIANTS += [
    Variant(EX, "relu_missing_past_the_checked_images", "for batches of 32 or more (the benchmark's), images 16 and "
            "up miss the ReLU: past every checked batch entry (the largest checked batch has 16 images)",
            {CU: [(EPILOGUE, "v[j] = s.N >= 32 && (n0 + col_of(j)) / PQ >= 16 ? acc[i][j] * scale + shift : "
                             "relu(acc[i][j] * scale + shift);")]},
            # every timed output may be checked in full, the last always; the parent re-checks samples
            loses={"forward", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "keeps forward, loses performance"}),
    Variant(EX, "runs_ahead_of_the_timer", "for batches of 32 or more (the benchmark's), launches its kernel on a "
            "stream of its own that does not wait for the current one, then makes the current stream wait: the "
            "kernel runs during the timer's GPU sleep, before the start event",
            {"conv_bn_relu_inference.py": [after_lib(AHEAD), takes_over(
                CALL, "x.shape[0] >= 32", "_ahead(lambda: lib.ops.conv_bn_relu_inference(x, weight, bias, bn_weight, "
                "bn_bias, running_mean, running_var, float(eps), _pair(stride), _pair(padding), _pair(dilation), "
                "int(version)))")]},
            # the kernel runs during the timer's GPU sleep, before the current stream reaches the call:
            # the watched timed calls see it (speed.unordered_work), and forward, the group the timed
            # calls vouch for, loses. Its timed outputs were right in every checked call (H200,
            # 2026-12-02), and only the timing was refused, until the order itself was judged
            loses={"forward", "performance"}, reason="the benchmark's shape",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "zeroes_every_norm", "enters a torch-function mode at import that makes torch.linalg.vector_norm "
            "return 0 (every normwise relative error reads 0), and leaves the conv bias out in float32",
            {"conv_bn_relu_inference.py": [after_lib(ZERO_NORMS)],
             CU: [(FOLD_BIAS, "const T b = bias != nullptr && sizeof(T) == 8 ? bias[m] : T(0);")]},
            # the float64 calls the judge re-checks are right, and the benchmark has no bias
            loses={"forward", TF32, "input_checks", "performance"}, status="tampered", reason="torch mode stacks",
            extra={"kind": "integrity", "old": "full marks"}),
    Variant(EX, "pytorch_when_there_is_a_bias", "runs PyTorch's conv2d, batch_norm and relu when the conv has a "
            "bias (the exercise's kernel without one, as the one-kernel check's shape has)",
            {"conv_bn_relu_inference.py": [takes_over(CALL, "bias is not None",
                                                      PYTORCH_LAYER.format(training=False, momentum=0.0))]},
            # seen by the generated own-kernel check (its audit call has a bias; version 2's too). The judge's
            # calls with one tensor on the CPU reach PyTorch's ops, whose errors do not name the argument
            loses={"forward", TF32, "input_checks", "performance"}, reason="other than this exercise's own",
            extra={"kind": "own kernel", "old": "loses input_checks"}),
    # A hole in the grader at 0e7850d, closed since: no check observes the kernels of a 1x1 convolution. The one-kernel check and the
    # audit calls are 3x3, the timing too; "1x1-bias" is compared by value only; the generated
    # own-kernel check's one random shape is 1x1 in 1 of 25 runs (not with the suite's seed 1234)
    Variant(EX, "pytorch_for_1x1_kernels", "runs PyTorch's conv2d, batch_norm and relu for 1x1 kernels (a 1x1 "
            "convolution is a matrix product: left to PyTorch)",
            {"conv_bn_relu_inference.py": [takes_over(CALL, "tuple(weight.shape[2:]) == (1, 1)",
                                                      PYTORCH_LAYER.format(training=False, momentum=0.0))]},
            # the judge's wrong-device calls of the pointwise audit call reach PyTorch's ops, whose errors
            # do not name the argument; version 2 has a pointwise audit call too
            loses={"forward", TF32, "input_checks", "performance"}, reason="other than this exercise's own",
            extra={"kind": "own kernel", "old": "full marks"}),
]

# Version 2, TF32 tensor cores (issue 21). On a GPU below compute capability 8.0 its group is not run
# (no points either way), so these variants are meant for an sm_80+ GPU. Its GEMM engine (the mma, the
# K steps) is given, course/tf32_conv.cuh, no part of this file: FP16 operands and a dropped K tail are
# 06's variants, where the student writes that engine (tests/test_fused_tensor_cores.py models the
# tensor-core group's tolerances rejecting both).
TC_ROWS = ("        v[0] = relu(acc[2 * q][j][c] * scale + shift);\n"
           "        v[1] = relu(acc[2 * q][j][2 + c] * scale + shift);\n")
DEFAULT = "    if (torch.backends.cudnn.allow_tf32 and x.dtype == torch.float32 and x.is_cuda\n"
VARIANTS += [
    Variant(EX, "c_fragment_rows_swapped", "version 2's epilogue takes the C fragment's c0 (row g) and c2 (row g + 8) "
            "the other way round: pixels m and m + 1 of each group of 4 are swapped",
            {CU: [(TC_ROWS, TC_ROWS.replace("acc[2 * q][j][c] *", "acc[2 * q][j][@] *")
                   .replace("acc[2 * q][j][2 + c] *", "acc[2 * q][j][c] *").replace("@", "2 + c"))]},
            loses={TF32}, reason="relative error"),
    Variant(EX, "default_ignores_allow_tf32", "conv_bn_relu_inference without a version runs version 2 (TF32) on every "
            "float32 CUDA input of an sm_80+ GPU, even with torch.backends.cudnn.allow_tf32 off",
            {"conv_bn_relu_inference.py": [(DEFAULT, "    if (x.dtype == torch.float32 and x.is_cuda\n")]},
            # the module runs the default too (its check comes first)
            loses={"forward", "performance"}, reason="relative error"),
]

# Parameter values never graded (issue 47): each an edge of a declared domain (grader.verify.spec.Edge), which the
# generated checks reach in every dtype whatever the seed.
VARIANTS += [
    Variant(EX, "scale_loses_the_sign_of_gamma", "folds BatchNorm's scale as sqrt(gamma^2 / (var + eps)): right for "
            "every positive gamma",
            {CU: [("scale = gamma[m] / sqrt(running_var[m] + eps);",
                   "scale = sqrt(gamma[m] * gamma[m] / (running_var[m] + eps));")]},
            # both versions fold BatchNorm with fold_bn; the generated checks at bn_weight's edges (negative,
            # mixed signs) and from_modules' BatchNorm weights of both signs
            loses={"forward", TF32, "performance"}, reason="bn_weight", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "from_modules_accepts_padding_modes", "ConvBNReLUInference accepts a Conv2d whose padding_mode is not "
            "'zeros' and pads with zeros anyway",
            {"conv_bn_relu_inference.py": [('        if conv.groups != 1 or conv.padding_mode != "zeros":\n'
                                            '            raise ValueError("only groups=1 and padding_mode=\'zeros\' '
                                            'are supported")\n',
                                            '        if conv.groups != 1:\n            raise ValueError("only groups=1 '
                                            'is supported")\n')]},
            loses={"forward", "performance"}, reason="padding_mode", extra={"kind": "coverage", "old": "full marks"}),
]

# Layouts and state (issue: grader trust, point 5), each written against the grader before them.
SEEN = SIDE_STREAM + """

_seen = set()


def _seen_before(*tensors):
    key = tuple((t.data_ptr(), tuple(t.shape)) for t in tensors)
    seen = key in _seen
    _seen.add(key)
    return seen and tensors[0].is_cuda
"""
VARIANTS += [
    Variant(EX, "answers_seen_inputs_on_a_side_stream", "runs a call whose x and weight it has seen before (the same "
            "addresses and shapes: the timing's repeated inputs) on a stream of its own, which never waits for the "
            "caller's",
            {"conv_bn_relu_inference.py": [
                after_lib(SEEN),
                takes_over(CALL, "_seen_before(x, weight)",
                           "_on_a_side_stream(lambda: lib.ops.conv_bn_relu_inference(x, weight, bias, bn_weight, bn_bias, "
                           "running_mean, running_var, float(eps), _pair(stride), _pair(padding), _pair(dilation), "
                           "int(version)))")]},
            # which call of the state property reads early first is a race: no reason asserted
            loses={"forward", TF32, "performance"}, keeps={"input_checks"},
            extra={"kind": "own stream", "old": "full marks"}),
    Variant(EX, "batchnorm_lengths_unchecked", "check_param accepts a per-channel parameter longer than the channel "
            "count (size(0) >= channels): a too-long bn_weight, bn_bias, running_mean, running_var or bias is read "
            "in part, without an error",
            {"conv_bn_relu_inference.cpp": [("t.dim() == 1 && t.size(0) == channels", "t.dim() == 1 && t.size(0) >= channels")]},
            loses={"input_checks"}, reason="was accepted", extra={"kind": "input check", "old": "full marks"}),
]
VARIANTS += [
    Variant(EX, "dilation_second_value_unchecked", "the dilation check reads `dilation[0] >= 1 || dilation[1] >= 1` "
            "(one value of the pair checked): a dilation of [1, 0] or [1, -1] is convolved",
            {"conv_bn_relu_inference.cpp": [("dilation.size() == 2 && dilation[0] >= 1 && dilation[1] >= 1",
                                              "dilation.size() == 2 && dilation[0] >= 1 || dilation[1] >= 1")]},
            # the generated property: each component of each list argument alone at -1 and 0
            loses={"input_checks"}, reason="dilation", extra={"kind": "input check", "old": "full marks"}),
    Variant(EX, "padding_length_unchecked", "the padding check reads `padding.size() == 2 || ...`: a padding of "
            "three values is accepted (its first two used)",
            {"conv_bn_relu_inference.cpp": [("padding.size() == 2 && padding[0] >= 0 && padding[1] >= 0",
                                              "padding.size() == 2 || padding[0] >= 0 && padding[1] >= 0")]},
            loses={"input_checks"}, reason="padding", extra={"kind": "input check", "old": "full marks"}),
]

# The registered fake (torch.compile's shape function) without a check its op makes: the fake property
# tries each refusal probe, declared edges included, on the op and then on the fake.
VARIANTS += [
    Variant(EX, "fake_accepts_eps_zero", "the registered fake leaves out the op's `eps > 0` check: torch.compile "
            "traces eps = 0, which the op then refuses",
            {"conv_bn_relu_inference.py": [('    torch._check(eps > 0, lambda: f"eps must be positive, got {eps}")\n',
                                            "")]},
            loses={"forward", "tensor_cores_tf32", "performance"}, keeps={"input_checks"},
            reason="torch.compile would trace a wrong shape", extra={"kind": "registered fake", "old": "full marks"}),
]
