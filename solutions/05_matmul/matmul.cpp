// Exercise 05: the op's C++ front end. Input checks, version switch, stream, and registration.
#include <cstdint>
#include <string>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "matmul.h"

namespace {

at::Tensor matmul(const at::Tensor& A, const at::Tensor& B, int64_t version) {
  // BEGIN SOLUTION
  // GOAL: reject, naming the argument, every A, B and version that the README's Interface lists as an error.
  // TODO: reject, with TORCH_CHECK messages naming the argument: A or B not on a CUDA device, not
  // TODO: float32 or bfloat16, or neither 2-D nor 3-D; B on another device than A, or of another dtype;
  // TODO: A 3-D and B not, or the other way round; batch sizes (size(0)) that differ; A's columns !=
  // TODO: B's rows (name both); a version other than 1 to 6; 3-D operands with a version other than 4
  // TODO: to 6; a bfloat16 A with a version other than 5 or 6.
  course::check_cuda(A, "A");
  course::check_cuda(B, "B");
  course::check_dtype(A, {at::kFloat, at::kBFloat16}, "A");
  course::check_dtype(B, {at::kFloat, at::kBFloat16}, "B");
  // (shapes formatted by course::shape_of, numbers by std::to_string: streaming integers into a
  // message crashed on torch 2.11)
  TORCH_CHECK(A.dim() == 2 || A.dim() == 3, "A must be a 2-D matrix or a 3-D batch of them, but has shape ",
              course::shape_of(A));
  TORCH_CHECK(B.dim() == 2 || B.dim() == 3, "B must be a 2-D matrix or a 3-D batch of them, but has shape ",
              course::shape_of(B));
  TORCH_CHECK(B.device() == A.device(), "B must be on the same device as A (", course::device_str(A),
              "), but is on ", course::device_str(B));
  TORCH_CHECK(B.dim() == A.dim(), "B must have as many dims as A (both 2-D, or both 3-D batches; no broadcasting): "
              "A is ", course::shape_of(A), " and B is ", course::shape_of(B));
  TORCH_CHECK(A.dim() == 2 || A.size(0) == B.size(0), "A's batch size must match B's: A is ", course::shape_of(A),
              " and B is ", course::shape_of(B));
  TORCH_CHECK(A.size(-1) == B.size(-2), "A's columns must match B's rows: A is ", course::shape_of(A), " and B is ",
              course::shape_of(B));
  TORCH_CHECK(B.scalar_type() == A.scalar_type(), "B must have A's dtype (", course::dtype_str(A), "), but has ",
              course::dtype_str(B));
  TORCH_CHECK(version >= 1 && version <= 6, "version must be 1, 2, 3, 4, 5 or 6, but is " + std::to_string(version));
  TORCH_CHECK(A.dim() == 2 || version >= 4, "A is a 3-D batch ", course::shape_of(A), ", which only versions 4 to 6 "
              "take; version " + std::to_string(version) + " takes 2-D matrices");
  TORCH_CHECK(A.scalar_type() == at::kFloat || version >= 5, "A is ", course::dtype_str(A),
              ", which only versions 5 and 6 (tensor cores) take; versions 1 to 4 take float32");
  // END SOLUTION
  const c10::cuda::CUDAGuard device_guard(A.device());
  // The kernels read row-major matrices: a view is copied once into one, but for two cases of float32
  // transposed views. The matrix of a matrix-vector product (versions 4 and 5), where the copy would
  // cost more than the product (it reads and writes the whole matrix, the product only reads it):
  // A @ x with A's transpose contiguous is (x^T A^T)^T, the M == 1 kernel over A's own storage, and
  // x @ B with B's transpose contiguous is B^T x^T, the N == 1 kernel (C's M x 1 and 1 x M are the same
  // bytes, so only the kernels' view of it turns). And version 4's tiles, whose loader reads a
  // transposed A, and a transposed B beside it, in place.
  const bool batched = A.dim() == 3;  // (batch, M, K) @ (batch, K, N): versions 4 to 6 (checked above)
  const int64_t batch = batched ? A.size(0) : 1, K = A.size(-1), c_rows = A.size(-2), c_cols = B.size(-1);
  const bool matvec = (version == 4 || version == 5) && A.scalar_type() == at::kFloat;
  const auto transposed_view = [](const at::Tensor& t) { return !t.is_contiguous() && t.mT().is_contiguous(); };
  at::Tensor a, b;
  int64_t M = c_rows, N = c_cols;
  bool trans_a = false, trans_b = false;
  if (matvec && c_cols == 1 && transposed_view(A)) {  // C^T = x^T A^T: 1 x K by A's storage, K x M
    course::took("matvec.a_mT");  // (planner paths: course/paths.h)
    a = B.mT().contiguous();
    b = A.mT();
    M = 1, N = c_rows;
  } else if (matvec && c_rows == 1 && transposed_view(B)) {  // C^T = B^T x^T: B's storage, N x K, by K x 1
    course::took("matvec.b_mT");
    a = B.mT();
    b = A.mT().contiguous();
    M = c_cols, N = 1;
  } else {
    const bool tiles4 = version == 4 && A.scalar_type() == at::kFloat && matmul_tiles4(batch, M, N, K);
    trans_a = tiles4 && transposed_view(A);
    // A transposed B is read in place too, beside either A (nn.Linear's x @ W.t()): a copy reads and
    // writes all of B, 35 us of 1031 x 1000 x 4099's 288 (0.77x of cuBLAS copied, 0.85x in place);
    // on a large M it is a small part, and in place costs about as much (8192 x 768 x 3072: 0.94x,
    // 0.93x; H100)
    trans_b = tiles4 && transposed_view(B);
    a = trans_a ? A : A.contiguous();  // a transposed view's data pointer is its storage's start
    b = trans_b ? B : B.contiguous();
  }
  // A's dtype: float32, or bfloat16 (versions 5 and 6)
  at::Tensor c = batched ? at::empty({batch, c_rows, c_cols}, a.options()) : at::empty({c_rows, c_cols}, a.options());
  if (batch == 0 || M == 0 || N == 0) return c;  // nothing to write; K == 0 is handled by the kernels (zeros)
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const bool bf16 = a.scalar_type() == at::kBFloat16;  // versions 5 and 6 (checked above)
  if (version == 6) {
    // TMA reads rows that start on 16-byte boundaries: where A's (B's) do not (K (N) not a multiple of 4
    // floats or 8 bfloat16s, or a view that starts inside an element's 16 bytes), a copy with its rows
    // padded to them
    const int64_t elems = 16 / a.element_size();
    const auto rows_aligned = [&](at::Tensor& t, int64_t rows, int64_t cols) {
      if (cols % elems == 0 && reinterpret_cast<std::uintptr_t>(t.const_data_ptr()) % 16 == 0) return cols;
      bf16 ? course::took<at::BFloat16>("v6.padded_copy") : course::took<float>("v6.padded_copy");
      const int64_t ld = (cols + elems - 1) / elems * elems;
      at::Tensor padded = at::zeros({batch, rows, ld}, t.options());
      padded.narrow(2, 0, cols).copy_(t.reshape({batch, rows, cols}));
      t = padded;
      return ld;
    };
    const int64_t lda = rows_aligned(a, M, K);
    // (float32 B is read by matmul_transpose_tf32, which takes any row length)
    const int64_t ldb = bf16 ? rows_aligned(b, K, N) : N;
    const int64_t floats = matmul_workspace6(batch, N, K, bf16);
    const at::Tensor workspace = floats > 0 ? at::empty({floats}, a.options().dtype(at::kFloat)) : at::Tensor();
    float* ws = floats > 0 ? workspace.mutable_data_ptr<float>() : nullptr;
    if (bf16) {
      matmul_cuda6(reinterpret_cast<const __nv_bfloat16*>(a.const_data_ptr<at::BFloat16>()), lda,
                   reinterpret_cast<const __nv_bfloat16*>(b.const_data_ptr<at::BFloat16>()), ldb,
                   reinterpret_cast<__nv_bfloat16*>(c.mutable_data_ptr<at::BFloat16>()), batch, M, N, K, ws, stream);
    } else {
      matmul_cuda6(a.const_data_ptr<float>(), lda, b.const_data_ptr<float>(), ldb, c.mutable_data_ptr<float>(), batch,
                   M, N, K, ws, stream);
    }
    return c;
  }
  // Versions 4 and 5 split K for some shapes: the partial products are float32, from the caching
  // allocator on this stream (freed after the launches are queued, reused only by later work on it).
  const int64_t floats = version == 4 ? matmul_workspace4(batch, M, N, K)
                         : version == 5 ? matmul_workspace5(batch, M, N, K, bf16) : 0;
  const at::Tensor workspace = floats > 0 ? at::empty({floats}, a.options().dtype(at::kFloat)) : at::Tensor();
  float* ws = floats > 0 ? workspace.mutable_data_ptr<float>() : nullptr;
  if (bf16) {  // c10::BFloat16 has __nv_bfloat16's bits
    matmul_cuda5(reinterpret_cast<const __nv_bfloat16*>(a.const_data_ptr<at::BFloat16>()),
                 reinterpret_cast<const __nv_bfloat16*>(b.const_data_ptr<at::BFloat16>()),
                 reinterpret_cast<__nv_bfloat16*>(c.mutable_data_ptr<at::BFloat16>()), batch, M, N, K, ws, stream);
    return c;
  }
  const float* pa = a.const_data_ptr<float>();
  const float* pb = b.const_data_ptr<float>();
  float* pc = c.mutable_data_ptr<float>();
  switch (version) {
    case 1: matmul_cuda1(pa, pb, pc, M, N, K, stream); break;
    case 2: matmul_cuda2(pa, pb, pc, M, N, K, stream); break;
    case 3: matmul_cuda3(pa, pb, pc, M, N, K, stream); break;
    case 4: matmul_cuda4(pa, pb, pc, batch, M, N, K, ws, stream, trans_a, trans_b); break;
    default: matmul_cuda5(pa, pb, pc, batch, M, N, K, ws, stream); break;
  }
  return c;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("matmul(Tensor A, Tensor B, int version=4) -> Tensor");  // A, B: 2-D, or 3-D batches (4 to 6)
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("matmul", &matmul);
}
