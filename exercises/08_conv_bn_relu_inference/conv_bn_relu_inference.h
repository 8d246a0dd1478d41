// GENERATED from solutions/08_conv_bn_relu_inference/conv_bn_relu_inference.h by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Launchers of exercise 08, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// A 2-D convolution's geometry: x [N, C, H, W], weight [K, C, R, S], output [N, K, P, Q].
// Every tensor has fewer than 2^31 elements (the binding checks), so 32-bit offsets suffice.
struct ConvShape {
  int N, C, H, W;
  int K, R, S;
  int P, Q;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};

// y = relu(gamma * (conv(x) + bias - running_mean) / sqrt(running_var + eps) + beta), in one kernel
// launched on `stream`; bias may be null. version 1: strict fp32 (or float64); version 2: the
// convolution's products on TF32 tensor cores (float only, compute capability 8.0 and newer).
template <typename scalar_t>
void conv_bn_relu_inference_cuda(const scalar_t* x, const scalar_t* w, const scalar_t* bias, const scalar_t* gamma,
                                 const scalar_t* beta, const scalar_t* running_mean, const scalar_t* running_var,
                                 double eps, const ConvShape& s, int version, scalar_t* y, cudaStream_t stream);
