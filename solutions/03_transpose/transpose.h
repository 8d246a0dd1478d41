// Launchers of exercise 03, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// out (cols x rows, row-major) = transpose of in (rows x cols, row-major), launched on `stream`.
template <typename scalar_t>
void transpose_cuda(const scalar_t* in, scalar_t* out, int64_t rows, int64_t cols, cudaStream_t stream);
