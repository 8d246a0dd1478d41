// Exercise 03: the op's C++ front end. Input checks, dtype dispatch, stream, and registration.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "transpose.h"

namespace {

at::Tensor transpose(const at::Tensor& x) {
  // BEGIN SOLUTION
  // GOAL: reject, naming "x", anything but a 2-D CUDA tensor of float16, bfloat16, float32 or float64.
  // TODO: reject, with TORCH_CHECK messages naming "x", a tensor that is not on a CUDA device, whose
  // TODO: dtype is not float16, bfloat16, float32 or float64, or that is not 2-D (see course/ops.h).
  course::check_cuda(x, "x");
  course::check_dtype(x, {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble}, "x");
  // (shapes formatted by course::shape_of: streaming integers into a message crashed on torch 2.11)
  TORCH_CHECK(x.dim() == 2, "x must be a 2-D matrix, but has shape ", course::shape_of(x));
  // END SOLUTION
  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor xc = x.contiguous();  // the kernel reads a row-major matrix (a strided view is copied once)
  const int64_t rows = xc.size(0), cols = xc.size(1);
  at::Tensor y = at::empty({cols, rows}, xc.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "transpose", [&] {
    transpose_cuda<scalar_t>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), rows, cols,
                             c10::cuda::getCurrentCUDAStream());
  });
  return y;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("transpose(Tensor x) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("transpose", &transpose);
}
