// GENERATED from solutions/01_leaky_relu/leaky_relu.cu by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 01: LeakyReLU forward and backward kernels and their launchers.
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, dtype dispatch and op registration live in leaky_relu.cpp.
#include <course/cuda.cuh>

#include "leaky_relu.h"

namespace {

template <typename opmath>
__device__ __forceinline__ opmath leaky_relu_value(opmath x, opmath negative_slope) {
  return x > opmath(0) ? x : x * negative_slope;
}

template <typename opmath>
__device__ __forceinline__ opmath leaky_relu_grad(opmath grad_y, opmath x, opmath negative_slope) {
  return x > opmath(0) ? grad_y : grad_y * negative_slope;
}

// 1D grid-stride loop over 16-byte vectors (one per thread per step), then the n % V tail
// elements one at a time (or all n, when a pointer is not 16-byte aligned). The launcher's grid
// covers the tensor, so the loop usually runs once; it keeps the kernel right for any grid.
template <typename scalar_t>
__global__ void leaky_relu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n,
                                  course::opmath_t<scalar_t> negative_slope) {
  // BEGIN SOLUTION
  // TODO: a grid-stride loop over all n elements, y[i] = leaky_relu_value(x[i], negative_slope),
  // TODO: computed in course::opmath_t<scalar_t>. Index with int64_t (n may exceed 2^31) and
  // TODO: never touch y[n] or beyond. The launcher's grid has a thread per 16-byte vector
  // TODO: (course::kVec16<scalar_t> elements), so a scalar loop takes that many steps per thread: it
  // TODO: is right, but the speed tiers are set by the reference's vector loads (README: Budget).
  // TODO: (the reference solution takes about 15 lines)
  // END SOLUTION
}

// Same geometry as leaky_relu_kernel, reading two inputs per element.
template <typename scalar_t>
__global__ void leaky_relu_backward_kernel(const scalar_t* __restrict__ grad_y, const scalar_t* __restrict__ x,
                                           scalar_t* __restrict__ grad_x, int64_t n,
                                           course::opmath_t<scalar_t> negative_slope) {
  // BEGIN SOLUTION
  // TODO: a grid-stride loop over all n elements, grad_x[i] = leaky_relu_grad(grad_y[i], x[i], negative_slope),
  // TODO: in the forward kernel's grid.
  // TODO: (the reference solution takes about 16 lines)
  // END SOLUTION
}

[[maybe_unused]] constexpr int kThreads = 256;

// Blocks for n elements: a thread per 16-byte vector, covering the tensor (course::cover_grid
// says why that beats a grid of one occupancy wave here).
template <typename scalar_t>
unsigned blocks_for(int64_t n) {
  return course::cover_grid(course::ceil_div<int64_t>(n, course::kVec16<scalar_t>), kThreads);
}

}  // namespace

template <typename scalar_t>
void leaky_relu_forward_cuda(const scalar_t* x, scalar_t* y, int64_t n, double negative_slope, cudaStream_t stream) {
  // (planner paths: the kernel's 16-byte loop or its scalar one, a pointer off 16 bytes; n past 2^31)
  if (n > 0) course::took<scalar_t>(course::is_aligned16(x, y) ? "forward.vector16" : "forward.scalar");
  if (n >= (int64_t(1) << 31)) course::took<scalar_t>("forward.past_2^31");
  // BEGIN SOLUTION
  // TODO: launch leaky_relu_kernel on `stream`, blocks_for<scalar_t>(n) blocks of kThreads threads,
  // TODO: passing negative_slope as course::opmath_t<scalar_t>; check the launch with
  // TODO: C10_CUDA_KERNEL_LAUNCH_CHECK(). An empty grid is an error: return early when n == 0.
  // TODO: (the reference solution takes about 4 lines)
  TORCH_CHECK(false, "leaky_relu_forward_cuda (leaky_relu.cu) is not implemented yet");
  // END SOLUTION
}

template <typename scalar_t>
void leaky_relu_backward_cuda(const scalar_t* grad_y, const scalar_t* x, scalar_t* grad_x, int64_t n,
                              double negative_slope, cudaStream_t stream) {
  if (n > 0) course::took<scalar_t>(course::is_aligned16(grad_y, x, grad_x) ? "backward.vector16" : "backward.scalar");
  if (n >= (int64_t(1) << 31)) course::took<scalar_t>("backward.past_2^31");
  // BEGIN SOLUTION
  // TODO: launch leaky_relu_backward_kernel like the forward launcher does.
  // TODO: (the reference solution takes about 4 lines)
  TORCH_CHECK(false, "leaky_relu_backward_cuda (leaky_relu.cu) is not implemented yet");
  // END SOLUTION
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T)                                                                                   \
  template void leaky_relu_forward_cuda<T>(const T*, T*, int64_t, double, cudaStream_t);               \
  template void leaky_relu_backward_cuda<T>(const T*, const T*, T*, int64_t, double, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(c10::Half)
INSTANTIATE(c10::BFloat16)
