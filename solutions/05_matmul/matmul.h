// Launchers of exercise 05, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// C (M x N) = A (M x K) @ B (K x N), all float32, row-major and contiguous, launched on `stream`.
// One launcher per numbered kernel, from naive to fast. Each checks that its grid fits.
void matmul_cuda1(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
void matmul_cuda2(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
void matmul_cuda3(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
void matmul_cuda4(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
