// GENERATED from solutions/01_leaky_relu/leaky_relu.h by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Launchers of exercise 01, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// y[i] = leaky_relu(x[i]) for i < n, launched on `stream`.
template <typename scalar_t>
void leaky_relu_forward_cuda(const scalar_t* x, scalar_t* y, int64_t n, double negative_slope, cudaStream_t stream);

// grad_x[i] = grad_y[i] * (x[i] > 0 ? 1 : negative_slope) for i < n, launched on `stream`.
template <typename scalar_t>
void leaky_relu_backward_cuda(const scalar_t* grad_y, const scalar_t* x, scalar_t* grad_x, int64_t n,
                              double negative_slope, cudaStream_t stream);
