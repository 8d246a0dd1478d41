// Exercise 06: the op's C++ front end. Argument checks, output size, dtype dispatch, stream, and
// registration.
#include <array>
#include <climits>
#include <optional>
#include <string>

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "conv2d.h"

namespace {

using Pair = std::array<int64_t, 2>;  // (height, width)

using course::str;  // messages pass only strings to TORCH_CHECK (see course/ops.h)

std::string pair_of(const Pair& v) { return str(at::IntArrayRef(v)); }

// stride, padding and dilation arrive as int[] lists: exactly two values, small enough for an int.
Pair pair_arg(at::IntArrayRef v, const char* name) {
  TORCH_CHECK(v.size() == 2, name, " must have 2 values (height, width), but is ", str(v));
  for (int64_t e : v) TORCH_CHECK(e > -(1 << 24) && e < (1 << 24), name, " values must be below 2^24, but are ", str(v));
  return {v[0], v[1]};
}

// Reject every argument the kernels cannot handle, with a message naming the argument.
void check_conv_args(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                     const Pair& stride, const Pair& padding, const Pair& dilation, int64_t groups) {
  // BEGIN SOLUTION
  // GOAL: reject, naming the argument, every x, weight, bias, stride, padding, dilation and groups that
  // GOAL: the README's Interface lists as an error.
  // TODO: x: a CUDA tensor of float32 or float64 with 4 dimensions (N, C, H, W) (see course/ops.h).
  // TODO: groups >= 1 and dividing x.size(1) (name groups and x).
  // TODO: weight: 4 dimensions (cout, cin / groups, kh, kw), on x's device, of x's dtype, with cout
  // TODO: divisible by groups (name groups and weight) and weight.size(1) * groups == x.size(1).
  // TODO: bias (when given): 1 dimension of size cout, on x's device, of x's dtype.
  // TODO: stride and dilation > 0, padding >= 0, and the dilated kernel dilation * (k - 1) + 1 no
  // TODO: larger than the padded input H + 2 * padding (and likewise for W): name the argument.
  course::check_cuda(x, "x");
  course::check_dtype(x, {at::kFloat, at::kDouble}, "x");
  TORCH_CHECK(x.dim() == 4, "x must have 4 dimensions (N, C, H, W), but has shape ", str(x.sizes()));
  TORCH_CHECK(groups >= 1 && groups < (1 << 24), "groups must be at least 1 (and below 2^24), but is ", str(groups));
  TORCH_CHECK(x.size(1) % groups == 0, "groups (", str(groups), ") must divide x's ", str(x.size(1)),
              " channels (x has shape ", str(x.sizes()), "): each group must have as many input channels");
  TORCH_CHECK(weight.dim() == 4, "weight must have 4 dimensions, but has shape ", str(weight.sizes()));
  TORCH_CHECK(weight.device() == x.device(), "weight must be on x's device (", course::device_str(x), "), but is on ",
              course::device_str(weight));
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "weight must have x's dtype (", course::dtype_str(x),
              "), but has ", course::dtype_str(weight));
  TORCH_CHECK(weight.size(0) % groups == 0, "groups (", str(groups), ") must divide weight's ", str(weight.size(0)),
              " output channels (weight has shape ", str(weight.sizes()), "): each group must have as many");
  TORCH_CHECK(weight.size(1) * groups == x.size(1), "weight must have shape (cout, cin / groups, kh, kw) with cin / groups = ",
              str(x.size(1)), " / ", str(groups), " = ", str(x.size(1) / groups), ", but has shape ", str(weight.sizes()),
              " (x has shape ", str(x.sizes()), ")");
  if (bias.has_value()) {
    const at::Tensor& b = *bias;
    TORCH_CHECK(b.device() == x.device(), "bias must be on x's device (", course::device_str(x), "), but is on ",
                course::device_str(b));
    TORCH_CHECK(b.scalar_type() == x.scalar_type(), "bias must have x's dtype (", course::dtype_str(x), "), but has ",
                course::dtype_str(b));
    TORCH_CHECK(b.dim() == 1 && b.size(0) == weight.size(0), "bias must have shape (", str(weight.size(0)),
                ",) (one value per output channel), but has shape ", str(b.sizes()));
  }
  for (int d = 0; d < 2; ++d) {
    TORCH_CHECK(stride[d] > 0, "stride must be positive, but is ", pair_of(stride));
    TORCH_CHECK(dilation[d] > 0, "dilation must be positive, but is ", pair_of(dilation));
    TORCH_CHECK(padding[d] >= 0, "padding must be non-negative, but is ", pair_of(padding));
    const int64_t kernel = dilation[d] * (weight.size(2 + d) - 1) + 1;
    const int64_t padded = x.size(2 + d) + 2 * padding[d];
    TORCH_CHECK(weight.size(2 + d) > 0 && kernel <= padded, "weight: the kernel ", str(weight.sizes()),
                " with dilation ", pair_of(dilation), " spans ", str(kernel), d == 0 ? " rows" : " columns",
                ", more than the padded input's ", str(padded), " (x is ", str(x.sizes()), ", padding ",
                pair_of(padding), ")");
  }
  // END SOLUTION
}

// Output length along one axis: the number of kernel placements that fit in the padded input.
int64_t conv_output_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  int64_t out = 0;
  // BEGIN SOLUTION
  // GOAL: out = the output length of a convolution along one axis, as F.conv2d gives it.
  // TODO: the number of positions o >= 0 with o * stride + dil * (k - 1) <= in + 2 * pad - 1.
  // STUB: TORCH_CHECK(false, "conv_output_size (conv2d.cpp) is not implemented yet");
  out = (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
  // END SOLUTION
  return out;
}

at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                  int64_t version) {
  TORCH_CHECK(version >= 1 && version <= 3,
              "version must be 1 (direct), 2 (implicit GEMM) or 3 (implicit GEMM on TF32 tensor cores), but is ",
              str(version));
  const Pair st = pair_arg(stride, "stride"), pd = pair_arg(padding, "padding"), dl = pair_arg(dilation, "dilation");
  check_conv_args(x, weight, bias, st, pd, dl, groups);
  // version 3 rounds its operands to TF32, a float32 format: it takes float32 only (never float64 silently)
  TORCH_CHECK(version != 3 || x.scalar_type() == at::kFloat,
              "x must be float32 for version 3 (TF32 tensor cores), but is ", course::dtype_str(x));
  // version 3 is one dense GEMM: grouped convolutions take version 2 (its grouped GEMM or depthwise kernel)
  TORCH_CHECK(version != 3 || groups == 1, "groups must be 1 for version 3 (TF32 tensor cores), but is ",
              str(groups), "; version 2 takes groups");
  const int64_t ho = conv_output_size(x.size(2), weight.size(2), st[0], pd[0], dl[0]);
  const int64_t wo = conv_output_size(x.size(3), weight.size(3), st[1], pd[1], dl[1]);
  // The kernels index within one image with int (the batch index is 64-bit).
  TORCH_CHECK(x.size(1) * x.size(2) * x.size(3) < INT_MAX, "x: one image of ", str(x.sizes()), " has 2^31 or more elements");
  TORCH_CHECK(weight.numel() < INT_MAX, "weight has 2^31 or more elements");
  TORCH_CHECK(weight.size(0) * ho * wo < INT_MAX, "the output of one image has 2^31 or more elements");

  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = weight.contiguous();
  const at::Tensor bc = bias.has_value() ? bias->contiguous() : at::Tensor();
  at::Tensor y = at::empty({x.size(0), weight.size(0), ho, wo}, xc.options());

  Conv2dShape s;
  s.n = x.size(0);
  s.cin = static_cast<int>(x.size(1));
  s.h = static_cast<int>(x.size(2));
  s.w = static_cast<int>(x.size(3));
  s.cout = static_cast<int>(weight.size(0));
  s.kh = static_cast<int>(weight.size(2));
  s.kw = static_cast<int>(weight.size(3));
  s.ho = static_cast<int>(ho);
  s.wo = static_cast<int>(wo);
  s.stride_h = static_cast<int>(st[0]);
  s.stride_w = static_cast<int>(st[1]);
  s.pad_h = static_cast<int>(pd[0]);
  s.pad_w = static_cast<int>(pd[1]);
  s.dil_h = static_cast<int>(dl[0]);
  s.dil_w = static_cast<int>(dl[1]);
  s.groups = static_cast<int>(groups);
  const at::Tensor scratch = conv2d_weight_scratch(s, static_cast<int>(version)) ? at::empty(wc.sizes(), wc.options()) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "conv2d", [&] {
    conv2d_cuda<scalar_t>(xc.const_data_ptr<scalar_t>(), wc.const_data_ptr<scalar_t>(),
                          bc.defined() ? bc.const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<scalar_t>(), s,
                          static_cast<int>(version), scratch.defined() ? scratch.mutable_data_ptr<scalar_t>() : nullptr,
                          c10::cuda::getCurrentCUDAStream());
  });
  return y;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("conv2d(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups, "
        "int version) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check
// ("x must be a CUDA tensor") instead of the dispatcher's generic error.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("conv2d", &conv2d);
}
