// GENERATED from solutions/06_conv2d/conv2d.h by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Launchers of exercise 06, shared by the kernel file and the binding file.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

// The sizes and parameters of one NCHW convolution. Per-image offsets fit in an int (the binding
// checks it); the batch index is 64-bit. With groups g, output channels g * cout/groups ..
// (g+1) * cout/groups - 1 read only input channels g * cin/groups .. (g+1) * cin/groups - 1.
struct Conv2dShape {
  int64_t n;            // batch size
  int cin, h, w;        // input channels and height x width
  int cout, kh, kw;     // output channels and kernel height x width
  int ho, wo;           // output height x width
  int stride_h, stride_w;
  int pad_h, pad_w;
  int dil_h, dil_w;
  int groups;           // divides cin and cout; the weight is (cout, cin / groups, kh, kw)
};

// y = conv2d(x, weight, groups) + bias, with x (n, cin, h, w), weight (cout, cin / groups, kh, kw),
// bias (cout) or nullptr, y (n, cout, ho, wo), all contiguous. version 1: the direct kernel; version
// 2: the tiled implicit GEMM, or the depthwise kernel where groups == cin (each output channel reads
// one input channel); version 3: the implicit GEMM on TF32 tensor cores (float only, groups == 1,
// compute capability 8.0 and newer). Launched on `stream`. Where conv2d_weight_scratch says so,
// version 3 first writes the weight with its channels innermost, (cout, kh, kw, cin), into
// `weight_scratch` (that many elements, 16-byte aligned, allocated by the caller); else it is unused.
template <typename scalar_t>
void conv2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y, const Conv2dShape& s,
                 int version, scalar_t* weight_scratch, cudaStream_t stream);

// Whether conv2d_cuda needs `weight_scratch`: version 3 with whole steps of 16 channels (the
// channels-innermost order of its K; conv2d.cu says why).
inline bool conv2d_weight_scratch(const Conv2dShape& s, int version) { return version == 3 && s.cin % 16 == 0; }
