// Exercise 07: transposed 2-D convolution (NCHW, groups = 1) as a gather, and its launcher.
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, checks, output sizes and op registration live in conv_transpose2d.cpp.
#include <course/cuda.cuh>

#include "conv_transpose2d.h"

namespace {

// The input row (or column) whose scatter reaches output position o through the tap at offset
// k_off = k * dilation, or -1 when none does: o + pad - k_off must be a non-negative multiple of the
// stride, and the quotient a position inside the input (0 <= i < in_size).
__device__ __forceinline__ int source_index(int o, int k_off, int pad, int stride, int in_size) {
  const int t = o + pad - k_off;
  if (t < 0 || t % stride != 0) return -1;
  const int i = t / stride;
  return i < in_size ? i : -1;
}

// Gather: 1D grid-stride loop, one thread per output element y[n][co][oh][ow] (ow fastest, so a
// warp reads neighbouring input pixels and all its threads read the same weight); each thread
// loops over the kernel taps that reach it and, for each, over the input channels.
template <typename scalar_t>
__global__ void conv_transpose2d_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                                        const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                                        ConvTranspose2dShape s) {
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    // BEGIN SOLUTION
    // GOAL: y[i] for output element i: the transposed convolution of x with weight, plus bias.
    // TODO: split i into (n, co, oh, ow), ow fastest, and set y[i] = bias[co] (0 when bias is nullptr)
    // TODO: + the sum over the taps (kh, kw) that reach (oh, ow) (source_index gives their input
    // TODO: pixel (ih, iw), or -1) and over ci of x[n][ci][ih][iw] * weight[ci][co][kh][kw].
    const int ow = static_cast<int>(i % s.wo);
    int64_t t = i / s.wo;
    const int oh = static_cast<int>(t % s.ho);
    t /= s.ho;
    const int co = static_cast<int>(t % s.cout);
    const int64_t n = t / s.cout;
    const int hw = s.h * s.w;
    const int taps = s.kh * s.kw;
    const scalar_t* xn = x + n * s.cin * hw;
    scalar_t acc = bias ? bias[co] : scalar_t(0);
    for (int kh = 0; kh < s.kh; ++kh) {
      const int ih = source_index(oh, kh * s.dil_h, s.pad_h, s.stride_h, s.h);
      if (ih < 0) continue;
      for (int kw = 0; kw < s.kw; ++kw) {
        const int iw = source_index(ow, kw * s.dil_w, s.pad_w, s.stride_w, s.w);
        if (iw < 0) continue;
        const scalar_t* xp = xn + ih * s.w + iw;                      // x[n][0][ih][iw]
        const scalar_t* wp = weight + (co * s.kh + kh) * s.kw + kw;   // weight[0][co][kh][kw]
        for (int ci = 0; ci < s.cin; ++ci) acc += xp[ci * hw] * wp[ci * s.cout * taps];
      }
    }
    y[i] = acc;
    // END SOLUTION
  }
}

constexpr int kThreads = 256;

}  // namespace

template <typename scalar_t>
void conv_transpose2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                           const ConvTranspose2dShape& s, cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: run conv_transpose2d_kernel over every output element (maybe none) on `stream`; report a failed launch.
  // TODO: launch conv_transpose2d_kernel<scalar_t> on `stream` with kThreads threads per block and
  // TODO: course::grid_for(outputs, kThreads) blocks; return first when there is no output (a grid
  // TODO: of 0 blocks is an error); check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK().
  // STUB: TORCH_CHECK(false, "conv_transpose2d_cuda (conv_transpose2d.cu) is not implemented yet");
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  if (total == 0) return;
  conv_transpose2d_kernel<scalar_t><<<course::grid_for(total, kThreads), kThreads, 0, stream>>>(x, weight, bias, y, s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T)                                                                                \
  template void conv_transpose2d_cuda<T>(const T*, const T*, const T*, T*, const ConvTranspose2dShape&, \
                                         cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
