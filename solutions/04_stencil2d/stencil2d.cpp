// Exercise 04: the op's C++ front end. Input checks, stream, and registration.
#include <string>

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "stencil2d.h"

namespace {

at::Tensor stencil2d(const at::Tensor& x, const at::Tensor& weight) {
  // BEGIN SOLUTION
  // GOAL: reject, naming the argument, every x and weight that the README's Interface lists as an error.
  // TODO: reject, with TORCH_CHECK messages naming the argument: x or weight not on a CUDA device or
  // TODO: not float32; x not 2-D (H, W) or 3-D (B, H, W); weight not 2-D and square; a filter size that
  // TODO: is even or larger than kMaxFilter; weight on another device than x.
  course::check_cuda(x, "x");
  course::check_cuda(weight, "weight");
  course::check_dtype(x, {at::kFloat}, "x");
  course::check_dtype(weight, {at::kFloat}, "weight");
  // (shapes formatted by course::shape_of, numbers by std::to_string: streaming integers into a
  // message crashed on torch 2.11)
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3, "x must be an image (H, W) or a batch of images (B, H, W), but has shape ",
              course::shape_of(x));
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == weight.size(1), "weight must be a square K x K filter, but has shape ",
              course::shape_of(weight));
  TORCH_CHECK(weight.size(0) % 2 == 1 && weight.size(0) <= kMaxFilter,
              "weight must be K x K with K odd and at most 7, but K = " + std::to_string(weight.size(0)));
  TORCH_CHECK(weight.device() == x.device(), "weight must be on the same device as x (", course::device_str(x),
              "), but is on ", course::device_str(weight));
  // END SOLUTION
  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor xc = x.contiguous();  // the kernel reads row-major images (a strided view is copied once)
  const at::Tensor wc = weight.contiguous();
  const int64_t batch = xc.dim() == 3 ? xc.size(0) : 1;
  const int64_t height = xc.size(-2), width = xc.size(-1);
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (y.numel() == 0) return y;
  // Same stream as the kernel: the copy finishes before the kernel reads the filter.
  stencil2d_set_filter(wc.const_data_ptr<float>(), static_cast<int>(wc.size(0)), stream);
  stencil2d_cuda(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), batch, height, width,
                 static_cast<int>(wc.size(0)), stream);
  return y;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("stencil2d(Tensor x, Tensor weight) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("stencil2d", &stencil2d);
}
