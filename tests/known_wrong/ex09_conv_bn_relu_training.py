from tests.known_wrong import Variant, takes_over
from tests.known_wrong.ex08_conv_bn_relu_inference import PYTORCH_LAYER

EX = "09_conv_bn_relu_training"
CU = "conv_bn_relu_training.cu"

VARIANTS = [
    Variant(EX, "running_stats_in_training", "training normalises with the running statistics, not the batch's",
            {CU: [("const double invstd = 1.0 / sqrt(var + eps);",
                   "mean = rm;\n      const double invstd = 1.0 / sqrt(rv + eps);")]},
            loses={"forward", "backward", "autograd", "module", "performance"}, reason="relative error"),
    Variant(EX, "biased_running_var", "the running variance is updated with the biased batch variance",
            {CU: [("f * (m2 / (n - 1))", "f * (m2 / n)")]},
            loses={"running_stats"}, reason="running_var"),
    Variant(EX, "relu_mask_from_gradient", "the ReLU mask is taken from the gradient's sign, not the forward output",
            {CU: [("return y > T(0) ? dy : T(0);", "return dy > T(0) ? dy : T(0);")]},
            loses={"backward", "autograd", "module", "performance"}, reason="relative error"),
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
            loses={"forward", "running_stats", "backward", "autograd", "module", "input_checks", "performance"},
            reason="other than this exercise's own"),
]

CALL = "    return ConvBNReLUFunction.apply(x, weight, bias, bn_weight, bn_bias, running_mean, running_var,\n"
TILE_M2 = ("      for (int j = 0; j < 8; ++j) m2 += valid[j] ? (v[j] - mean) * (v[j] - mean) : T(0);\n#pragma unroll\n"
           "      for (int off = 8; off > 0; off /= 2) m2 += __shfl_xor_sync(0xffffffffu, m2, off);\n")

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
            loses={"forward", "performance"}, reason="stable statistics", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "backward_on_a_side_stream", "the backward's kernels run on a stream of the pool, not the current one",
            {"conv_bn_relu_training.cpp": [("scratch.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream());",
                                            "scratch.mutable_data_ptr<scalar_t>(), c10::cuda::getStreamFromPool());")]},
            # it races with the producers of its inputs: which check fails first varies (no reason
            # asserted), and the module's training curve may go too
            loses={"backward", "autograd", "performance"}, keeps={"forward", "running_stats", "input_checks"},
            extra={"kind": "coverage", "old": "may race"}),
]
