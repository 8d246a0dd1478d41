// Launchers of exercise 09, shared by the kernel file and the binding file.
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

// Tiles of output pixels (columns of the forward GEMM) per image batch: the number of per-tile
// statistics the training forward writes per channel.
int conv_bn_relu_stat_tiles(const ConvShape& s);

// `version` (each launcher): 1, strict fp32 (or float64); 2, the convolutions on TF32 tensor cores
// (float only, compute capability 8.0 and newer).

// Training: z = conv(x) + bias; batch statistics; running-statistics update; y = relu(scale * z + shift).
// part: 2 * stat_tiles * K scratch; scale_shift: 2 * K scratch. momentum < 0 means a cumulative average.
template <typename scalar_t>
void conv_bn_relu_train_forward_cuda(const scalar_t* x, const scalar_t* w, const scalar_t* bias, const scalar_t* gamma,
                                     const scalar_t* beta, scalar_t* running_mean, scalar_t* running_var,
                                     int64_t* num_batches_tracked, double momentum, double eps, const ConvShape& s,
                                     scalar_t* z, scalar_t* y, scalar_t* save_mean, scalar_t* save_invstd,
                                     scalar_t* part, scalar_t* scale_shift, int version, cudaStream_t stream);

// Evaluation: y = relu(gamma * (conv(x) + bias - running_mean) / sqrt(running_var + eps) + beta) in one
// kernel; z (conv(x) + bias, for the backward) is written only when not null; save_mean/save_invstd
// receive the running statistics used.
template <typename scalar_t>
void conv_bn_relu_eval_forward_cuda(const scalar_t* x, const scalar_t* w, const scalar_t* bias, const scalar_t* gamma,
                                    const scalar_t* beta, const scalar_t* running_mean, const scalar_t* running_var,
                                    double eps, const ConvShape& s, scalar_t* z, scalar_t* y, scalar_t* save_mean,
                                    scalar_t* save_invstd, int version, cudaStream_t stream);

// Scratch sizes of the backward (elements of scalar_t).
int64_t conv_bn_relu_backward_scratch(const ConvShape& s);

// The whole backward: grad_x, grad_w, grad_bias, grad_gamma, grad_beta from grad_y and the saved
// tensors (z = conv output before BatchNorm, y = the op's output, mean/invstd = statistics used).
template <typename scalar_t>
void conv_bn_relu_backward_cuda(const scalar_t* grad_y, const scalar_t* x, const scalar_t* w, const scalar_t* z,
                                const scalar_t* y, const scalar_t* gamma, const scalar_t* mean, const scalar_t* invstd,
                                bool training, int version, const ConvShape& s, scalar_t* grad_x, scalar_t* grad_w,
                                scalar_t* grad_bias, scalar_t* grad_gamma, scalar_t* grad_beta, scalar_t* u,
                                scalar_t* scratch, cudaStream_t stream);
