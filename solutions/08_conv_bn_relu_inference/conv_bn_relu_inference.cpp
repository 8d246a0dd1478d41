// Exercise 08: the op's C++ front end. Input checks, output allocation, dtype dispatch, stream, registration.
#include <optional>
#include <string>

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "conv_bn_relu_inference.h"

namespace {

using course::str;  // messages pass only strings to TORCH_CHECK (see course/ops.h)
using course::device_str;
using course::dtype_str;

constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;  // the kernels use 32-bit offsets

void check_param(const at::Tensor& t, const char* name, const at::Tensor& x, int64_t channels) {
  TORCH_CHECK(t.device() == x.device(), name, " must be on the same device as x (", device_str(x), "), but is on ",
              device_str(t));
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), name, " must have the same dtype as x (", dtype_str(x),
              "), but has ", dtype_str(t));
  TORCH_CHECK(t.dim() == 1 && t.size(0) == channels, name, " must have shape [", str(channels), "] (one value per output ",
              "channel), but has shape ", course::shape_of(t));
}

// Validates the convolution's operands and returns its geometry.
ConvShape conv_shape(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation) {
  // BEGIN SOLUTION
  // GOAL: reject, naming the argument, every x, weight, stride, padding and dilation that the README's
  // GOAL: Interface lists as an error; return the convolution's ConvShape.
  // TODO: reject, with TORCH_CHECK messages naming the argument: x not a 4-D CUDA float32/float64
  // TODO: tensor, or of zero height or width; weight not 4-D [K, C, R, S] of x's device and dtype
  // TODO: with C == x.size(1); stride, padding, dilation not 2 values (stride, dilation >= 1,
  // TODO: padding >= 0); an output smaller than 1 x 1 (name x); tensors of 2^31 elements or more
  // TODO: (name x). Then fill in a ConvShape.
  // STUB: TORCH_CHECK(false, "conv_shape (conv_bn_relu_inference.cpp) is not implemented yet");
  course::check_cuda(x, "x");
  course::check_dtype(x, {at::kFloat, at::kDouble}, "x");
  course::check_dim(x, 4, "x");
  // zero height or width would leave the backward with an empty grid (PyTorch rejects it too)
  TORCH_CHECK(x.size(2) > 0 && x.size(3) > 0, "x must have a non-zero height and width, but has shape ",
              course::shape_of(x));
  course::check_dim(weight, 4, "weight");
  TORCH_CHECK(weight.device() == x.device(), "weight must be on the same device as x (", device_str(x),
              "), but is on ", device_str(weight));
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "weight must have the same dtype as x (", dtype_str(x),
              "), but has ", dtype_str(weight));
  TORCH_CHECK(weight.size(1) == x.size(1), "weight must have x's ", str(x.size(1)), " input channels in dim 1 (groups=1)",
              ", but has shape ", course::shape_of(weight));
  TORCH_CHECK(weight.size(0) > 0 && weight.size(2) > 0 && weight.size(3) > 0, "weight must not be empty, but has shape ",
              course::shape_of(weight));
  TORCH_CHECK(stride.size() == 2 && stride[0] >= 1 && stride[1] >= 1, "stride must be 2 values >= 1, got ", str(stride));
  TORCH_CHECK(padding.size() == 2 && padding[0] >= 0 && padding[1] >= 0, "padding must be 2 values >= 0, got ",
              str(padding));
  TORCH_CHECK(dilation.size() == 2 && dilation[0] >= 1 && dilation[1] >= 1, "dilation must be 2 values >= 1, got ",
              str(dilation));
  ConvShape s{};
  s.N = int(x.size(0)); s.C = int(x.size(1)); s.H = int(x.size(2)); s.W = int(x.size(3));
  s.K = int(weight.size(0)); s.R = int(weight.size(2)); s.S = int(weight.size(3));
  s.stride_h = int(stride[0]); s.stride_w = int(stride[1]);
  s.pad_h = int(padding[0]); s.pad_w = int(padding[1]);
  s.dil_h = int(dilation[0]); s.dil_w = int(dilation[1]);
  const int64_t P = (x.size(2) + 2 * padding[0] - dilation[0] * (weight.size(2) - 1) - 1) / stride[0] + 1;
  const int64_t Q = (x.size(3) + 2 * padding[1] - dilation[1] * (weight.size(3) - 1) - 1) / stride[1] + 1;
  TORCH_CHECK(P >= 1 && Q >= 1 && x.size(2) + 2 * padding[0] >= dilation[0] * (weight.size(2) - 1) + 1 &&
                  x.size(3) + 2 * padding[1] >= dilation[1] * (weight.size(3) - 1) + 1,
              "x of shape ", course::shape_of(x), " is smaller than the (dilated) kernel ", course::shape_of(weight),
              " plus padding");
  s.P = int(P); s.Q = int(Q);
  TORCH_CHECK(x.numel() <= kMaxElements && x.size(0) * weight.size(0) * P * Q <= kMaxElements &&
                  weight.numel() <= kMaxElements,
              "x of shape ", course::shape_of(x), ": tensors of 2^31 elements or more are not supported (32-bit offsets)");
  TORCH_CHECK(x.size(1) > 0, "x must have at least one channel, but has shape ", course::shape_of(x));
  return s;
  // END SOLUTION
}

at::Tensor conv_bn_relu_inference(const at::Tensor& x_, const at::Tensor& weight_, const std::optional<at::Tensor>& bias,
                                  const at::Tensor& bn_weight, const at::Tensor& bn_bias,
                                  const at::Tensor& running_mean, const at::Tensor& running_var, double eps,
                                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                  int64_t version) {
  TORCH_CHECK(version == 1 || version == 2, "version must be 1 (strict fp32) or 2 (TF32 tensor cores), but is ",
              str(version));
  const ConvShape s = conv_shape(x_, weight_, stride, padding, dilation);
  // version 2 rounds its operands to TF32, a float32 format: it takes float32 only (never float64 silently)
  TORCH_CHECK(version == 1 || x_.scalar_type() == at::kFloat,
              "x must be float32 for version 2 (TF32 tensor cores), but is ", dtype_str(x_));
  if (bias.has_value()) check_param(*bias, "bias", x_, s.K);
  check_param(bn_weight, "bn_weight", x_, s.K);
  check_param(bn_bias, "bn_bias", x_, s.K);
  check_param(running_mean, "running_mean", x_, s.K);
  check_param(running_var, "running_var", x_, s.K);
  TORCH_CHECK(eps > 0, "eps must be positive, got ", str(eps));
  const c10::cuda::CUDAGuard device_guard(x_.device());
  const at::Tensor x = x_.contiguous(), weight = weight_.contiguous();
  const at::Tensor b = bias.has_value() ? bias->contiguous() : at::Tensor();
  const at::Tensor gamma = bn_weight.contiguous(), beta = bn_bias.contiguous();
  const at::Tensor mean = running_mean.contiguous(), var = running_var.contiguous();
  at::Tensor y = at::empty({s.N, s.K, s.P, s.Q}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_bn_relu_inference", [&] {
    conv_bn_relu_inference_cuda<scalar_t>(
        x.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(),
        b.defined() ? b.const_data_ptr<scalar_t>() : nullptr, gamma.const_data_ptr<scalar_t>(),
        beta.const_data_ptr<scalar_t>(), mean.const_data_ptr<scalar_t>(), var.const_data_ptr<scalar_t>(), eps, s,
        static_cast<int>(version), y.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream());
  });
  return y;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("conv_bn_relu_inference(Tensor x, Tensor weight, Tensor? bias, Tensor bn_weight, Tensor bn_bias, "
        "Tensor running_mean, Tensor running_var, float eps, int[2] stride, int[2] padding, int[2] dilation, "
        "int version) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("conv_bn_relu_inference", &conv_bn_relu_inference);
}
