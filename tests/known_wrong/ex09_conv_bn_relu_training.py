from tests.known_wrong import FP16_MMA, Variant, after_lib, takes_over
from tests.known_wrong.ex08_conv_bn_relu_inference import PYTORCH_LAYER

EX = "09_conv_bn_relu_training"
CU = "conv_bn_relu_training.cu"
TF32 = "tensor_cores_tf32"  # version 2: graded on GPUs of compute capability 8.0 and newer only

VARIANTS = [
    Variant(EX, "running_stats_in_training", "training normalises with the running statistics, not the batch's",
            {CU: [("const double invstd = 1.0 / sqrt(var + eps);", "const double invstd = 1.0 / sqrt(rv + eps);"),
                  ("save_mean[c] = T(mean);", "save_mean[c] = T(rm);"),
                  ("shift[c] = T(double(beta[c]) - mean * double(gamma[c]) * invstd);",
                   "shift[c] = T(double(beta[c]) - rm * double(gamma[c]) * invstd);")]},
            # bn_stats_finalize_kernel serves both versions
            loses={"forward", "backward", "autograd", "module", TF32, "performance"}, reason="relative error"),
    Variant(EX, "biased_running_var", "the running variance is updated with the biased batch variance",
            {CU: [("f * (m2 / (n - 1))", "f * (m2 / n)")]},
            # the timed step's running statistics are verified too: a wrong one fails the timing; version 2's
            # forward checks compare the running statistics too; and the module's, built by from_modules
            loses={"running_stats", "module", TF32, "performance"}, reason="running_var"),
    Variant(EX, "relu_mask_from_gradient", "the ReLU mask is taken from the gradient's sign, not the forward output",
            {CU: [("return y > T(0) ? dy : T(0);", "return dy > T(0) ? dy : T(0);")]},
            loses={"backward", "autograd", "module", TF32, "performance"}, reason="relative error"),
    Variant(EX, "grad_weight_missing_bn_scale", "grad_weight forgets BatchNorm's per-channel scale gamma * invstd",
            {CU: [("o[k * CRS + col] = acc[i][j] * bn_scale;", "o[k * CRS + col] = acc[i][j];")]},
            loses={"backward", "autograd", "module", "performance"}, reason="grad_weight"),
    Variant(EX, "pytorch_fallback", "the functional API calls PyTorch's conv2d, batch_norm and relu",
            {"conv_bn_relu_training.py": [
                ("    return ConvBNReLUFunction.apply(x, weight, bias, bn_weight, bn_bias, running_mean, running_var,\n",
                 "    return torch.relu(torch.nn.functional.batch_norm(torch.nn.functional.conv2d(\n"
                 "        x, weight, bias, stride, padding, dilation), running_mean, running_var, bn_weight, bn_bias,\n"
                 "        training, momentum, eps))\n"
                 "    return ConvBNReLUFunction.apply(x, weight, bias, bn_weight, bn_bias, running_mean, running_var,\n")]},
            # as measured on the H100: F.batch_norm leaves num_batches_tracked alone (running_stats,
            # module), cuDNN's batch-norm backward is not bit-reproducible (gradcheck's reentrancy test),
            # and PyTorch's ops accept CPU tensors (input_checks): nothing of the exercise is earned
            loses={"forward", "running_stats", "backward", "autograd", "module", TF32, "input_checks", "performance"},
            reason="other than this exercise's own"),
]

CALL = "    return ConvBNReLUFunction.apply(x, weight, bias, bn_weight, bn_bias, running_mean, running_var,\n"
TILE_M2 = ("      for (int j = 0; j < 8; ++j) m2 += valid[j] ? (v[j] - mean) * (v[j] - mean) : T(0);\n#pragma unroll\n"
           "      for (int off = 8; off > 0; off /= 2) m2 += __shfl_xor_sync(0xffffffffu, m2, off);\n")

# nn.BatchNorm2d's factor: in training it counts the batch, and momentum=None is the running average
# over the batches counted (1 / num_batches_tracked); in eval nothing is updated
MODULE_MOMENTUM = ("((num_batches_tracked.add_(1), 1.0 / float(num_batches_tracked) if momentum is None else momentum)[1] "
                   "if training else (0.0 if momentum is None else momentum))")
# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "pytorch_for_large_batches", "runs PyTorch's conv2d, batch_norm and relu for batches of 32 or more "
            "(the benchmark's, larger than any checked one), so autograd runs PyTorch's backward too",
            {"conv_bn_relu_training.py": [takes_over(CALL, "x.shape[0] >= 32",
                                                     PYTORCH_LAYER.format(training="training", momentum="momentum"))]},
            loses={"forward", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "variance_from_sums_of_squares", "each tile's M2 is sum(v^2) - n mean^2 in float32: right for "
            "channels centred near 0, wrong where the mean is large against the spread",
            {CU: [(TILE_M2, TILE_M2.replace("(v[j] - mean) * (v[j] - mean)", "v[j] * v[j]")
                   + "      m2 -= T(nvalid) * mean * mean;\n")]},
            # the running variance too: running_stats meets channels whose mean is 1000 times their spread
            loses={"forward", "running_stats", "performance"}, reason="stable statistics",
            extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "backward_on_a_side_stream", "the backward's kernels run on a stream of the pool, not the current one",
            {"conv_bn_relu_training.cpp": [("scratch.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream());",
                                            "scratch.mutable_data_ptr<scalar_t>(), c10::cuda::getStreamFromPool());")]},
            # it races with the producers of its inputs: which check fails first varies (no reason
            # asserted), and the module's training curve may go too
            loses={"backward", "autograd", "performance"}, keeps={"forward", "running_stats", "input_checks"},
            extra={"kind": "coverage", "old": "may race"}),
]

RUNNING_UPDATE = ("      running_mean[c] = T((1 - f) * rm + f * mean);\n"
                  "      running_var[c] = T((1 - f) * rv + f * (m2 / (n - 1)));\n")
# replaces torch.nn.functional.batch_norm (which nn.BatchNorm2d, and so every reference Sequential,
# calls) by one that updates running_var with the biased batch variance, as the kernel below does
BIASED_REFERENCE = """
import torch.nn.functional as _F

_batch_norm = _F.batch_norm


def _biased_batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                       eps=1e-5):
    out = _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if training and running_var is not None:
        n = input.numel() // input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        with torch.no_grad():  # (1 - m) rv + m var n / (n - 1) becomes (1 - m) rv + m var
            running_var.sub_(momentum * input.detach().var(dims, unbiased=False) / (n - 1))
    return out


_F.batch_norm = _biased_batch_norm
"""

VARIANTS += [
    # A hole in the grader at 0e7850d, closed since: the timed step returns y and the four gradients; nothing reads the running
    # statistics it updated, and no checked training call has more than 25088 values per channel
    Variant(EX, "running_stats_frozen_for_large_batches", "with more than 2^16 values per channel (the benchmark's "
            "32 x 56 x 56; no checked call has more than 8 x 56 x 56), the running statistics are left as they "
            "were (num_batches_tracked still counts the batch)",
            {CU: [(RUNNING_UPDATE, "      if (count <= (1 << 16)) {\n" + RUNNING_UPDATE + "      }\n")]},
            loses={"running_stats", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "patches_the_batch_norm_reference", "replaces torch.nn.functional.batch_norm, the references' "
            "BatchNorm, by one that updates running_var with the biased variance, as its own kernel wrongly does",
            {"conv_bn_relu_training.py": [after_lib(BIASED_REFERENCE)],
             CU: [("f * (m2 / (n - 1))", "f * (m2 / n)")]},
            # the judge re-checks outputs only, never the running statistics an op updates in place
            loses={"forward", "running_stats", "backward", "autograd", "module", TF32, "input_checks", "performance"},
            status="tampered", reason="torch.nn.functional.batch_norm", extra={"kind": "integrity", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: only running_stats[momentum=None] calls with momentum None, and it compares
    # values; the own-kernel checks, the judge's and the generated checks' calls all pass 0.1
    Variant(EX, "pytorch_when_momentum_is_none", "for momentum=None (a cumulative average), counts the batch "
            "itself and runs PyTorch's conv2d, batch_norm (with momentum 1 / num_batches_tracked) and relu",
            {"conv_bn_relu_training.py": [takes_over(CALL, "momentum is None and training", PYTORCH_LAYER.format(
                training="True", momentum="1.0 / float(num_batches_tracked.add_(1))"))]},
            # the generated own-kernel check runs each fixed call at every scalar value, momentum None too
            # (version 2's call of the function too)
            loses={"forward", TF32, "performance"}, keeps={"running_stats", "backward", "input_checks"},
            reason="other than this exercise's own", extra={"kind": "own kernel", "old": "full marks"}),
    Variant(EX, "eval_returns_running_mean_as_save_mean", "in eval, the forward op returns running_mean itself "
            "as save_mean (the same values, no copy): its output aliases an input, and the backward's saved mean "
            "changes when a later training step updates the running mean",
            {"conv_bn_relu_training.cpp": [("  return {y, z, save_mean, save_invstd};",
                                            "  return {y, z, training ? save_mean : running_mean, save_invstd};")]},
            # the generated check that holds two results: the eval op's result shares memory with an input
            # (both versions' eval calls)
            loses={"forward", TF32, "performance"}, reason="shares memory", extra={"kind": "aliasing", "old": "full marks"}),
    Variant(EX, "pytorch_for_dilated_convolutions", "the functional API runs PyTorch's conv2d, batch_norm and relu "
            "when the dilation is not 1 (the own-kernel checks' shapes have none)",
            # it counts the batch and reads momentum=None as nn.BatchNorm2d does (F.batch_norm does neither),
            # so its running statistics are right; the state group's refused edge (one value per channel in
            # training) meets F.batch_norm's error, which does not name `x` (H200, 2026-11-30)
            {"conv_bn_relu_training.py": [takes_over(CALL, "_pair(dilation) != [1, 1]", PYTORCH_LAYER.format(
                training="training", momentum=MODULE_MOMENTUM))]},
            # seen by the generated own-kernel check of conv_bn_relu (its audit call is dilated, version 2's
            # too); the judge's calls with one tensor on the CPU reach PyTorch's ops, whose errors do not
            # name the argument. autograd loses to the same watch (gradcheck's small strided case is dilated)
            loses={"forward", "running_stats", "autograd", TF32, "input_checks", "performance"},
            keeps={"backward", "module"}, reason="other than this exercise's own",
            extra={"kind": "own kernel", "old": "loses input_checks"}),
]

# Version 2, TF32 tensor cores (issue 21). On a GPU below compute capability 8.0 its group is not run
# (no points either way), so these variants are meant for an sm_80+ GPU. The forward's GEMM engine (its
# mma, its K steps) is given, course/tf32_conv.cuh, no part of this file: FP16 operands and a dropped K
# tail there are 06's variants, where the student writes that engine; FP16 in this file's backward GEMMs
# is backward_gemm_through_fp16 (below).
Z_ROWS = "acc[2 * q][j][c] + b, acc[2 * q][j][2 + c] + b,"
B1 = "b1 = to_tf32(sm.b[buf][t + 4][col]);"
BACKWARD_VERSION = ("            grad_y.contiguous(), x, weight, z, y, bn_weight, mean, invstd, training, stride, padding, "
                    "dilation,\n            version)")
DEFAULT = "    if (torch.backends.cudnn.allow_tf32 and x.dtype == torch.float32 and x.is_cuda\n"
VARIANTS += [
    Variant(EX, "c_fragment_rows_swapped_in_z", "version 2's training epilogue takes the C fragment's c0 (row g) and "
            "c2 (row g + 8) the other way round: pixels m and m + 1 of each group of 4 of z are swapped",
            {CU: [(Z_ROWS, "acc[2 * q][j][2 + c] + b, acc[2 * q][j][c] + b,", 2)]},
            loses={TF32}, reason="relative error"),
    Variant(EX, "backward_b_fragment_wrong", "version 2's backward GEMMs read the B fragment's b1 at k t instead of "
            "t + 4: half of each slice's k meet the wrong column values",
            {CU: [(B1, "b1 = to_tf32(sm.b[buf][t][col]);")]},
            loses={TF32}, reason="relative error"),
    Variant(EX, "backward_ignores_the_version", "the autograd Function's backward calls the backward op with version "
            "1 whatever the forward ran: version 2's backward runs in strict fp32",
            {"conv_bn_relu_training.py": [(BACKWARD_VERSION, BACKWARD_VERSION.replace("version)", "1)"))]},
            # right values (strict is within TF32's bounds); the own-kernel check sees the version-1 kernels
            loses={TF32}, reason="other than this exercise's own"),
    Variant(EX, "default_ignores_allow_tf32", "conv_bn_relu without a version runs version 2 (TF32) on every float32 "
            "CUDA input of an sm_80+ GPU, even with torch.backends.cudnn.allow_tf32 off",
            {"conv_bn_relu_training.py": [(DEFAULT, "    if (x.dtype == torch.float32 and x.is_cuda\n")]},
            # the module runs the default: its checks and the version=None check fail
            loses={"forward", "module", "performance"}, reason="relative error"),
]

# Version 2's own arithmetic beyond the given engine: the training epilogue's per-tile statistics, and the
# filter flip that turns the unit-stride data gradient into the forward engine's convolution (the GPU checks
# of the TF32 group are what hold them: no CPU model of these kernels is kept).
VARIANTS += [
    Variant(EX, "tile_mean_over_a_full_tile", "version 2's training epilogue divides each tile's channel sums by "
            "the tile's 128 pixels even where the last tile holds fewer: the batch mean of a batch whose N*P*Q is "
            "not a multiple of 128 is too small",
            {CU: [("mean[j][c] = (red[0][ch] + red[1][ch]) / float(nvalid);",
                   "mean[j][c] = (red[0][ch] + red[1][ch]) / float(kTcPixels);")]},
            loses={TF32}, reason="relative error"),
    Variant(EX, "dgrad_filter_not_flipped", "version 2's unit-stride data gradient runs the forward engine on the "
            "filter unflipped (tap r where R - 1 - r belongs): the gradient of every input pixel is wrong "
            "but for 1 x 1 filters",
            {CU: [("(s.R - 1 - r)) * s.S + (s.S - 1 - ss)]", "r) * s.S + ss]")]},
            loses={TF32}, reason="relative error"),
]

# Issue 47: the precision probes on version 2's backward GEMMs (grad_w's, and grad_x's at stride 2), whose
# forward stays right: the probes run on the backward too.
BWD_MMA = "      for (int i = 0; i < 2; ++i) mma_tf32(acc[i][j], a[i], b0, b1);\n"
BWD_A = ("      a[i][0] = to_tf32(sm.a[buf][t][row0]), a[i][1] = to_tf32(sm.a[buf][t][row1]);\n"
         "      a[i][2] = to_tf32(sm.a[buf][t + 4][row0]), a[i][3] = to_tf32(sm.a[buf][t + 4][row1]);\n")
BWD_B = "      const uint32_t b0 = to_tf32(sm.b[buf][t][col]), b1 = to_tf32(sm.b[buf][t + 4][col]);\n"
VARIANTS += [
    Variant(EX, "backward_gemm_through_fp16", "version 2's backward GEMMs (grad_w, and grad_x at strides other than "
            "1) multiply on FP16 tensor cores: grad_y near 1e5 overflows, near 1e-6 is subnormal",
            {CU: [FP16_MMA[0], ("using course::to_tf32;\n",
                                "using course::to_tf32;\n" + FP16_MMA[1][1].replace("void mma_tf32(", "void mma_fp16(")),
                  (BWD_MMA, BWD_MMA.replace("mma_tf32(", "mma_fp16("))]},
            loses={TF32}, reason="values near", extra={"kind": "precision probe"}),
    Variant(EX, "backward_gemm_unrounded", "version 2's backward GEMMs take their operands unrounded: the tensor "
            "cores truncate them to TF32 (biased toward zero)",
            {CU: [(BWD_A, BWD_A.replace("to_tf32(", "__float_as_uint(")),
                  (BWD_B, BWD_B.replace("to_tf32(", "__float_as_uint("))]},
            loses={TF32}, reason="TF32 tensor cores", extra={"kind": "precision probe"}),
]

# Parameter values never graded (issue 47): each an edge of a declared domain (grader.verify.spec.Edge), which the
# generated checks reach in every dtype whatever the seed.
VARIANTS += [
    Variant(EX, "momentum_zero_as_cumulative_average", "momentum 0.0 is taken as None (a cumulative average, "
            "1 / batches seen) instead of leaving the running statistics as they were",
            {CU: [("factor = momentum < 0 ? 1.0 / double(batches) : momentum;",
                   "factor = momentum <= 0 ? 1.0 / double(batches) : momentum;")]},
            # the generated check of the state updated at momentum's edge 0.0, running_stats[momentum=0.0], and
            # from_modules' momentum 0.0 in training
            loses={"running_stats", "module"}, reason="momentum=0.0",
            extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "from_modules_drops_momentum", "from_modules builds the fused module with the default momentum 0.1, "
            "not the BatchNorm2d's",
            {"conv_bn_relu_training.py": [("conv.bias is not None, bn.eps, bn.momentum, device=p.device",
                                           "conv.bias is not None, bn.eps, device=p.device")]},
            loses={"module"}, reason="momentum=", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "from_modules_accepts_padding_modes", "from_modules accepts a Conv2d whose padding_mode is not "
            "'zeros' and pads with zeros anyway",
            {"conv_bn_relu_training.py": [('        if conv.groups != 1 or conv.padding_mode != "zeros":\n'
                                           '            raise ValueError("only groups=1 and padding_mode=\'zeros\' are '
                                           'supported")\n        if not (bn.affine',
                                           '        if conv.groups != 1:\n            raise ValueError("only groups=1 '
                                           'is supported")\n        if not (bn.affine')]},
            loses={"module"}, reason="padding_mode", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "z_kept_only_for_gamma", "keeps z for the backward only when bn_weight needs a gradient (z feeds "
            "grad_gamma), though every gradient needs it: with bn_weight frozen the backward fails",
            {"conv_bn_relu_training.py": [("keep_z = any(ctx.needs_input_grad[:5])", "keep_z = ctx.needs_input_grad[3]")]},
            # the generated gradient check with each differentiable argument frozen in turn
            loses={"autograd"}, reason="requires_grad=False", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "z_kept_only_for_the_convolution", "keeps z for the backward only when x or the weight needs a "
            "gradient, though grad_gamma reads it too: training only BatchNorm's affine parameters, in eval, "
            "the backward fails",
            {"conv_bn_relu_training.py": [("keep_z = any(ctx.needs_input_grad[:5])",
                                           "keep_z = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]")]},
            # the generated gradient check with each differentiable argument alone differentiated, in eval
            loses={"autograd"}, reason="alone differentiated", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "scale_loses_the_sign_of_gamma", "BatchNorm's per-channel scale is |gamma| * invstd (the shift keeps "
            "gamma's sign): right for every positive gamma",
            {CU: [("scale[c] = T(double(gamma[c]) * invstd);", "scale[c] = T(fabs(double(gamma[c])) * invstd);")]},
            # the forward of both versions (bn_stats_finalize_kernel serves both), the gradients through it, and
            # the module's (BatchNorm weights of both signs)
            loses={"forward", "autograd", "module", TF32, "performance"}, reason="bn_weight",
            extra={"kind": "coverage", "old": "full marks"}),
]
VARIANTS += [
    Variant(EX, "refuses_a_1x1_output", "the size check wants the padded input larger than the dilated kernel (`>` "
            "for `>=`): an input the kernel just fits, whose output is 1 x 1, is refused as too small",
            {"conv_bn_relu_training.cpp": [("x.size(2) + 2 * padding[0] >= dilation[0]",
                                             "x.size(2) + 2 * padding[0] > dilation[0]")]},
            # the declared edge of x at its smallest size, in every call that declares the padding's edges
            loses={"forward", "running_stats", "autograd", TF32}, reason="smallest input",
            extra={"kind": "coverage", "old": "full marks"}),
]
