// Exercise 05: the op's C++ front end. Input checks, version switch, stream, and registration.
#include <string>

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "matmul.h"

namespace {

at::Tensor matmul(const at::Tensor& A, const at::Tensor& B, int64_t version) {
  // BEGIN SOLUTION
  // GOAL: reject, naming the argument, every A, B and version that the README's Interface lists as an error.
  // TODO: reject, with TORCH_CHECK messages naming the argument: A or B not on a CUDA device, not
  // TODO: float32 or bfloat16, or not 2-D; B on another device than A, or of another dtype; A's columns
  // TODO: != B's rows (name both); a version other than 1 to 5; a bfloat16 A with a version other than 5.
  course::check_cuda(A, "A");
  course::check_cuda(B, "B");
  course::check_dtype(A, {at::kFloat, at::kBFloat16}, "A");
  course::check_dtype(B, {at::kFloat, at::kBFloat16}, "B");
  // (shapes formatted by course::shape_of, numbers by std::to_string: streaming integers into a
  // message crashed on torch 2.11)
  TORCH_CHECK(A.dim() == 2, "A must be a 2-D matrix, but has shape ", course::shape_of(A));
  TORCH_CHECK(B.dim() == 2, "B must be a 2-D matrix, but has shape ", course::shape_of(B));
  TORCH_CHECK(B.device() == A.device(), "B must be on the same device as A (", course::device_str(A),
              "), but is on ", course::device_str(B));
  TORCH_CHECK(A.size(1) == B.size(0), "A's columns must match B's rows: A is ", course::shape_of(A), " and B is ",
              course::shape_of(B));
  TORCH_CHECK(B.scalar_type() == A.scalar_type(), "B must have A's dtype (", course::dtype_str(A), "), but has ",
              course::dtype_str(B));
  TORCH_CHECK(version >= 1 && version <= 5, "version must be 1, 2, 3, 4 or 5, but is " + std::to_string(version));
  TORCH_CHECK(A.scalar_type() == at::kFloat || version == 5, "A is ", course::dtype_str(A),
              ", which only version 5 (tensor cores) takes; versions 1 to 4 take float32");
  // END SOLUTION
  const c10::cuda::CUDAGuard device_guard(A.device());
  // The kernels read row-major matrices; a transposed or sliced view is copied once.
  const at::Tensor a = A.contiguous(), b = B.contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  at::Tensor c = at::empty({M, N}, a.options());  // A's dtype: float32, or bfloat16 (version 5)
  if (M == 0 || N == 0) return c;  // nothing to write; K == 0 is handled by the kernels (zeros)
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (a.scalar_type() == at::kBFloat16) {  // version 5 (checked above); c10::BFloat16 has __nv_bfloat16's bits
    matmul_cuda5(reinterpret_cast<const __nv_bfloat16*>(a.const_data_ptr<at::BFloat16>()),
                 reinterpret_cast<const __nv_bfloat16*>(b.const_data_ptr<at::BFloat16>()),
                 reinterpret_cast<__nv_bfloat16*>(c.mutable_data_ptr<at::BFloat16>()), M, N, K, stream);
    return c;
  }
  const float* pa = a.const_data_ptr<float>();
  const float* pb = b.const_data_ptr<float>();
  float* pc = c.mutable_data_ptr<float>();
  switch (version) {
    case 1: matmul_cuda1(pa, pb, pc, M, N, K, stream); break;
    case 2: matmul_cuda2(pa, pb, pc, M, N, K, stream); break;
    case 3: matmul_cuda3(pa, pb, pc, M, N, K, stream); break;
    case 4: matmul_cuda4(pa, pb, pc, M, N, K, stream); break;
    default: matmul_cuda5(pa, pb, pc, M, N, K, stream); break;
  }
  return c;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("matmul(Tensor A, Tensor B, int version=4) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("matmul", &matmul);
}
