// Launchers of exercise 04, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// The largest filter: K x K with K odd and at most 7 (the size of the __constant__ buffer).
constexpr int kMaxFilter = 7;

// Copies the K x K filter (device memory, row-major) into the kernel's __constant__ buffer, on `stream`.
void stencil2d_set_filter(const float* filter, int k, cudaStream_t stream);

// out[b][y][x] = sum over dy, dx < k of filter[dy][dx] * in[b][y + dy - k/2][x + dx - k/2], with
// zeros outside the image, for `batch` images of height x width floats; launched on `stream`
// (call stencil2d_set_filter first, on the same stream).
void stencil2d_cuda(const float* in, float* out, int64_t batch, int64_t height, int64_t width, int k,
                    cudaStream_t stream);
