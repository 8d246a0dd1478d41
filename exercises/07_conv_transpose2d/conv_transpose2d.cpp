// GENERATED from solutions/07_conv_transpose2d/conv_transpose2d.cpp by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 07: the op's C++ front end. Argument checks, output size, dtype dispatch, stream, and
// registration.
#include <algorithm>
#include <array>
#include <climits>
#include <optional>
#include <string>

#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "conv_transpose2d.h"

namespace {

using Pair = std::array<int64_t, 2>;  // (height, width)

using course::str;  // messages pass only strings to TORCH_CHECK (see course/ops.h)

std::string pair_of(const Pair& v) { return str(at::IntArrayRef(v)); }

// stride, padding, output_padding and dilation arrive as int[] lists: two values, small enough for an int.
Pair pair_arg(at::IntArrayRef v, const char* name) {
  TORCH_CHECK(v.size() == 2, name, " must have 2 values (height, width), but is ", str(v));
  for (int64_t e : v) TORCH_CHECK(e > -(1 << 24) && e < (1 << 24), name, " values must be below 2^24, but are ", str(v));
  return {v[0], v[1]};
}

// Output length along one axis: where the last input position's kernel footprint ends, less the
// padding cropped at both ends, plus output_padding extra positions at the end.
int64_t conv_transpose_output_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t output_pad,
                                   int64_t dil) {
  int64_t out = 0;
  // BEGIN SOLUTION
  // TODO: the output length that F.conv_transpose2d gives (the input length of a conv2d with these
  // TODO: parameters, whose output length is `in`; output_padding resolves the ambiguity of a stride > 1).
  // TODO: (the reference solution takes about 1 line)
  TORCH_CHECK(false, "conv_transpose_output_size (conv_transpose2d.cpp) is not implemented yet");
  // END SOLUTION
  return out;
}

// Reject every argument the kernel cannot handle, with a message naming the argument.
void check_conv_transpose_args(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               const Pair& stride, const Pair& padding, const Pair& output_padding, int64_t groups,
                               const Pair& dilation) {
  // BEGIN SOLUTION
  // TODO: x: a CUDA tensor of float32 or float64 with 4 dimensions (N, C, H, W) (see course/ops.h).
  // TODO: groups >= 1 and dividing x.size(1) (name groups and x).
  // TODO: weight: 4 dimensions (cin, cout / groups, kh, kw), on x's device, of x's dtype, with
  // TODO: weight.size(0) == x.size(1) whatever the groups (not x.size(1) / groups, as conv2d's would be).
  // TODO: bias (when given): 1 dimension of size cout = weight.size(1) * groups, on x's device, of x's dtype.
  // TODO: stride and dilation > 0, padding >= 0, 0 <= output_padding < max(stride, dilation) (as
  // TODO: PyTorch), and an output of at least one row and column: name the argument.
  // TODO: (the reference solution takes about 37 lines)
  // END SOLUTION
}

at::Tensor conv_transpose2d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                            int64_t groups, at::IntArrayRef dilation, int64_t version) {
  TORCH_CHECK(version >= 1 && version <= 3, "version must be 1 (gather), 2 (implicit GEMM) or 3 (Winograd), but is ",
              str(version));
  const Pair st = pair_arg(stride, "stride"), pd = pair_arg(padding, "padding");
  const Pair op = pair_arg(output_padding, "output_padding"), dl = pair_arg(dilation, "dilation");
  check_conv_transpose_args(x, weight, bias, st, pd, op, groups, dl);
  const int64_t ho = conv_transpose_output_size(x.size(2), weight.size(2), st[0], pd[0], op[0], dl[0]);
  const int64_t wo = conv_transpose_output_size(x.size(3), weight.size(3), st[1], pd[1], op[1], dl[1]);
  // The kernel indexes within one image with int (the batch index is 64-bit).
  TORCH_CHECK(x.size(1) * x.size(2) * x.size(3) < INT_MAX, "x: one image of ", str(x.sizes()), " has 2^31 or more elements");
  TORCH_CHECK(weight.numel() < INT_MAX, "weight has 2^31 or more elements");
  const int64_t cout = weight.size(1) * groups;
  TORCH_CHECK(cout < INT_MAX && cout * ho * wo < INT_MAX, "the output of one image has 2^31 or more elements");
  // version 2's GEMM numbers its columns, the output pixels of the whole batch, with int
  TORCH_CHECK(version == 1 || x.size(0) * ho * wo < INT_MAX, "x: version 2 takes at most 2^31 - 1 output pixels (",
              str(x.size(0)), " images of ", str(ho), " x ", str(wo), "); version 1 takes more");
  // version 2 runs one grid layer per group (gridDim.z)
  TORCH_CHECK(version == 1 || groups <= 65535, "groups: version 2 takes at most 65535 groups, but groups is ",
              str(groups), "; version 1 takes more");
  if (version == 3) {  // Winograd F(4x4, 3x3): 3 x 3 kernels at stride 1 and dilation 1 only
    TORCH_CHECK(weight.size(2) == 3 && weight.size(3) == 3, "weight: version 3 (Winograd) takes 3 x 3 kernels, but "
                "weight has shape ", str(weight.sizes()), "; versions 1 and 2 take any");
    TORCH_CHECK(st[0] == 1 && st[1] == 1, "stride: version 3 (Winograd) takes stride 1, but stride is ", pair_of(st));
    TORCH_CHECK(dl[0] == 1 && dl[1] == 1, "dilation: version 3 (Winograd) takes dilation 1, but dilation is ",
                pair_of(dl));
    // its 36 products are version 2 on one image of 36 cin channels by (N ho / 4 wo / 4) tiles
    const int64_t tiles = x.size(0) * ((ho + 3) / 4) * ((wo + 3) / 4);
    TORCH_CHECK(36 * std::max(x.size(1), cout) * tiles < INT_MAX, "x: version 3 (Winograd) transforms it into 36 x ",
                str(std::max(x.size(1), cout)), " channels x ", str(tiles), " tiles, 2^31 elements or more; version 2 "
                "takes it");
    TORCH_CHECK(36 * groups <= 65535, "groups: version 3 (Winograd) takes at most 1820 groups (36 products each), "
                "but groups is ", str(groups), "; version 2 takes more");
  }

  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = weight.contiguous();
  const at::Tensor bc = bias.has_value() ? bias->contiguous() : at::Tensor();
  at::Tensor y = at::empty({x.size(0), cout, ho, wo}, xc.options());

  ConvTranspose2dShape s;
  s.n = x.size(0);
  s.cin = static_cast<int>(x.size(1));
  s.h = static_cast<int>(x.size(2));
  s.w = static_cast<int>(x.size(3));
  s.cout = static_cast<int>(cout);
  s.kh = static_cast<int>(weight.size(2));
  s.kw = static_cast<int>(weight.size(3));
  s.ho = static_cast<int>(ho);
  s.wo = static_cast<int>(wo);
  s.stride_h = static_cast<int>(st[0]);
  s.stride_w = static_cast<int>(st[1]);
  s.pad_h = static_cast<int>(pd[0]);
  s.pad_w = static_cast<int>(pd[1]);
  s.dil_h = static_cast<int>(dl[0]);
  s.dil_w = static_cast<int>(dl[1]);
  s.groups = static_cast<int>(groups);
  if (version == 3) {
    const at::Tensor workspace = at::empty({conv_transpose2d_workspace3(s)}, xc.options());
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "conv_transpose2d", [&] {
      conv_transpose2d_winograd_cuda<scalar_t>(xc.const_data_ptr<scalar_t>(), wc.const_data_ptr<scalar_t>(),
                                               bc.defined() ? bc.const_data_ptr<scalar_t>() : nullptr,
                                               y.mutable_data_ptr<scalar_t>(), s,
                                               workspace.mutable_data_ptr<scalar_t>(), c10::cuda::getCurrentCUDAStream());
    });
    return y;
  }
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "conv_transpose2d", [&] {
    conv_transpose2d_cuda<scalar_t>(xc.const_data_ptr<scalar_t>(), wc.const_data_ptr<scalar_t>(),
                                    bc.defined() ? bc.const_data_ptr<scalar_t>() : nullptr,
                                    y.mutable_data_ptr<scalar_t>(), s, static_cast<int>(version),
                                    c10::cuda::getCurrentCUDAStream());
  });
  return y;
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def(
      "conv_transpose2d(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] output_padding, "
      "int groups, int[] dilation, int version) -> Tensor");
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check
// ("x must be a CUDA tensor") instead of the dispatcher's generic error.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("conv_transpose2d", &conv_transpose2d);
}
