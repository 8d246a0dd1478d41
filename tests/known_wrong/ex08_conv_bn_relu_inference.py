from tests.known_wrong import Variant, takes_over

EX = "08_conv_bn_relu_inference"
CU = "conv_bn_relu_inference.cu"

VARIANTS = [
    Variant(EX, "bias_not_folded", "the conv bias is left out of the BatchNorm shift",
            {CU: [("shift = beta[m] + (b - running_mean[m]) * scale;", "shift = beta[m] - running_mean[m] * scale;")]},
            loses={"forward", "performance"}, reason="relative error"),
    Variant(EX, "eps_outside_sqrt", "1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps)",
            {CU: [("scale = gamma[m] / sqrt(running_var[m] + eps);", "scale = gamma[m] / (sqrt(running_var[m]) + eps);")]},
            loses={"forward", "performance"}, reason="relative error"),
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
            loses={"forward", "performance"}, keeps=set(), reason="other than this exercise's own"),
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
            loses={"forward", "performance"}, reason="strided", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "module_ignores_dilation", "ConvBNReLUInference's forward passes dilation 1 whatever the Conv2d's",
            {"conv_bn_relu_inference.py": [("bn.eps, c.stride, c.padding, c.dilation)", "bn.eps, c.stride, c.padding, 1)")]},
            loses={"forward", "performance"}, reason="dilation", extra={"kind": "coverage", "old": "full marks"}),
]
