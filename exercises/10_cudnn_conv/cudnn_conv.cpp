// GENERATED from solutions/10_cudnn_conv/cudnn_conv.cpp by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 10: the ops' C++ front end. Input checks, output shapes, the math mode, the stream, and
// registration. The cuDNN work (plans, cache, calls) is in cudnn_conv.cu.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <course/ops.h>

#include "cudnn_conv.h"

namespace {

using c10::IntArrayRef;

using course::str;  // messages pass only strings to TORCH_CHECK (see course/ops.h)

// stride, padding and dilation: two values (height, width), each at least `min`.
std::array<int64_t, 2> pair_arg(IntArrayRef v, const char* name, int64_t min) {
  TORCH_CHECK(v.size() == 2, name, " must have 2 values (height, width), but has ", str(v.size()), ": ", str(v));
  TORCH_CHECK(v[0] >= min && v[1] >= min, name, " must be at least ", str(min), ", but is ", str(v));
  TORCH_CHECK(v[0] <= std::numeric_limits<int>::max() && v[1] <= std::numeric_limits<int>::max(), name,
              " is too large for cuDNN: ", str(v));
  return {v[0], v[1]};
}

// cuDNN's 4-d descriptors take int32 sizes and strides: a tensor of 2^31 or more elements (or any
// dimension that large) cannot be described. A batch of images (x, the output, their gradients) runs
// in pieces of whole images where it is larger, as PyTorch's cuDNN path splits it (by_images); one image,
// or a weight, that large is refused here, naming the argument, instead of with a cuDNN status that
// names no limit.
constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();  // 2^31 - 1

// A 4-d shape cuDNN's int-based descriptors can hold: the whole tensor, or with `batch` one image of it
// (dimensions 1-3) and the batch below 2^31.
std::array<int64_t, 4> shape4(IntArrayRef s, const char* name, bool batch = false) {
  TORCH_CHECK(s.size() == 4, name, " must have 4 dimensions (N, C, H, W), but has shape ", str(s));
  int64_t numel = 1;
  for (size_t i = 0; i < 4; ++i) {
    TORCH_CHECK(s[i] > 0, name, " must have no empty or negative dimension, but has shape ", str(s));
    TORCH_CHECK(s[i] <= kMaxElements, name, " has shape ", str(s), ": a dimension of 2^31 or more, which cuDNN's "
                "4-d descriptors (int32 sizes) cannot describe");
    if (i == 0 && batch) continue;
    numel *= s[i];  // each factor is below 2^31 here, so the product cannot overflow int64
    TORCH_CHECK(numel <= kMaxElements, name, " has shape ", str(s), batch ? ": one image of 2^31 or more elements"
                : ": 2^31 or more elements", ", which cuDNN's 4-d descriptors (int32 sizes) cannot describe");
  }
  return {s[0], s[1], s[2], s[3]};
}

void check_tensor(const at::Tensor& t, const char* name) {
  course::check_cuda(t, name);
  course::check_dtype(t, {at::kFloat, at::kDouble}, name);
  TORCH_CHECK(t.dim() == 4, name, " must have 4 dimensions (N, C, H, W), but has shape ", str(t.sizes()));
}

void check_like(const at::Tensor& t, const char* name, const at::Tensor& ref, const char* ref_name) {
  TORCH_CHECK(t.device() == ref.device(), name, " must be on the same device as ", ref_name, " (",
              ref.device().str(), "), but is on ", t.device().str());
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), name, " must have the same dtype as ", ref_name, " (",
              std::string(c10::toString(ref.scalar_type())), "), but has ", std::string(c10::toString(t.scalar_type())));
}

// Output size of one spatial dimension; the dilated kernel must fit in the padded input.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, const char* dim) {
  const int64_t span = d * (k - 1) + 1;
  TORCH_CHECK(in + 2 * p >= span, "the kernel (", dim, " ", str(k), ", dilation ", str(d), ", so ", str(span),
              " wide) is larger than the padded input x (", dim, " ", str(in), " + 2 * padding ", str(p), ")");
  return (in + 2 * p - span) / s + 1;
}

// A contiguous NCHW copy only where needed, 16-byte aligned (some algorithms need aligned pointers).
at::Tensor dense(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  if (reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 != 0) c = c.clone();
  return c;
}

// What each op calls the convolution's three tensors in its messages: the names of its own arguments.
struct Names {
  const char* x;  // the convolution's input: "x", or "input_size" (backward-data), "output_size" (transposed)
  const char* w;  // its filter: "weight", or "weight_size" (backward-filter)
  const char* y;  // its output: "the output", or "grad_output" (the gradients), "x" (transposed)
};

// cuDNN's data type for a tensor's (float64 or float32: check_tensor refuses the others).
cudnnDataType_t cudnn_dtype(at::ScalarType t) { return t == at::kDouble ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

// Everything but the buffers: shapes, parameters, groups, math mode, device and stream.
conv::Args make_args(conv::Op op, IntArrayRef x_shape, IntArrayRef w_shape, IntArrayRef stride,
                     IntArrayRef padding, IntArrayRef dilation, int64_t groups, at::ScalarType dtype, int64_t mode,
                     const Names& names) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "mode must be 0 (uncached), 1 (heuristic) or 2 (benchmark), but is ", str(mode));
  TORCH_CHECK(groups >= 1, "groups must be at least 1, but is ", str(groups));
  conv::Args a;
  a.op = op;
  a.mode = static_cast<conv::Mode>(mode);
  a.dtype = cudnn_dtype(dtype);
  // Read per call, so that torch.backends.cudnn.allow_tf32 takes effect at once (it is in the key).
  a.allow_tf32 = dtype == at::kFloat && at::globalContext().allowTF32CuDNN();
  a.x = shape4(x_shape, names.x, /*batch=*/true);
  a.w = shape4(w_shape, names.w);
  a.stride = pair_arg(stride, "stride", 1);
  a.padding = pair_arg(padding, "padding", 0);
  a.dilation = pair_arg(dilation, "dilation", 1);
  a.groups = groups;  // below 2^31 from here on: it divides a dimension that is
  // groups split x's channels and w's output channels alike; w holds one group's input channels
  TORCH_CHECK(a.x[1] % groups == 0, names.x, " has ", str(a.x[1]), " channels (dimension 1), which groups (",
              str(groups), ") does not divide: each group must have as many channels");
  TORCH_CHECK(a.w[0] % groups == 0, names.w, " has ", str(a.w[0]), " filters (dimension 0), which groups (",
              str(groups), ") does not divide: each group must have as many filters");
  TORCH_CHECK(a.w[1] * groups == a.x[1], names.w, " must have ", names.x, "'s ", str(a.x[1]), " channels / groups ",
              str(groups), " = ", str(a.x[1] / groups), " in dimension 1, but has shape ", str(w_shape), " (",
              names.x, " has shape ", str(x_shape), ")");
  a.y = {a.x[0], a.w[0], out_size(a.x[2], a.w[2], a.stride[0], a.padding[0], a.dilation[0], "height"),
         out_size(a.x[3], a.w[3], a.stride[1], a.padding[1], a.dilation[1], "width")};
  // one image of the output has cuDNN's limit too: refused here, not with a cuDNN status at run time
  TORCH_CHECK(a.y[1] * a.y[2] * a.y[3] <= kMaxElements, names.y, " has shape ", str(at::IntArrayRef(a.y)),
              " (the convolution of ", names.x, " ", str(x_shape), " with ", names.w, " ", str(w_shape),
              "): one image of 2^31 or more elements, which cuDNN's 4-d descriptors (int32 sizes) cannot describe");
  return a;
}

// Images a cuDNN call takes at most, each of `per_image` elements in its largest tensor: as many as a
// descriptor holds (the whole batch where it fits).
int64_t images_per_call(int64_t per_image) { return std::max<int64_t>(1, kMaxElements / per_image); }

// Runs `call(piece, n0)` on images [n0, n0 + piece.x[0]) of the batch in turn: as many images a piece as
// cuDNN's descriptors hold in x and in the output (the whole batch where it fits, one call).
template <class Call>
void by_images(const conv::Args& a, Call&& call) {
  const int64_t images = images_per_call(std::max(a.x[1] * a.x[2] * a.x[3], a.y[1] * a.y[2] * a.y[3]));
  // (planner paths: course/paths.h) a batch split into pieces, per cuDNN call
  if (images < a.x[0]) course::took(a.op == conv::Op::kForward ? "pieces.forward"
                                    : a.op == conv::Op::kBackwardData ? "pieces.backward_data" : "pieces.backward_filter");
  for (int64_t n0 = 0; n0 < a.x[0]; n0 += images) {
    conv::Args piece = a;
    piece.x[0] = piece.y[0] = std::min(images, a.x[0] - n0);
    call(piece, n0);
  }
}

// Images [n0, n0 + n) of a dense batch, 16-byte aligned (a copy where the piece's offset is not).
at::Tensor images_of(const at::Tensor& t, int64_t n0, int64_t n) {
  return n == t.size(0) ? t : dense(t.narrow(0, n0, n));
}

// Writes images [n0, n0 + n) of `out` (dense) by `write(pointer)`: in place where the piece is 16-byte
// aligned, else into a copy then copied in, on the current stream either way.
template <class Write>
void write_images(at::Tensor& out, int64_t n0, int64_t n, Write&& write) {
  at::Tensor piece = n == out.size(0) ? out : out.narrow(0, n0, n);
  if (reinterpret_cast<uintptr_t>(piece.const_data_ptr()) % 16 == 0) {
    write(piece.mutable_data_ptr());
    return;
  }
  at::Tensor aligned = at::empty_like(piece);
  write(aligned.mutable_data_ptr());
  piece.copy_(aligned);
}

// The optional bias: null for none, else its (dense) data, checked to be one value per output channel
// on `like`'s device and of its dtype. `keep` holds the dense copy alive for the call.
const void* bias_of(const std::optional<at::Tensor>& bias, int64_t channels, const at::Tensor& like,
                    const char* like_name, at::Tensor* keep) {
  if (!bias.has_value()) return nullptr;
  const at::Tensor& b = *bias;
  course::check_cuda(b, "bias");
  course::check_dtype(b, {at::kFloat, at::kDouble}, "bias");
  check_like(b, "bias", like, like_name);
  TORCH_CHECK(b.dim() == 1 && b.size(0) == channels, "bias must have shape [", str(channels),
              "] (one value per output channel), but has shape ", str(b.sizes()));
  *keep = dense(b);
  return keep->const_data_ptr();
}

// A tensor the op was given in the role of the convolution's output (grad_output, or the transposed
// convolution's x) must have the shape the convolution gives.
void check_output_shape(const at::Tensor& t, const conv::Args& a, const Names& names, IntArrayRef x_shape) {
  TORCH_CHECK(t.sizes() == IntArrayRef(a.y), names.y, " must have shape ", str(IntArrayRef(a.y)), " (what the "
              "convolution of ", names.x, " of shape ", str(x_shape), " with ", names.w, " gives), but has shape ",
              str(t.sizes()));
}

void run_on(const at::Tensor& any, conv::Args& a, const conv::Buffers& b) {
  a.device = any.get_device();
  a.stream = c10::cuda::getCurrentCUDAStream(a.device).stream();
  conv::run(a, b);
}

// y = conv2d(x, weight) + bias: cudnnConvolutionForward, then cudnnAddTensor.
at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups, int64_t mode) {
  check_tensor(x, "x");
  check_tensor(weight, "weight");
  check_like(weight, "weight", x, "x");
  const Names names{"x", "weight", "the output"};
  conv::Args a = make_args(conv::Op::kForward, x.sizes(), weight.sizes(), stride, padding, dilation, groups,
                           x.scalar_type(), mode, names);
  at::Tensor bc;
  const void* b = bias_of(bias, a.y[1], x, "x", &bc);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = dense(x), wc = dense(weight);
  at::Tensor y = at::empty(a.y, x.options());
  by_images(a, [&](conv::Args& piece, int64_t n0) {
    const at::Tensor xs = images_of(xc, n0, piece.x[0]);
    write_images(y, n0, piece.y[0], [&](void* out) {
      run_on(x, piece, {const_cast<void*>(xs.const_data_ptr()), const_cast<void*>(wc.const_data_ptr()), out, b});
    });
  });
  return y;
}

// grad_x of y = conv2d(x, weight) for x of shape input_size (the transposed convolution):
// cudnnConvolutionBackwardData.
at::Tensor conv2d_backward_input(const at::Tensor& grad_output, const at::Tensor& weight, IntArrayRef input_size,
                                 IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups,
                                 int64_t mode) {
  check_tensor(grad_output, "grad_output");
  check_tensor(weight, "weight");
  check_like(weight, "weight", grad_output, "grad_output");
  const Names names{"input_size", "weight", "grad_output"};
  conv::Args a = make_args(conv::Op::kBackwardData, input_size, weight.sizes(), stride, padding, dilation, groups,
                           weight.scalar_type(), mode, names);
  check_output_shape(grad_output, a, names, input_size);
  const c10::cuda::CUDAGuard guard(weight.device());
  const at::Tensor gc = dense(grad_output), wc = dense(weight);
  at::Tensor grad_x = at::empty(a.x, weight.options());
  by_images(a, [&](conv::Args& piece, int64_t n0) {
    const at::Tensor gs = images_of(gc, n0, piece.y[0]);
    write_images(grad_x, n0, piece.x[0], [&](void* out) {
      run_on(weight, piece, {out, const_cast<void*>(wc.const_data_ptr()), const_cast<void*>(gs.const_data_ptr())});
    });
  });
  return grad_x;
}

// grad_weight of y = conv2d(x, weight) for weight of shape weight_size: cudnnConvolutionBackwardFilter.
at::Tensor conv2d_backward_weight(const at::Tensor& grad_output, const at::Tensor& x, IntArrayRef weight_size,
                                  IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups,
                                  int64_t mode) {
  check_tensor(grad_output, "grad_output");
  check_tensor(x, "x");
  check_like(grad_output, "grad_output", x, "x");
  const Names names{"x", "weight_size", "grad_output"};
  conv::Args a = make_args(conv::Op::kBackwardFilter, x.sizes(), weight_size, stride, padding, dilation, groups,
                           x.scalar_type(), mode, names);
  check_output_shape(grad_output, a, names, x.sizes());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor gc = dense(grad_output), xc = dense(x);
  at::Tensor grad_w = at::empty(a.w, x.options());
  // the pieces' gradients summed: the first piece's written in place, each other's added to it by cuDNN
  at::Tensor part;
  by_images(a, [&](conv::Args& piece, int64_t n0) {
    const at::Tensor xs = images_of(xc, n0, piece.x[0]), gs = images_of(gc, n0, piece.y[0]);
    if (n0 > 0 && !part.defined()) part = at::empty_like(grad_w);
    at::Tensor& into = n0 == 0 ? grad_w : part;
    run_on(x, piece, {const_cast<void*>(xs.const_data_ptr()), into.mutable_data_ptr(),
                      const_cast<void*>(gs.const_data_ptr())});
    if (n0 > 0) conv::add_into(piece.device, piece.stream, a.dtype, a.w, part.const_data_ptr(), grad_w.mutable_data_ptr());
  });
  return grad_w;
}

// grad_bias of y = conv2d(x, weight) + bias: grad_output summed over N, H and W
// (cudnnConvolutionBackwardBias).
at::Tensor conv2d_backward_bias(const at::Tensor& grad_output) {
  check_tensor(grad_output, "grad_output");
  const std::array<int64_t, 4> shape = shape4(grad_output.sizes(), "grad_output", /*batch=*/true);
  const c10::cuda::CUDAGuard guard(grad_output.device());
  const at::Tensor gc = dense(grad_output);
  at::Tensor grad_b = at::empty({shape[1]}, grad_output.options());
  const int device = grad_output.get_device();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  const cudnnDataType_t dtype = cudnn_dtype(grad_output.scalar_type());
  // as many images a piece as a descriptor holds, the pieces' sums added up
  const int64_t images = images_per_call(shape[1] * shape[2] * shape[3]);
  if (images < shape[0]) course::took("pieces.backward_bias");
  at::Tensor part;
  for (int64_t n0 = 0; n0 < shape[0]; n0 += images) {
    std::array<int64_t, 4> piece = shape;
    piece[0] = std::min(images, shape[0] - n0);
    const at::Tensor gs = images_of(gc, n0, piece[0]);
    if (n0 > 0 && !part.defined()) part = at::empty_like(grad_b);
    at::Tensor& into = n0 == 0 ? grad_b : part;
    conv::backward_bias(device, stream, dtype, piece, gs.const_data_ptr(), into.mutable_data_ptr());
    if (n0 > 0) conv::add_into(device, stream, dtype, {1, shape[1], 1, 1}, part.const_data_ptr(), grad_b.mutable_data_ptr());
  }
  return grad_b;
}

// y = conv_transpose2d(x, weight) + bias for y of shape output_size: the backward-data of the
// convolution of y with weight (C_in, C_out / groups, kH, kW), x in the role of its grad_output,
// then cudnnAddTensor.
at::Tensor conv_transpose2d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            IntArrayRef output_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                            int64_t groups, int64_t mode) {
  check_tensor(x, "x");
  check_tensor(weight, "weight");
  check_like(weight, "weight", x, "x");
  TORCH_CHECK(weight.size(0) == x.size(1), "weight must have x's ", str(x.size(1)), " input channels in dimension 0 "
              "(a transposed convolution's weight is (C_in, C_out / groups, kH, kW)), but has shape ",
              str(weight.sizes()), " (x has shape ", str(x.sizes()), ")");
  const Names names{"output_size", "weight", "x"};
  conv::Args a = make_args(conv::Op::kBackwardData, output_size, weight.sizes(), stride, padding, dilation, groups,
                           x.scalar_type(), mode, names);
  check_output_shape(x, a, names, output_size);
  at::Tensor bc;
  const void* b = bias_of(bias, a.x[1], x, "x", &bc);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = dense(x), wc = dense(weight);
  at::Tensor y = at::empty(a.x, x.options());
  by_images(a, [&](conv::Args& piece, int64_t n0) {
    const at::Tensor xs = images_of(xc, n0, piece.y[0]);
    write_images(y, n0, piece.x[0], [&](void* out) {
      run_on(x, piece, {out, const_cast<void*>(wc.const_data_ptr()), const_cast<void*>(xs.const_data_ptr()), b});
    });
  });
  return y;
}

// The output shape cuDNN's descriptors give (no GPU needed): descriptor set-up, testable anywhere.
// Only the ranks (and that groups fits an int) are checked here, so cuDNN's own checks (and error
// messages) are the ones seen.
std::vector<int64_t> describe(IntArrayRef x_size, IntArrayRef w_size, IntArrayRef stride, IntArrayRef padding,
                              IntArrayRef dilation, int64_t groups, bool float64) {
  TORCH_CHECK(x_size.size() == 4 && w_size.size() == 4, "x_size and w_size must have 4 values");
  TORCH_CHECK(stride.size() == 2 && padding.size() == 2 && dilation.size() == 2,
              "stride, padding and dilation must have 2 values");
  TORCH_CHECK(groups <= std::numeric_limits<int>::max(), "groups is too large for cuDNN: ", str(groups));
  conv::Args a;
  a.dtype = float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  std::copy(x_size.begin(), x_size.end(), a.x.begin());
  std::copy(w_size.begin(), w_size.end(), a.w.begin());
  std::copy(stride.begin(), stride.end(), a.stride.begin());
  std::copy(padding.begin(), padding.end(), a.padding.begin());
  std::copy(dilation.begin(), dilation.end(), a.dilation.begin());
  a.groups = groups;
  const conv::Plan plan = conv::describe(a);
  return {plan.y.begin(), plan.y.end()};
}

// hits, misses, evictions, size, capacity, largest workspace of a cached plan; then the launch
// cache's graph hits, captures, failures, graphs held, and whether it is on (1) or off (0)
std::vector<int64_t> cache_stats() {
  const conv::CacheStats s = conv::cache_stats();
  return {s.hits, s.misses, s.evictions, s.size, s.capacity, s.max_workspace_bytes,
          s.graph_hits, s.graph_captures, s.graph_failures, s.graphs, s.graphs_enabled ? 1 : 0};
}

void cache_clear() { conv::cache_clear(); }

void set_graphs(bool enabled) { conv::set_graphs(enabled); }

void cache_set_capacity(int64_t capacity) {
  TORCH_CHECK(capacity >= 1, "capacity must be at least 1, but is ", str(capacity));
  conv::cache_set_capacity(capacity);
}

}  // namespace

COURSE_LIBRARY(m) {
  m.def("conv2d(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, int[2] dilation, int groups, "
        "int mode) -> Tensor");
  m.def("conv2d_backward_input(Tensor grad_output, Tensor weight, int[4] input_size, int[2] stride, "
        "int[2] padding, int[2] dilation, int groups, int mode) -> Tensor");
  m.def("conv2d_backward_weight(Tensor grad_output, Tensor x, int[4] weight_size, int[2] stride, "
        "int[2] padding, int[2] dilation, int groups, int mode) -> Tensor");
  m.def("conv2d_backward_bias(Tensor grad_output) -> Tensor");
  m.def("conv_transpose2d(Tensor x, Tensor weight, Tensor? bias, int[4] output_size, int[2] stride, int[2] padding, "
        "int[2] dilation, int groups, int mode) -> Tensor");
  // No tensor arguments: these get a catch-all kernel.
  m.def("describe(int[] x_size, int[] w_size, int[] stride, int[] padding, int[] dilation, int groups, "
        "bool float64) -> int[]", &describe);
  m.def("cache_stats() -> int[]", &cache_stats);
  m.def("cache_clear() -> ()", &cache_clear);
  m.def("cache_set_capacity(int capacity) -> ()", &cache_set_capacity);
  m.def("set_graphs(bool enabled) -> ()", &set_graphs);
}

// CompositeExplicitAutograd: one kernel for every device, so a CPU tensor reaches our own check
// ("x must be a CUDA tensor") instead of the dispatcher's generic error. Gradients are defined in
// Python (cudnn_conv.py) with these same ops.
COURSE_LIBRARY_IMPL(CompositeExplicitAutograd, m) {
  m.impl("conv2d", &conv2d);
  m.impl("conv2d_backward_input", &conv2d_backward_input);
  m.impl("conv2d_backward_weight", &conv2d_backward_weight);
  m.impl("conv2d_backward_bias", &conv2d_backward_bias);
  m.impl("conv_transpose2d", &conv_transpose2d);
}
