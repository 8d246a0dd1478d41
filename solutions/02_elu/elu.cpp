// Exercise 02: the op's C++ front end. Input checks, dtype dispatch, stream, and registration.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "elu.h"

namespace {

void check_input(const at::Tensor& t, const char* name) {
  // BEGIN SOLUTION
  // GOAL: reject, naming `name`, a tensor that is not a CUDA tensor of float16, bfloat16, float32 or float64.
  // TODO: reject, with a TORCH_CHECK message naming `name`, a tensor that is not on a CUDA device
  // TODO: or whose dtype is not float16, bfloat16, float32 or float64 (see course/ops.h).
  course::check_cuda(t, name);
  course::check_dtype(t, {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble}, name);
  // END SOLUTION
}

at::Tensor elu(const at::Tensor& x, double alpha) {
  check_input(x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor xc = x.contiguous();  // the kernel walks one flat array
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "elu", [&] {
    elu_forward_cuda<scalar_t>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), xc.numel(),
                                      alpha, c10::cuda::getCurrentCUDAStream());
  });
  return y;
}

at::Tensor elu_backward(const at::Tensor& grad_output, const at::Tensor& x, double alpha) {
  check_input(x, "x");
  check_input(grad_output, "grad_output");
  course::check_same(grad_output, "grad_output", x, "x");
  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor gc = grad_output.contiguous();
  const at::Tensor xc = x.contiguous();
  at::Tensor grad_x = at::empty(xc.sizes(), xc.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "elu_backward", [&] {
    elu_backward_cuda<scalar_t>(gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
                                       grad_x.mutable_data_ptr<scalar_t>(), xc.numel(), alpha,
                                       c10::cuda::getCurrentCUDAStream());
  });
  return grad_x;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("elu(Tensor x, float alpha) -> Tensor");
  m.def("elu_backward(Tensor grad_output, Tensor x, float alpha) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own
// check ("x must be a CUDA tensor") instead of the dispatcher's generic error.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("elu", &elu);
  m.impl("elu_backward", &elu_backward);
}
