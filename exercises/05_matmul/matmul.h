// GENERATED from solutions/05_matmul/matmul.h by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Launchers of exercise 05, shared by the kernel files (matmul_*.cu) and the binding file (matmul.cpp).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

// C (M x N) = A (M x K) @ B (K x N), row-major and contiguous, launched on `stream`: float32 for every
// version, bfloat16 too for versions 5 and 6 (C then bfloat16). One launcher per numbered kernel, from
// naive to fast. Each checks that its grid fits; versions 5 and 6 also that the GPU has their tensor
// cores. Versions 4 to 6 take `batch` products at once: A (batch, M, K), B (batch, K, N), C (batch, M,
// N), each contiguous.
void matmul_cuda1(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
void matmul_cuda2(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
void matmul_cuda3(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
// Version 4 splits K for some shapes (the README's "Shape classes"): the caller passes a float32 workspace
// of matmul_workspace4(batch, M, N, K) elements (none needed when it is 0; then nullptr will do).
// trans_a (trans_b): A (B) stored transposed, its storage a contiguous K x M (N x K) matrix per batch
// element (a transposed view, `x.mT`); kernel 4's tiles read it in place, so only where
// matmul_tiles4(batch, M, N, K) says the product takes them (other paths read row-major matrices).
int64_t matmul_workspace4(int64_t batch, int64_t M, int64_t N, int64_t K);
bool matmul_tiles4(int64_t batch, int64_t M, int64_t N, int64_t K);
void matmul_cuda4(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                  float* workspace, cudaStream_t stream, bool trans_a = false, bool trans_b = false);
// Version 5 plans the same way with its own tiles (float32 matrix-vector products take version 4's
// kernels; float32 products of 2048 rows or more write B^T, rounded to TF32, into the workspace first):
// a float32 workspace of matmul_workspace5(batch, M, N, K, A is bfloat16) elements.
int64_t matmul_workspace5(int64_t batch, int64_t M, int64_t N, int64_t K, bool bfloat16);
void matmul_cuda5(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                  float* workspace, cudaStream_t stream);
void matmul_cuda5(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t batch, int64_t M,
                  int64_t N, int64_t K, float* workspace, cudaStream_t stream);
// Version 6 (compute capability 9.0 only, a "9.0a" build): Hopper's wgmma over TMA copies, TF32 for
// float32 and BF16 for bfloat16, every product on its 128 x 256 tiles. A's rows lda elements apart and
// B's ldb, multiples of 16 bytes, both 16-byte aligned (the caller pads where K or N is not); float32
// also needs a workspace of matmul_workspace6(batch, N, K, B is bfloat16) floats (B^T; none for bfloat16).
int64_t matmul_workspace6(int64_t batch, int64_t N, int64_t K, bool bfloat16);
void matmul_cuda6(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t batch, int64_t M,
                  int64_t N, int64_t K, float* workspace, cudaStream_t stream);
void matmul_cuda6(const __nv_bfloat16* A, int64_t lda, const __nv_bfloat16* B, int64_t ldb, __nv_bfloat16* C,
                  int64_t batch, int64_t M, int64_t N, int64_t K, float* workspace, cudaStream_t stream);
