// Launchers of exercise 07, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// The sizes and parameters of one NCHW transposed convolution. Per-image offsets fit in an int (the
// binding checks it); the batch index is 64-bit. With groups g, input channels g * cin/groups ..
// (g+1) * cin/groups - 1 feed only output channels g * cout/groups .. (g+1) * cout/groups - 1.
struct ConvTranspose2dShape {
  int64_t n;            // batch size
  int cin, h, w;        // input channels and height x width
  int cout, kh, kw;     // output channels and kernel height x width
  int ho, wo;           // output height x width
  int stride_h, stride_w;
  int pad_h, pad_w;
  int dil_h, dil_w;     // (output_padding only changes ho and wo)
  int groups;           // divides cin and cout; the weight is (cin, cout / groups, kh, kw)
};

// y = conv_transpose2d(x, weight, groups) + bias, with x (n, cin, h, w), weight (cin, cout / groups,
// kh, kw), bias (cout) or nullptr, y (n, cout, ho, wo), all contiguous. version 1: the gather kernel;
// 2: the implicit GEMM (n * ho * wo below 2^31, groups up to 65535). Launched on `stream`.
template <typename scalar_t>
void conv_transpose2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                           const ConvTranspose2dShape& s, int version, cudaStream_t stream);

// Version 3: Winograd F(4x4, 3x3), for 3 x 3 kernels at stride 1 and dilation 1 (the binding checks),
// float32 or float64: three transforms around version 2's kernel as one grouped 1 x 1 product, in a
// workspace of conv_transpose2d_workspace3(s) elements of the data's type (36 (cin cout / groups +
// (cin + cout) tiles) + tiles, a tile being 4 x 4 outputs of one image). 36 cin tiles, 36 cout tiles and
// 36 groups must fit version 2's limits (the binding checks).
int64_t winograd_tiles(const ConvTranspose2dShape& s);
int64_t conv_transpose2d_workspace3(const ConvTranspose2dShape& s);
template <typename scalar_t>
void conv_transpose2d_winograd_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                                    const ConvTranspose2dShape& s, scalar_t* workspace, cudaStream_t stream);
