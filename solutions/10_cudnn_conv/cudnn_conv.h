// Exercise 10: a cuDNN convolution with cached plans. Shared by the plan file (cudnn_conv.cu) and
// the binding file (cudnn_conv.cpp); it includes no ATen tensor headers, so the plan file builds fast.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>
#include <cudnn.h>
#include <c10/util/Exception.h>

// Every cuDNN call goes through this: a failed status becomes a Python RuntimeError naming the call,
// cuDNN's status string and, where cuDNN 9 has one, its own explanation of the failure.
#define CUDNN_CHECK(expr)                                                                              \
  do {                                                                                                 \
    const cudnnStatus_t status_ = (expr);                                                              \
    if (status_ != CUDNN_STATUS_SUCCESS) {                                                             \
      TORCH_CHECK(false, "cuDNN error ", cudnnGetErrorString(status_), " in ", #expr, conv::last_cudnn_error()); \
    }                                                                                                  \
  } while (0)

namespace conv {

// cuDNN 9 keeps a message about the last failure; an empty string before 9.0.
std::string last_cudnn_error();

// The three convolutions one plan can run. Names follow cuDNN: x input, w filter, y output.
enum class Op : int64_t { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

// How an algorithm is chosen, and whether plans are kept.
enum class Mode : int64_t {
  kUncached = 0,   // build descriptors, ask the heuristic and destroy everything on every call
  kHeuristic = 1,  // cached; algorithm from cuDNN's heuristic (cudnnGet...Algorithm_v7), no GPU time
  kBenchmark = 2,  // cached; algorithm from timing every candidate once (cudnnFind...AlgorithmEx)
};

// What the binding knows about one call. Shapes are NCHW (x, y) and KCRS (w). With groups g, the
// C channels of x and the K of y are split into g groups, and w is (K, C / g, R, S): output group i
// (K / g channels) sees input group i only (PyTorch's conv2d(..., groups=g)).
struct Args {
  Op op = Op::kForward;
  Mode mode = Mode::kBenchmark;
  int device = -1;  // -1: no device (describe() on a machine without a GPU)
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  bool allow_tf32 = false;  // TF32 Tensor Cores allowed for fp32 (torch.backends.cudnn.allow_tf32)
  std::array<int64_t, 4> x{}, w{}, y{};
  std::array<int64_t, 2> stride{}, padding{}, dilation{};
  int64_t groups = 1;
  cudaStream_t stream = nullptr;
};

// The tensors of one call: forward writes y, backward-data writes x, backward-filter writes w.
// bias (forward and backward-data only; null for none): one value per channel of the output, added
// after the convolution.
struct Buffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  const void* bias = nullptr;
};

// The cache key: every field that changes the descriptors or the chosen algorithm. All fields are
// int64_t, so the struct has no padding and can be compared and hashed as bytes.
struct Key {
  int64_t op = 0, mode = 0, device = 0, dtype = 0, layout = 0, allow_tf32 = 0, groups = 0;
  std::array<int64_t, 4> x{}, w{};
  std::array<int64_t, 2> stride{}, padding{}, dilation{};

  bool operator==(const Key& other) const { return std::memcmp(this, &other, sizeof(Key)) == 0; }
};
static_assert(std::has_unique_object_representations_v<Key>, "Key must have no padding bytes");

struct KeyHash {
  size_t operator()(const Key& key) const;
};

// RAII ownership of one cuDNN object: created by the constructor, destroyed exactly once, movable
// but not copyable (a copy would destroy the same descriptor twice).
template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Owned {
 public:
  Owned() { CUDNN_CHECK(Create(&handle_)); }
  ~Owned() {
    if (handle_ != nullptr) Destroy(handle_);  // a destructor must not throw
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Owned(Owned&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Owned& operator=(Owned&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  T get() const { return handle_; }

 private:
  T handle_ = nullptr;
};

using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                       cudnnDestroyConvolutionDescriptor>;

// Everything needed to run one convolution again: descriptors, the algorithm and its workspace.
struct Plan {
  TensorDesc x_desc, y_desc;
  TensorDesc bias_desc;  // (1, C, 1, 1): C the channels of the op's output (y, or x for backward-data)
  FilterDesc w_desc;
  ConvDesc conv_desc;
  std::array<int64_t, 4> x{}, w{}, y{};  // the shapes the descriptors describe (y from cuDNN)
  int algo = -1;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by Op
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes = 0;
};

// Descriptors only (no handle, no GPU needed): the plan's algo is still unset.
Plan describe(const Args& args);

// Run one convolution through the plan cache (or uncached, by args.mode).
void run(const Args& args, const Buffers& buffers);

// The bias's gradient: db[c] = the sum of dy[n, c, h, w] over n, h and w (cudnnConvolutionBackwardBias),
// on `stream` of `device`. dy is a dense NCHW tensor of shape dy_shape; db has dy_shape[1] values.
void backward_bias(int device, cudaStream_t stream, cudnnDataType_t dtype, const std::array<int64_t, 4>& dy_shape,
                   const void* dy, void* db);

// dst += src for two dense tensors of `shape` (cudnnAddTensor), on `stream` of `device`: how the op sums
// the pieces of a gradient it computes in pieces of a batch.
void add_into(int device, cudaStream_t stream, cudnnDataType_t dtype, const std::array<int64_t, 4>& shape,
              const void* src, void* dst);

// The cache seen from Python: counts, size, bound; and the launch cache's (CUDA graphs) counts.
struct CacheStats {
  int64_t hits = 0, misses = 0, evictions = 0, size = 0, capacity = 0;
  int64_t max_workspace_bytes = 0;  // the largest workspace a cached plan needs
  int64_t graph_hits = 0;      // calls that replayed a captured graph (one cudaGraphLaunch)
  int64_t graph_captures = 0;  // graphs captured and instantiated
  int64_t graph_failures = 0;  // captures that failed: those keys run the plain call
  int64_t graphs = 0;          // graphs held (failures included)
  bool graphs_enabled = true;
};
CacheStats cache_stats();
void cache_clear();  // drop every plan and graph, and reset the counts
void cache_set_capacity(int64_t capacity);
void set_graphs(bool enabled);  // the launch cache on (the default) or off; off keeps its graphs

}  // namespace conv
