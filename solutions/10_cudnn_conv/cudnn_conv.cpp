// Exercise 10: the ops' C++ front end. Input checks, output shapes, the math mode, the stream, and
// registration. The cuDNN work (plans, cache, calls) is in cudnn_conv.cu.
#include <limits>
#include <string>

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
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

// A 4-d shape cuDNN's int-based descriptors can hold (cuDNN also limits a tensor to < 2^31 elements).
std::array<int64_t, 4> shape4(IntArrayRef s, const char* name) {
  TORCH_CHECK(s.size() == 4, name, " must have 4 dimensions (N, C, H, W), but has shape ", str(s));
  int64_t numel = 1;
  for (int64_t d : s) {
    TORCH_CHECK(d > 0, name, " must have no empty or negative dimension, but has shape ", str(s));
    numel *= d;
    TORCH_CHECK(numel <= std::numeric_limits<int32_t>::max(), name, " has shape ", str(s),
                ": more than 2^31 - 1 elements, which cuDNN's 4-d descriptors cannot describe");
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

// Everything but the buffers: shapes, parameters, math mode, device and stream.
conv::Args make_args(conv::Op op, IntArrayRef x_shape, IntArrayRef w_shape, IntArrayRef stride,
                     IntArrayRef padding, IntArrayRef dilation, at::ScalarType dtype, int64_t mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "mode must be 0 (uncached), 1 (heuristic) or 2 (benchmark), but is ", str(mode));
  conv::Args a;
  a.op = op;
  a.mode = static_cast<conv::Mode>(mode);
  a.dtype = dtype == at::kDouble ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  // Read per call, so that torch.backends.cudnn.allow_tf32 takes effect at once (it is in the key).
  a.allow_tf32 = dtype == at::kFloat && at::globalContext().allowTF32CuDNN();
  a.x = shape4(x_shape, "x");
  a.w = shape4(w_shape, "weight");
  a.stride = pair_arg(stride, "stride", 1);
  a.padding = pair_arg(padding, "padding", 0);
  a.dilation = pair_arg(dilation, "dilation", 1);
  TORCH_CHECK(a.w[1] == a.x[1], "weight must have x's ", str(a.x[1]), " input channels in dimension 1, but has shape ",
              str(w_shape), " (x has shape ", str(x_shape), ")");
  a.y = {a.x[0], a.w[0], out_size(a.x[2], a.w[2], a.stride[0], a.padding[0], a.dilation[0], "height"),
         out_size(a.x[3], a.w[3], a.stride[1], a.padding[1], a.dilation[1], "width")};
  // the output's descriptor has cuDNN's limit too: refused here, not with a cuDNN status at run time
  TORCH_CHECK(a.y[0] * a.y[1] * a.y[2] * a.y[3] <= std::numeric_limits<int32_t>::max(), "x ", str(x_shape),
              " and weight ", str(w_shape), " give an output of shape ", str(at::IntArrayRef(a.y)),
              ": 2^31 or more elements, which cuDNN's 4-d descriptors cannot describe");
  return a;
}

void run_on(const at::Tensor& any, conv::Args& a, const conv::Buffers& b) {
  a.device = any.get_device();
  a.stream = c10::cuda::getCurrentCUDAStream(a.device).stream();
  conv::run(a, b);
}

// y = conv2d(x, weight): cudnnConvolutionForward.
at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, int64_t mode) {
  check_tensor(x, "x");
  check_tensor(weight, "weight");
  check_like(weight, "weight", x, "x");
  conv::Args a = make_args(conv::Op::kForward, x.sizes(), weight.sizes(), stride, padding, dilation,
                           x.scalar_type(), mode);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = dense(x), wc = dense(weight);
  at::Tensor y = at::empty(a.y, x.options());
  run_on(x, a, {const_cast<void*>(xc.const_data_ptr()), const_cast<void*>(wc.const_data_ptr()), y.mutable_data_ptr()});
  return y;
}

// grad_x of y = conv2d(x, weight) for x of shape input_size (the transposed convolution):
// cudnnConvolutionBackwardData.
at::Tensor conv2d_backward_input(const at::Tensor& grad_output, const at::Tensor& weight, IntArrayRef input_size,
                                 IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t mode) {
  check_tensor(grad_output, "grad_output");
  check_tensor(weight, "weight");
  check_like(weight, "weight", grad_output, "grad_output");
  conv::Args a = make_args(conv::Op::kBackwardData, input_size, weight.sizes(), stride, padding, dilation,
                           weight.scalar_type(), mode);
  TORCH_CHECK(grad_output.sizes() == IntArrayRef(a.y), "grad_output must have shape ", str(a.y),
              " (the output of a convolution of an input of shape ", str(input_size), "), but has shape ",
              str(grad_output.sizes()));
  const c10::cuda::CUDAGuard guard(weight.device());
  const at::Tensor gc = dense(grad_output), wc = dense(weight);
  at::Tensor grad_x = at::empty(a.x, weight.options());
  run_on(weight, a, {grad_x.mutable_data_ptr(), const_cast<void*>(wc.const_data_ptr()),
                     const_cast<void*>(gc.const_data_ptr())});
  return grad_x;
}

// grad_weight of y = conv2d(x, weight) for weight of shape weight_size: cudnnConvolutionBackwardFilter.
at::Tensor conv2d_backward_weight(const at::Tensor& grad_output, const at::Tensor& x, IntArrayRef weight_size,
                                  IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t mode) {
  check_tensor(grad_output, "grad_output");
  check_tensor(x, "x");
  check_like(grad_output, "grad_output", x, "x");
  conv::Args a = make_args(conv::Op::kBackwardFilter, x.sizes(), weight_size, stride, padding, dilation,
                           x.scalar_type(), mode);
  TORCH_CHECK(grad_output.sizes() == IntArrayRef(a.y), "grad_output must have shape ", str(a.y),
              " (the output of this convolution of x), but has shape ", str(grad_output.sizes()));
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor gc = dense(grad_output), xc = dense(x);
  at::Tensor grad_w = at::empty(a.w, x.options());
  run_on(x, a, {const_cast<void*>(xc.const_data_ptr()), grad_w.mutable_data_ptr(),
                const_cast<void*>(gc.const_data_ptr())});
  return grad_w;
}

// The output shape cuDNN's descriptors give (no GPU needed): descriptor set-up, testable anywhere.
// Only the ranks are checked here, so cuDNN's own checks (and error messages) are the ones seen.
std::vector<int64_t> describe(IntArrayRef x_size, IntArrayRef w_size, IntArrayRef stride, IntArrayRef padding,
                              IntArrayRef dilation, bool float64) {
  TORCH_CHECK(x_size.size() == 4 && w_size.size() == 4, "x_size and w_size must have 4 values");
  TORCH_CHECK(stride.size() == 2 && padding.size() == 2 && dilation.size() == 2,
              "stride, padding and dilation must have 2 values");
  conv::Args a;
  a.dtype = float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  std::copy(x_size.begin(), x_size.end(), a.x.begin());
  std::copy(w_size.begin(), w_size.end(), a.w.begin());
  std::copy(stride.begin(), stride.end(), a.stride.begin());
  std::copy(padding.begin(), padding.end(), a.padding.begin());
  std::copy(dilation.begin(), dilation.end(), a.dilation.begin());
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
  m.def("conv2d(Tensor x, Tensor weight, int[2] stride, int[2] padding, int[2] dilation, int mode) -> Tensor");
  m.def("conv2d_backward_input(Tensor grad_output, Tensor weight, int[4] input_size, int[2] stride, "
        "int[2] padding, int[2] dilation, int mode) -> Tensor");
  m.def("conv2d_backward_weight(Tensor grad_output, Tensor x, int[4] weight_size, int[2] stride, "
        "int[2] padding, int[2] dilation, int mode) -> Tensor");
  // No tensor arguments: these get a catch-all kernel.
  m.def("describe(int[] x_size, int[] w_size, int[] stride, int[] padding, int[] dilation, bool float64) -> int[]",
        &describe);
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
}
