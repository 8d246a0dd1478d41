// GENERATED from solutions/09_conv_bn_relu_training/conv_bn_relu_training.cpp by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 09: the ops' C++ front end. Input checks, output allocation, dtype dispatch, stream, registration.
#include <optional>
#include <string>
#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "conv_bn_relu_training.h"

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

// version 1 (strict fp32) or 2 (TF32 tensor cores), which rounds its operands to TF32, a float32 format:
// float32 only, never float64 silently.
void check_version(int64_t version, const at::Tensor& x) {
  TORCH_CHECK(version == 1 || version == 2, "version must be 1 (strict fp32) or 2 (TF32 tensor cores), but is ",
              str(version));
  TORCH_CHECK(version == 1 || x.scalar_type() == at::kFloat,
              "x must be float32 for version 2 (TF32 tensor cores), but is ", dtype_str(x));
}

// Validates the convolution's operands and returns its geometry.
ConvShape conv_shape(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation) {
  // BEGIN SOLUTION
  // TODO: reject, with TORCH_CHECK messages naming the argument: x not a 4-D CUDA float32/float64
  // TODO: tensor, or of zero height or width; weight not 4-D [K, C, R, S] of x's device and dtype
  // TODO: with C == x.size(1); stride, padding, dilation not 2 values (stride, dilation >= 1,
  // TODO: padding >= 0); an output smaller than 1 x 1 (name x); tensors of 2^31 elements or more
  // TODO: (name x). Then fill in a ConvShape.
  // TODO: (the reference solution takes about 37 lines)
  TORCH_CHECK(false, "conv_shape (conv_bn_relu_training.cpp) is not implemented yet");
  // END SOLUTION
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> conv_bn_relu_forward(
    const at::Tensor& x_, const at::Tensor& weight_, const std::optional<at::Tensor>& bias, const at::Tensor& bn_weight,
    const at::Tensor& bn_bias, at::Tensor& running_mean, at::Tensor& running_var, at::Tensor& num_batches_tracked,
    bool training, std::optional<double> momentum, double eps, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool keep_z, int64_t version) {
  const ConvShape s = conv_shape(x_, weight_, stride, padding, dilation);
  check_version(version, x_);
  if (bias.has_value()) check_param(*bias, "bias", x_, s.K);
  check_param(bn_weight, "bn_weight", x_, s.K);
  check_param(bn_bias, "bn_bias", x_, s.K);
  check_param(running_mean, "running_mean", x_, s.K);
  check_param(running_var, "running_var", x_, s.K);
  course::check_contiguous(running_mean, "running_mean");  // updated in place
  course::check_contiguous(running_var, "running_var");
  TORCH_CHECK(eps > 0, "eps must be positive, got ", str(eps));
  // checked in eval too (where it is not used), so a buffer left behind on another device shows at once
  TORCH_CHECK(num_batches_tracked.device() == x_.device() && num_batches_tracked.scalar_type() == at::kLong &&
                  num_batches_tracked.numel() == 1,
              "num_batches_tracked must be a one-element int64 tensor on x's device (", device_str(x_),
              "), but has shape ", course::shape_of(num_batches_tracked), ", dtype ", dtype_str(num_batches_tracked),
              " and is on ", device_str(num_batches_tracked));
  if (training) {
    TORCH_CHECK(int64_t(s.N) * s.P * s.Q > 1, "x: expected more than 1 value per channel when training, got x of "
                "shape ", course::shape_of(x_));
    TORCH_CHECK(!momentum.has_value() || (*momentum >= 0 && *momentum <= 1), "momentum must be in [0, 1] or None, got ",
                str(*momentum));
  }
  const c10::cuda::CUDAGuard device_guard(x_.device());
  const at::Tensor x = x_.contiguous(), weight = weight_.contiguous();
  const at::Tensor b = bias.has_value() ? bias->contiguous() : at::Tensor();
  const at::Tensor gamma = bn_weight.contiguous(), beta = bn_bias.contiguous();
  const auto opts = x.options();
  at::Tensor y = at::empty({s.N, s.K, s.P, s.Q}, opts);
  at::Tensor z = (training || keep_z) ? at::empty({s.N, s.K, s.P, s.Q}, opts) : at::empty({0}, opts);
  at::Tensor save_mean = at::empty({s.K}, opts), save_invstd = at::empty({s.K}, opts);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_bn_relu_forward", [&] {
    const scalar_t* bp = b.defined() ? b.const_data_ptr<scalar_t>() : nullptr;
    course::took<scalar_t>(bp != nullptr ? "bias" : "no_bias");  // (planner paths: course/paths.h)
    if (training) {
      course::took<scalar_t>(momentum.has_value() ? "train.momentum" : "train.cumulative_average");
      at::Tensor part = at::empty({2 * int64_t(conv_bn_relu_stat_tiles(s)) * s.K}, opts);
      at::Tensor scale_shift = at::empty({2 * s.K}, opts);
      conv_bn_relu_train_forward_cuda<scalar_t>(
          x.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(), bp, gamma.const_data_ptr<scalar_t>(),
          beta.const_data_ptr<scalar_t>(), running_mean.mutable_data_ptr<scalar_t>(),
          running_var.mutable_data_ptr<scalar_t>(), num_batches_tracked.mutable_data_ptr<int64_t>(),
          momentum.has_value() ? *momentum : -1.0, eps, s, z.mutable_data_ptr<scalar_t>(),
          y.mutable_data_ptr<scalar_t>(), save_mean.mutable_data_ptr<scalar_t>(),
          save_invstd.mutable_data_ptr<scalar_t>(), part.mutable_data_ptr<scalar_t>(),
          scale_shift.mutable_data_ptr<scalar_t>(), static_cast<int>(version), stream);
    } else {
      course::took<scalar_t>(keep_z ? "eval.keep_z" : "eval");
      conv_bn_relu_eval_forward_cuda<scalar_t>(
          x.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(), bp, gamma.const_data_ptr<scalar_t>(),
          beta.const_data_ptr<scalar_t>(), running_mean.const_data_ptr<scalar_t>(),
          running_var.const_data_ptr<scalar_t>(), eps, s, keep_z ? z.mutable_data_ptr<scalar_t>() : nullptr,
          y.mutable_data_ptr<scalar_t>(), save_mean.mutable_data_ptr<scalar_t>(),
          save_invstd.mutable_data_ptr<scalar_t>(), static_cast<int>(version), stream);
    }
  });
  if (!training && s.N == 0) {  // no kernel ran: the statistics used are still the running ones
    save_mean.copy_(running_mean);
    save_invstd.copy_(running_var.add(eps).rsqrt());
  }
  return {y, z, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> conv_bn_relu_backward(
    const at::Tensor& grad_y_, const at::Tensor& x_, const at::Tensor& weight_, const at::Tensor& z_,
    const at::Tensor& y_, const at::Tensor& bn_weight, const at::Tensor& save_mean, const at::Tensor& save_invstd,
    bool training, at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t version) {
  const ConvShape s = conv_shape(x_, weight_, stride, padding, dilation);
  check_version(version, x_);
  course::check_same(grad_y_, "grad_y", y_, "y");
  course::check_same(z_, "z", y_, "y");
  TORCH_CHECK(y_.device() == x_.device() && y_.scalar_type() == x_.scalar_type() && y_.dim() == 4 &&
                  y_.size(0) == s.N && y_.size(1) == s.K && y_.size(2) == s.P && y_.size(3) == s.Q,
              "y must be the forward's output [", str(s.N), ", ", str(s.K), ", ", str(s.P), ", ", str(s.Q),
              "] of x's dtype, but has shape ", course::shape_of(y_));
  check_param(bn_weight, "bn_weight", x_, s.K);
  check_param(save_mean, "save_mean", x_, s.K);
  check_param(save_invstd, "save_invstd", x_, s.K);
  const c10::cuda::CUDAGuard device_guard(x_.device());
  const at::Tensor grad_y = grad_y_.contiguous(), x = x_.contiguous(), weight = weight_.contiguous();
  const at::Tensor z = z_.contiguous(), y = y_.contiguous(), gamma = bn_weight.contiguous();
  const at::Tensor mean = save_mean.contiguous(), invstd = save_invstd.contiguous();
  const auto opts = x.options();
  at::Tensor grad_x = at::empty(x.sizes(), opts), grad_w = at::empty(weight.sizes(), opts);
  at::Tensor grad_bias = at::empty({s.K}, opts), grad_gamma = at::empty({s.K}, opts), grad_beta = at::empty({s.K}, opts);
  if (s.N == 0) {  // nothing flowed back; a 0-block grid is an error, so no launch
    return {grad_x, grad_w.zero_(), grad_bias.zero_(), grad_gamma.zero_(), grad_beta.zero_()};
  }
  at::Tensor u = at::empty(y.sizes(), opts);
  at::Tensor scratch = at::empty({conv_bn_relu_backward_scratch(s)}, opts);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_bn_relu_backward", [&] {
    conv_bn_relu_backward_cuda<scalar_t>(
        grad_y.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(),
        z.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(), gamma.const_data_ptr<scalar_t>(),
        mean.const_data_ptr<scalar_t>(), invstd.const_data_ptr<scalar_t>(), training, static_cast<int>(version), s,
        grad_x.mutable_data_ptr<scalar_t>(), grad_w.mutable_data_ptr<scalar_t>(), grad_bias.mutable_data_ptr<scalar_t>(),
        grad_gamma.mutable_data_ptr<scalar_t>(), grad_beta.mutable_data_ptr<scalar_t>(), u.mutable_data_ptr<scalar_t>(),
        scratch.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream());
  });
  return {grad_x, grad_w, grad_bias, grad_gamma, grad_beta};
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("conv_bn_relu_forward(Tensor x, Tensor weight, Tensor? bias, Tensor bn_weight, Tensor bn_bias, "
        "Tensor(a!) running_mean, Tensor(b!) running_var, Tensor(c!) num_batches_tracked, bool training, "
        "float? momentum, float eps, int[2] stride, int[2] padding, int[2] dilation, bool keep_z, int version) "
        "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def("conv_bn_relu_backward(Tensor grad_y, Tensor x, Tensor weight, Tensor z, Tensor y, Tensor bn_weight, "
        "Tensor save_mean, Tensor save_invstd, bool training, int[2] stride, int[2] padding, int[2] dilation, "
        "int version) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("conv_bn_relu_forward", &conv_bn_relu_forward);
  m.impl("conv_bn_relu_backward", &conv_bn_relu_backward);
}
