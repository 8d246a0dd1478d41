from tests.known_wrong import Variant

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
