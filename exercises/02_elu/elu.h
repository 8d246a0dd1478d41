// GENERATED from solutions/02_elu/elu.h by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Launchers of exercise 02, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// y[i] = elu(x[i]) for i < n, launched on `stream`.
template <typename scalar_t>
void elu_forward_cuda(const scalar_t* x, scalar_t* y, int64_t n, double alpha, cudaStream_t stream);

// grad_x[i] = grad_y[i] * (x[i] > 0 ? 1 : alpha * exp(x[i])) for i < n, launched on `stream`.
template <typename scalar_t>
void elu_backward_cuda(const scalar_t* grad_y, const scalar_t* x, scalar_t* grad_x, int64_t n,
                              double alpha, cudaStream_t stream);
