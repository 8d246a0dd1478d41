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
  // GOAL: y[i] = leaky_relu_value(x[i], negative_slope) for every i < n, whatever the grid's size.
  // TODO: a grid-stride loop over all n elements, y[i] = leaky_relu_value(x[i], negative_slope),
  // TODO: computed in course::opmath_t<scalar_t>. Index with int64_t (n may exceed 2^31) and
  // TODO: never touch y[n] or beyond. The launcher's grid has a thread per 16-byte vector
  // TODO: (course::kVec16<scalar_t> elements), so a scalar loop takes that many steps per thread: it
  // TODO: is right, but the speed tiers are set by the reference's vector loads (README: Budget).
  using opmath = course::opmath_t<scalar_t>;
  constexpr int V = course::kVec16<scalar_t>;
  using Vec = course::Vec<scalar_t, V>;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t n_vec = course::is_aligned16(x, y) ? n / V : 0;
  for (int64_t i = first; i < n_vec; i += stride) {
    Vec v = reinterpret_cast<const Vec*>(x)[i];  // one 16-byte load (LDG.128) for V elements
#pragma unroll
    for (int k = 0; k < V; ++k) v.v[k] = leaky_relu_value<opmath>(v.v[k], negative_slope);
    reinterpret_cast<Vec*>(y)[i] = v;
  }
  for (int64_t i = n_vec * V + first; i < n; i += stride) {
    y[i] = leaky_relu_value<opmath>(x[i], negative_slope);
  }
  // END SOLUTION
}

// Same geometry as leaky_relu_kernel, reading two inputs per element.
template <typename scalar_t>
__global__ void leaky_relu_backward_kernel(const scalar_t* __restrict__ grad_y, const scalar_t* __restrict__ x,
                                           scalar_t* __restrict__ grad_x, int64_t n,
                                           course::opmath_t<scalar_t> negative_slope) {
  // BEGIN SOLUTION
  // GOAL: grad_x[i] = leaky_relu_grad(grad_y[i], x[i], negative_slope) for every i < n.
  // TODO: a grid-stride loop over all n elements, grad_x[i] = leaky_relu_grad(grad_y[i], x[i], negative_slope),
  // TODO: in the forward kernel's grid.
  using opmath = course::opmath_t<scalar_t>;
  constexpr int V = course::kVec16<scalar_t>;
  using Vec = course::Vec<scalar_t, V>;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t n_vec = course::is_aligned16(grad_y, x, grad_x) ? n / V : 0;
  for (int64_t i = first; i < n_vec; i += stride) {
    Vec g = reinterpret_cast<const Vec*>(grad_y)[i];
    const Vec v = reinterpret_cast<const Vec*>(x)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) g.v[k] = leaky_relu_grad<opmath>(g.v[k], v.v[k], negative_slope);
    reinterpret_cast<Vec*>(grad_x)[i] = g;
  }
  for (int64_t i = n_vec * V + first; i < n; i += stride) {
    grad_x[i] = leaky_relu_grad<opmath>(grad_y[i], x[i], negative_slope);
  }
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
  // GOAL: run leaky_relu_kernel over the n elements (n may be 0) on `stream`; report a failed launch.
  // TODO: launch leaky_relu_kernel on `stream`, blocks_for<scalar_t>(n) blocks of kThreads threads,
  // TODO: passing negative_slope as course::opmath_t<scalar_t>; check the launch with
  // TODO: C10_CUDA_KERNEL_LAUNCH_CHECK(). An empty grid is an error: return early when n == 0.
  // STUB: TORCH_CHECK(false, "leaky_relu_forward_cuda (leaky_relu.cu) is not implemented yet");
  if (n == 0) return;
  leaky_relu_kernel<scalar_t><<<blocks_for<scalar_t>(n), kThreads, 0, stream>>>(
      x, y, n, static_cast<course::opmath_t<scalar_t>>(negative_slope));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

template <typename scalar_t>
void leaky_relu_backward_cuda(const scalar_t* grad_y, const scalar_t* x, scalar_t* grad_x, int64_t n,
                              double negative_slope, cudaStream_t stream) {
  if (n > 0) course::took<scalar_t>(course::is_aligned16(grad_y, x, grad_x) ? "backward.vector16" : "backward.scalar");
  if (n >= (int64_t(1) << 31)) course::took<scalar_t>("backward.past_2^31");
  // BEGIN SOLUTION
  // GOAL: run leaky_relu_backward_kernel over the n elements (n may be 0) on `stream`; report a failed launch.
  // TODO: launch leaky_relu_backward_kernel like the forward launcher does.
  // STUB: TORCH_CHECK(false, "leaky_relu_backward_cuda (leaky_relu.cu) is not implemented yet");
  if (n == 0) return;
  leaky_relu_backward_kernel<scalar_t><<<blocks_for<scalar_t>(n), kThreads, 0, stream>>>(
      grad_y, x, grad_x, n, static_cast<course::opmath_t<scalar_t>>(negative_slope));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
