// Exercise 10: convolution plans (descriptors + algorithm + workspace size), their cache, and the
// cuDNN calls that run them.
//
// Host code: cuDNN's own kernels do the work (the one kernel here only checks a captured graph once).
// It includes no ATen tensor headers, so an edit here rebuilds in seconds; tensors and registration
// are in cudnn_conv.cpp.
// Order: helpers -> descriptors -> cache -> algorithm choice -> the call (with its bias) -> the launch
// cache (CUDA graphs) -> run() and the bias's gradient.
#include <algorithm>
#include <atomic>
#include <list>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <course/paths.h>  // course::took: run()'s branches, observed by the grader

#include "cudnn_conv.h"

namespace conv {

std::string last_cudnn_error() {
#if CUDNN_MAJOR >= 9
  char message[1024] = {0};
  cudnnGetLastErrorString(message, sizeof(message));
  if (message[0] != '\0') return std::string(" (") + message + ")";
#endif
  return "";
}

size_t KeyHash::operator()(const Key& key) const {
  // BEGIN OPEN
  // GOAL: a well-mixed hash of the whole key, equal keys hashing equally (Background: The key is everything that changes the plan).
  // STUB: TORCH_CHECK(false, "KeyHash is not implemented yet");
  // FNV-1a over the key's 64-bit words (it is all int64_t, no padding, so equal keys hash equally):
  // 21 steps per lookup instead of 168 for its bytes. The last line mixes the high bits down.
  uint64_t words[sizeof(Key) / sizeof(uint64_t)];
  std::memcpy(words, &key, sizeof(Key));
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : words) {
    h ^= w;
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
  // END OPEN
}

namespace {

// ------------------------------------------------------------------------------------- helpers

int as_int(int64_t v) { return static_cast<int>(v); }  // the binding checked every size fits an int

// "[2, 3, 5, 7]". Messages pass only strings to TORCH_CHECK (see num() in cudnn_conv.cpp: numbers
// and IntArrayRefs streamed into messages crashed this extension on the H100 machine).
std::string ref(const std::array<int64_t, 4>& a) {
  return "[" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ", " + std::to_string(a[2]) + ", " +
         std::to_string(a[3]) + "]";
}

// Strict fp32 must stay on FMA units. With TF32 allowed, ask for Tensor Core math explicitly: with
// CUDNN_DEFAULT_MATH, cuDNN 9.19's legacy Find offered no TF32 algorithm on an H100 (strict speed).
[[maybe_unused]] cudnnMathType_t math_type_for(const Args& a) {
  // BEGIN OPEN
  // GOAL: strict fp32 on FMA units, TF32 allowed: Tensor Core math asked for explicitly, float64: the default (Background: Math mode).
  // STUB: TORCH_CHECK(false, "math_type_for is not implemented yet");
  if (a.dtype != CUDNN_DATA_FLOAT) return CUDNN_DEFAULT_MATH;
  return a.allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  // END OPEN
}

// alpha = 1 and beta = 0 (overwrite the output), in the type cuDNN expects for the data type.
const void* one(cudnnDataType_t t) {
  // BEGIN OPEN
  // GOAL: alpha = 1 in the type cuDNN expects for the data type (float for float32, double for float64).
  // STUB: TORCH_CHECK(false, "one is not implemented yet");
  static const float f = 1.0f;
  static const double d = 1.0;
  return t == CUDNN_DATA_DOUBLE ? static_cast<const void*>(&d) : static_cast<const void*>(&f);
  // END OPEN
}
const void* zero(cudnnDataType_t t) {
  // BEGIN OPEN
  // GOAL: beta = 0 in the type cuDNN expects for the data type.
  // STUB: TORCH_CHECK(false, "zero is not implemented yet");
  static const float f = 0.0f;
  static const double d = 0.0;
  return t == CUDNN_DATA_DOUBLE ? static_cast<const void*>(&d) : static_cast<const void*>(&f);
  // END OPEN
}

// A workspace from PyTorch's caching allocator: after the first call of a size it is a free-list
// lookup, not a cudaMalloc, and it is tied to the current stream, so handing it back right after
// the work is queued is safe. An empty DataPtr (null) for 0 bytes.
c10::DataPtr allocate_workspace(size_t bytes) { return c10::cuda::CUDACachingAllocator::get()->allocate(bytes); }

// One cuDNN handle per device, for the whole process. cuDNN handles are not destroyed at exit on
// purpose: the CUDA driver may already be gone then (PyTorch does the same).
struct DeviceHandle {
  std::mutex mu;  // one thread at a time: the handle's stream is state shared by every caller
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;  // the stream the handle is bound to (cudnnCreate: the default stream)
  cudaStream_t capture = nullptr;  // the launch cache's private stream for graph capture (made on first use)
};

DeviceHandle& handle_for(int device) {
  // BEGIN OPEN
  // GOAL: the device's one cuDNN handle, created on first use, safe when threads ask at once (Background: One handle per device).
  // STUB: TORCH_CHECK(false, "handle_for is not implemented yet");
  static std::mutex mu;
  static std::unordered_map<int, std::unique_ptr<DeviceHandle>> handles;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<DeviceHandle>& slot = handles[device];
  if (!slot) {
    auto fresh = std::make_unique<DeviceHandle>();
    CUDNN_CHECK(cudnnCreate(&fresh->handle));  // on the current device: the binding's CUDAGuard set it
    slot = std::move(fresh);
  }
  return *slot;
  // END OPEN
}

// The device's handle, locked and bound to the caller's stream for as long as this object lives.
class BoundHandle {
 public:
  BoundHandle(DeviceHandle& device, cudaStream_t stream) : lock_(device.mu), handle_(device.handle) {
    // BEGIN SOLUTION
    // GOAL: while this object lives, handle_ runs on `stream`, and a bind happens only when needed.
    // TODO: make sure handle_ runs on `stream`. A handle keeps the last stream it was given and every
    // TODO: thread shares it, so check on every call, under the lock: if `stream` is not device.stream,
    // TODO: bind it (cudnnSetStream) and remember it in device.stream. Most calls then skip the bind.
    // STUB: TORCH_CHECK(false, "BoundHandle (cudnn_conv.cu) is not implemented yet");
    if (device.stream != stream) {
      CUDNN_CHECK(cudnnSetStream(handle_, stream));
      device.stream = stream;
    }
    // END SOLUTION
  }
  cudnnHandle_t get() const { return handle_; }

 private:
  std::lock_guard<std::mutex> lock_;
  cudnnHandle_t handle_;
};

// ------------------------------------------------------------------------------------- the key

Key make_key(const Args& a) {
  // BEGIN OPEN
  // GOAL: a key that tells apart any two calls that need different plans, and no more (Background: The key is everything that changes the plan).
  // STUB: TORCH_CHECK(false, "make_key is not implemented yet");
  Key key;
  // BEGIN SOLUTION
  // GOAL: a key that tells apart any two calls that need different plans.
  // TODO: fill every field of `key` from `a`: op, mode, device, dtype, layout (CUDNN_TENSOR_NCHW),
  // TODO: allow_tf32, groups, the x and w shapes, stride, padding and dilation. A field left out lets
  // TODO: two calls that need different plans share one.
  // STUB: TORCH_CHECK(false, "make_key (cudnn_conv.cu) is not implemented yet");
  key.op = static_cast<int64_t>(a.op);
  key.mode = static_cast<int64_t>(a.mode);
  key.device = a.device;
  key.dtype = a.dtype;
  key.layout = CUDNN_TENSOR_NCHW;
  key.allow_tf32 = a.allow_tf32;
  key.groups = a.groups;
  key.x = a.x;
  key.w = a.w;
  key.stride = a.stride;
  key.padding = a.padding;
  key.dilation = a.dilation;
  // END SOLUTION
  return key;
  // END OPEN
}

}  // namespace

// ------------------------------------------------------------------------------- descriptors

Plan describe(const Args& a) {
  // BEGIN OPEN
  // GOAL: the plan's descriptors for `a` (x, w, the grouped convolution with its math type, y from cuDNN's output shape,
  // GOAL: the bias) (Background: Descriptors are the expensive, reusable part, Groups, The bias).
  // STUB: TORCH_CHECK(false, "describe is not implemented yet");
  Plan plan;  // its constructor created the four descriptors; they are destroyed with it
  plan.x = a.x;
  plan.w = a.w;
  // BEGIN SOLUTION
  // GOAL: the plan's x, w and convolution descriptors from `a`, and its output shape and y descriptor.
  // TODO: set x_desc (4-d NCHW tensor of a.dtype), w_desc (a KCRS filter, NCHW format: a.w is already
  // TODO: (K, C / groups, R, S)) and conv_desc (2-d cross-correlation with a.padding, a.stride,
  // TODO: a.dilation, computing in a.dtype), its group count (cudnnSetConvolutionGroupCount, a.groups)
  // TODO: and its math type (math_type_for(a)) into plan.math; then ask cuDNN for the output shape
  // TODO: (cudnnGetConvolution2dForwardOutputDim) into plan.y and set y_desc to it. CUDNN_CHECK each call.
  // STUB: TORCH_CHECK(false, "describe (cudnn_conv.cu) is not implemented yet");
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x_desc.get(), CUDNN_TENSOR_NCHW, a.dtype, as_int(a.x[0]),
                                         as_int(a.x[1]), as_int(a.x[2]), as_int(a.x[3])));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w_desc.get(), a.dtype, CUDNN_TENSOR_NCHW, as_int(a.w[0]),
                                         as_int(a.w[1]), as_int(a.w[2]), as_int(a.w[3])));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv_desc.get(), as_int(a.padding[0]), as_int(a.padding[1]),
                                              as_int(a.stride[0]), as_int(a.stride[1]), as_int(a.dilation[0]),
                                              as_int(a.dilation[1]), CUDNN_CROSS_CORRELATION, a.dtype));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan.conv_desc.get(), as_int(a.groups)));
  plan.math = math_type_for(a);
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc.get(), plan.math));
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.conv_desc.get(), plan.x_desc.get(), plan.w_desc.get(),
                                                    &n, &c, &h, &w));
  plan.y = {n, c, h, w};
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y_desc.get(), CUDNN_TENSOR_NCHW, a.dtype, n, c, h, w));
  // END SOLUTION
  // The bias's descriptor: one value per channel of the op's output (y; x for backward-data),
  // broadcast over N, H and W by cudnnAddTensor.
  const int64_t out_channels = a.op == Op::kBackwardData ? a.x[1] : plan.y[1];
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.bias_desc.get(), CUDNN_TENSOR_NCHW, a.dtype, 1, as_int(out_channels), 1,
                                         1));
  return plan;
  // END OPEN
}

namespace {

// ------------------------------------------------------------------------------------- the cache

// Plans by key, least recently used evicted first. Plans are shared_ptr: one evicted or cleared
// while another thread still runs it stays alive until that thread is done.
class PlanCache {
 public:
  std::shared_ptr<const Plan> find(const Key& key);
  // Returns the plan now cached under key: `plan`, or the one another thread inserted first.
  std::shared_ptr<const Plan> insert(const Key& key, std::shared_ptr<const Plan> plan);

  CacheStats stats() {
    // BEGIN OPEN
    // GOAL: the cache's counts, size, capacity and largest cached workspace, read under the lock.
    // STUB: TORCH_CHECK(false, "PlanCache::stats is not implemented yet");
    std::lock_guard<std::mutex> lock(mu_);
    int64_t workspace = 0;
    for (const Entry& e : lru_) workspace = std::max<int64_t>(workspace, e.second->workspace_bytes);
    return {hits_, misses_, evictions_, static_cast<int64_t>(lru_.size()), static_cast<int64_t>(capacity_), workspace};
    // END OPEN
  }
  void clear() {
    // BEGIN OPEN
    // GOAL: empty the cache and its counts, under the lock.
    std::lock_guard<std::mutex> lock(mu_);
    index_.clear();
    lru_.clear();
    hits_ = misses_ = evictions_ = 0;
    // END OPEN
  }
  void set_capacity(size_t capacity) {
    // BEGIN OPEN
    // GOAL: a new capacity, evicting what is over it, under the lock.
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity;
    evict_over_capacity();
    // END OPEN
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const Plan>>;

  void evict_over_capacity() {  // the caller holds mu_
    // BEGIN OPEN
    // GOAL: drop least recently used plans until the cache holds at most capacity_, each counted in evictions_
    // GOAL: (Background: Thread safety and bounds).
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      ++evictions_;
    }
    // END OPEN
  }

  std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  size_t capacity_ = 256;
  int64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

std::shared_ptr<const Plan> PlanCache::find(const Key& key) {
  // BEGIN OPEN
  // GOAL: the plan cached under key (or none), a hit moved to most recently used, hits and misses counted, safe
  // GOAL: across threads in O(1) (Background: Thread safety and bounds).
  // STUB: TORCH_CHECK(false, "find is not implemented yet");
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const Plan> found;
  // BEGIN SOLUTION
  // GOAL: `found` = the plan cached under key (or none), with the LRU order and the counts kept up to date.
  // TODO: look key up in index_. On a hit: count it in hits_, move its entry to the front of lru_
  // TODO: (std::list::splice keeps the iterator valid) and set `found`. On a miss: count it in misses_.
  // STUB: TORCH_CHECK(false, "PlanCache::find (cudnn_conv.cu) is not implemented yet");
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
  } else {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    found = it->second->second;
  }
  // END SOLUTION
  return found;
  // END OPEN
}

std::shared_ptr<const Plan> PlanCache::insert(const Key& key, std::shared_ptr<const Plan> plan) {
  // BEGIN OPEN
  // GOAL: cache plan under key unless another thread cached one first; return the plan now cached; evict over capacity (O(1)).
  // STUB: TORCH_CHECK(false, "insert is not implemented yet");
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const Plan> kept;
  // BEGIN SOLUTION
  // GOAL: cache plan under key unless a plan is there already; `kept` = the plan cached under key.
  // TODO: if key is already in index_ (another thread built the same plan meanwhile), keep that one.
  // TODO: Otherwise put (key, plan) at the front of lru_, index it, and evict_over_capacity().
  // TODO: Set `kept` to the plan that is now cached under key.
  // STUB: TORCH_CHECK(false, "PlanCache::insert (cudnn_conv.cu) is not implemented yet");
  auto it = index_.find(key);
  if (it != index_.end()) {
    kept = it->second->second;
  } else {
    lru_.emplace_front(key, std::move(plan));
    index_.emplace(key, lru_.begin());
    kept = lru_.front().second;
    evict_over_capacity();
  }
  // END SOLUTION
  return kept;
  // END OPEN
}

PlanCache& cache() {
  static PlanCache instance;
  return instance;
}

// --------------------------------------------------------------------------- algorithm choice

// One algorithm as cuDNN reports it, the same for the three operations.
struct Candidate {
  int algo;
  cudnnStatus_t status;
  size_t memory;
  cudnnMathType_t math;
  float time_ms;  // -1 for the heuristic, which runs nothing
};

template <typename Perf>
std::vector<Candidate> to_candidates(const std::vector<Perf>& perf, int returned) {
  // BEGIN OPEN
  // GOAL: cuDNN's performance results as Candidates, the first `returned`.
  // STUB: TORCH_CHECK(false, "to_candidates is not implemented yet");
  std::vector<Candidate> out;
  for (int i = 0; i < returned; ++i) {
    out.push_back({static_cast<int>(perf[i].algo), perf[i].status, perf[i].memory, perf[i].mathType, perf[i].time});
  }
  return out;
  // END OPEN
}

int algorithm_count(cudnnHandle_t h, Op op) {
  // BEGIN OPEN
  // GOAL: how many algorithms cuDNN has for this operation (Background: Choosing the algorithm).
  // STUB: TORCH_CHECK(false, "algorithm_count is not implemented yet");
  int count = 0;
  switch (op) {
    case Op::kForward: CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count)); break;
    case Op::kBackwardData: CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count)); break;
    case Op::kBackwardFilter: CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count)); break;
  }
  return count;
  // END OPEN
}

// The workspace `algo` needs with the plan's current math type; false if cuDNN does not support it here.
bool workspace_size(cudnnHandle_t h, const Plan& p, Op op, int algo, size_t* bytes) {
  // BEGIN OPEN
  // GOAL: the workspace algo needs under the plan's math type; false where cuDNN does not support it (Background: Workspace).
  // STUB: TORCH_CHECK(false, "workspace_size is not implemented yet");
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  switch (op) {
    case Op::kForward:
      s = cudnnGetConvolutionForwardWorkspaceSize(h, p.x_desc.get(), p.w_desc.get(), p.conv_desc.get(), p.y_desc.get(),
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
      break;
    case Op::kBackwardData:
      s = cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w_desc.get(), p.y_desc.get(), p.conv_desc.get(),
                                                       p.x_desc.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                                       bytes);
      break;
    case Op::kBackwardFilter:
      s = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x_desc.get(), p.y_desc.get(), p.conv_desc.get(),
                                                         p.w_desc.get(),
                                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
      break;
  }
  return s == CUDNN_STATUS_SUCCESS;
  // END OPEN
}

// cuDNN's heuristic: its ranking of the algorithms, best first, without running any.
[[maybe_unused]] std::vector<Candidate> heuristic_candidates(cudnnHandle_t h, const Plan& p, Op op) {
  // BEGIN OPEN
  // GOAL: cuDNN's heuristic ranking for this operation, best first, running nothing (Background: Choosing the algorithm).
  // STUB: TORCH_CHECK(false, "heuristic_candidates is not implemented yet");
  const int count = algorithm_count(h, op);
  int returned = 0;
  switch (op) {
    case Op::kForward: {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(count);
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x_desc.get(), p.w_desc.get(), p.conv_desc.get(),
                                                         p.y_desc.get(), count, &returned, perf.data()));
      return to_candidates(perf, returned);
    }
    case Op::kBackwardData: {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(count);
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w_desc.get(), p.y_desc.get(), p.conv_desc.get(),
                                                              p.x_desc.get(), count, &returned, perf.data()));
      return to_candidates(perf, returned);
    }
    case Op::kBackwardFilter: {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(count);
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x_desc.get(), p.y_desc.get(), p.conv_desc.get(),
                                                                p.w_desc.get(), count, &returned, perf.data()));
      return to_candidates(perf, returned);
    }
  }
  return {};
  // END OPEN
}

// Largest workspace a benchmark may give the algorithms: what the hungriest one asks for, up to this.
constexpr size_t kMaxFindWorkspace = size_t(4) << 30;

// A workspace for cudnnFind...Ex: as large as the hungriest algorithm wants (capped), halved while
// the allocator is out of memory; algorithms that need more than it get are reported as failed.
[[maybe_unused]] c10::DataPtr find_workspace(cudnnHandle_t h, const Plan& p, Op op, size_t* bytes) {
  // BEGIN OPEN
  // GOAL: a workspace for benchmarking: what the hungriest algorithm asks (capped), halved while the allocator is out of
  // GOAL: memory (Background: Workspace).
  // STUB: TORCH_CHECK(false, "find_workspace is not implemented yet");
  size_t largest = 0;
  for (int algo = 0, n = algorithm_count(h, op); algo < n; ++algo) {
    size_t need = 0;
    if (workspace_size(h, p, op, algo, &need)) largest = std::max(largest, need);
  }
  *bytes = std::min(largest, kMaxFindWorkspace);
  while (true) {
    try {
      return allocate_workspace(*bytes);
    } catch (const c10::OutOfMemoryError&) {
      if (*bytes == 0) throw;
      *bytes /= 2;
    }
  }
  // END OPEN
}

// Benchmark: cuDNN runs every algorithm on the call's own buffers (it writes the output, which the
// real call overwrites next) and returns them fastest first.
[[maybe_unused]] std::vector<Candidate> benchmark_candidates(cudnnHandle_t h, const Plan& p, Op op, const Buffers& b,
                                                             void* workspace, size_t workspace_bytes) {
  // BEGIN OPEN
  // GOAL: every algorithm timed by cuDNN on the call's own buffers, fastest first (Background: Choosing the algorithm).
  // STUB: TORCH_CHECK(false, "benchmark_candidates is not implemented yet");
  const int count = algorithm_count(h, op);
  int returned = 0;
  switch (op) {
    case Op::kForward: {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(count);
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, p.x_desc.get(), b.x, p.w_desc.get(), b.w,
                                                         p.conv_desc.get(), p.y_desc.get(), b.y, count, &returned,
                                                         perf.data(), workspace, workspace_bytes));
      return to_candidates(perf, returned);
    }
    case Op::kBackwardData: {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(count);
      CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w_desc.get(), b.w, p.y_desc.get(), b.y,
                                                              p.conv_desc.get(), p.x_desc.get(), b.x, count, &returned,
                                                              perf.data(), workspace, workspace_bytes));
      return to_candidates(perf, returned);
    }
    case Op::kBackwardFilter: {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(count);
      CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x_desc.get(), b.x, p.y_desc.get(), b.y,
                                                                p.conv_desc.get(), p.w_desc.get(), b.w, count,
                                                                &returned, perf.data(), workspace, workspace_bytes));
      return to_candidates(perf, returned);
    }
  }
  return {};
  // END OPEN
}

// The transforming algorithms strict fp32 refuses: the non-fused Winograd of a kernel larger than 3 x 3, in any of
// the three ops. Past strict fp32's 1e-4 where cuDNN ranks it first (H200, cuDNN 9): the weight gradient 1.2e-3 off
// float64 at x (8, 128, 28, 28) with a 5 x 5 kernel (the heuristic's pick; PyTorch's strict path takes it and is
// that far off) and 4.9e-4 at x (2, 6, 16, 15); the data gradient 4.4e-4 at x (2, 6, 16, 15), picked by timing
// under load. Of a 3 x 3 kernel: 1.7e-5 at most.
[[maybe_unused]] bool strict_refuses(const Args& a, int algo) {
  if (a.w[2] <= 3 && a.w[3] <= 3) return false;
  switch (a.op) {
    case Op::kForward: return algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case Op::kBackwardData: return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case Op::kBackwardFilter: return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
  }
  return false;
}

// Sets plan.algo, plan.math and plan.workspace_bytes.
void choose_algorithm(Plan& plan, const Args& a, const Buffers& b, cudnnHandle_t h) {
  // BEGIN OPEN
  // GOAL: the plan's algorithm, math type and workspace size: the best candidate the call allows (strict fp32: no Tensor
  // GOAL: Core math); a clear error when none is usable (Background: Choosing the algorithm, Math mode, Workspace).
  // BEGIN SOLUTION
  // GOAL: the plan's algorithm, math type and workspace size: the best candidate cuDNN offers that
  // GOAL: the call allows.
  // TODO: get the candidates, best first: with Mode::kBenchmark from benchmark_candidates (give it
  // TODO: find_workspace(...), kept alive until it returns), otherwise from heuristic_candidates.
  // TODO: Take the first whose status is CUDNN_STATUS_SUCCESS; for strict fp32 (float without
  // TODO: allow_tf32) skip any whose math is a Tensor Core one, and keep CUDNN_FMA_MATH (as PyTorch:
  // TODO: the Winograd and FFT algorithms stay, except those strict_refuses), otherwise use the candidate's
  // TODO: math. Set it on conv_desc
  // TODO: (cudnnSetConvolutionMathType), then ask
  // TODO: workspace_size for the algorithm's real need. No usable candidate: a clear TORCH_CHECK.
  // STUB: TORCH_CHECK(false, "choose_algorithm (cudnn_conv.cu) is not implemented yet");
  std::vector<Candidate> candidates;
  if (a.mode == Mode::kBenchmark) {
    size_t bytes = 0;
    c10::DataPtr workspace = find_workspace(h, plan, a.op, &bytes);
    candidates = benchmark_candidates(h, plan, a.op, b, workspace.get(), bytes);
  } else {
    candidates = heuristic_candidates(h, plan, a.op);
  }
  const bool strict = a.dtype == CUDNN_DATA_FLOAT && !a.allow_tf32;
  for (const Candidate& c : candidates) {
    if (c.status != CUDNN_STATUS_SUCCESS) continue;
    // strict fp32 rules out Tensor Core math, not the algorithms that transform the data (Winograd, FFT): they
    // round more (the non-fused Winograd weight gradient of a 3x3 kernel up to 1.7e-5 off float64 on the H200,
    // TF32 2.9e-4 and more) and are often the fastest; PyTorch's strict path takes them too
    if (strict && (c.math == CUDNN_TENSOR_OP_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
    if (strict && strict_refuses(a, c.algo)) continue;
    plan.algo = c.algo;
    plan.math = strict ? CUDNN_FMA_MATH : c.math;
    break;
  }
  TORCH_CHECK(plan.algo >= 0, "cuDNN offers no usable algorithm for this convolution: x ", ref(a.x), ", w ",
              ref(a.w), ", y ", ref(a.y), ", groups ", std::to_string(a.groups));
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc.get(), plan.math));
  TORCH_CHECK(workspace_size(h, plan, a.op, plan.algo, &plan.workspace_bytes),
              "cuDNN cannot size the workspace of the algorithm it chose (", std::to_string(plan.algo), ")");
  // END SOLUTION
  // END OPEN
}

// -------------------------------------------------------------------------------------- the call

// The bias, added to the output the call has just written (y for the forward, x for backward-data).
void add_bias(const Plan& plan, const Args& a, const Buffers& b, cudnnHandle_t h) {
  // BEGIN OPEN
  // GOAL: the bias added to the op's output, per channel, on the handle's stream (Background: The bias).
  // BEGIN SOLUTION
  // GOAL: every element of the call's output (b.y for the forward, b.x for backward-data) in channel c
  // GOAL: gains b.bias[c], on the handle's stream.
  // TODO: one cudnnAddTensor: C = alpha * A + beta * C with A = b.bias described by plan.bias_desc
  // TODO: ((1, C, 1, 1): cuDNN broadcasts a dimension of 1), C = the output with its own descriptor
  // TODO: (plan.y_desc or plan.x_desc), alpha = one(a.dtype) and beta = one(a.dtype) (keep the convolution).
  // STUB: TORCH_CHECK(false, "add_bias (cudnn_conv.cu) is not implemented yet");
  const bool forward = a.op == Op::kForward;
  CUDNN_CHECK(cudnnAddTensor(h, one(a.dtype), plan.bias_desc.get(), b.bias, one(a.dtype),
                             forward ? plan.y_desc.get() : plan.x_desc.get(), forward ? b.y : b.x));
  // END SOLUTION
  // END OPEN
}

// `ws` is plan.workspace_bytes of scratch that run() took from allocate_workspace: run() needs its
// address before the call (it is part of the launch cache's key, below).
void execute(const Plan& plan, const Args& a, const Buffers& b, const c10::DataPtr& ws, cudnnHandle_t h) {
  // BEGIN OPEN
  // GOAL: the plan's convolution for a.op (forward, backward data, backward filter) into b with the plan's workspace,
  // GOAL: then the bias where there is one.
  // BEGIN SOLUTION
  // GOAL: run the plan's convolution (forward, backward data or backward filter, by a.op) into b.
  // TODO: run plan.algo with cudnnConvolutionForward (writes b.y), ...BackwardData (writes b.x) or
  // TODO: ...BackwardFilter (writes b.w) by a.op, with one(a.dtype) and zero(a.dtype), and the
  // TODO: workspace ws.get() of plan.workspace_bytes (never a null pointer with a non-zero size).
  // STUB: TORCH_CHECK(false, "execute (cudnn_conv.cu) is not implemented yet");
  switch (a.op) {
    case Op::kForward:
      CUDNN_CHECK(cudnnConvolutionForward(h, one(a.dtype), plan.x_desc.get(), b.x, plan.w_desc.get(), b.w,
                                          plan.conv_desc.get(), static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                          ws.get(), plan.workspace_bytes, zero(a.dtype), plan.y_desc.get(), b.y));
      break;
    case Op::kBackwardData:
      CUDNN_CHECK(cudnnConvolutionBackwardData(h, one(a.dtype), plan.w_desc.get(), b.w, plan.y_desc.get(), b.y,
                                               plan.conv_desc.get(),
                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                               ws.get(), plan.workspace_bytes, zero(a.dtype), plan.x_desc.get(), b.x));
      break;
    case Op::kBackwardFilter:
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, one(a.dtype), plan.x_desc.get(), b.x, plan.y_desc.get(), b.y,
                                                 plan.conv_desc.get(),
                                                 static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo),
                                                 ws.get(), plan.workspace_bytes, zero(a.dtype), plan.w_desc.get(), b.w));
      break;
  }
  // END SOLUTION
  if (b.bias != nullptr) add_bias(plan, a, b, h);  // queued after the convolution, on the same stream
  // END OPEN
}

// A plan found under this call's key must describe this call's tensors. If it does not, the key
// misses a field that changes the plan, and running it would read or write out of bounds: stop.
void check_plan(const Plan& p, const Args& a) {
  TORCH_CHECK(p.x == a.x && p.w == a.w && p.y == a.y, "the plan found for this call describes x ", ref(p.x),
              ", w ", ref(p.w), ", y ", ref(p.y), " but the call has x ", ref(a.x), ", w ", ref(a.w), ", y ",
              ref(a.y), ": the cache key is missing a field that changes the plan");
}

// ---------------------------------------------------------------- the launch cache (CUDA graphs)
//
// A cached call still costs ~25 us of host time in cuDNN 9's legacy cudnnConvolutionForward itself
// (scripts/host_time_cudnn.py). A program that calls the same convolution on the same buffers again
// and again (a training or inference loop: PyTorch's caching allocator hands back the same blocks)
// can skip that: the second such call records cuDNN's launches into a CUDA graph, and every later one
// replays them with one cudaGraphLaunch on the caller's stream. This is what torch.compile's
// "reduce-overhead" does, inside the op. A graph holds raw device addresses, so its key is the plan
// and every address the call reads or writes: it is only ever replayed for exactly those buffers, and
// it reads their values when it runs.

// The plan (kept alive by the entry, so its address names it), the five buffers and the device.
// "Never referenced" is off for the operators here and in the graph's owners below: at the open
// level only the launch cache (the student's) uses them, through a hash map and smart pointers, which
// the stubs' rule (grader/authoring/stubs.py, mark_unused) cannot see; nvcc ignores [[maybe_unused]] on a member.
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177
struct GraphKey {
  uintptr_t plan = 0, x = 0, w = 0, y = 0, bias = 0, workspace = 0, device = 0;
  bool operator==(const GraphKey& other) const { return std::memcmp(this, &other, sizeof(GraphKey)) == 0; }
};
#pragma nv_diagnostic pop

struct GraphKeyHash {
  size_t operator()(const GraphKey& key) const {
    // BEGIN OPEN
    // GOAL: a hash of the graph key's words, equal keys equally.
    // STUB: TORCH_CHECK(false, "GraphKeyHash is not implemented yet");
    const uintptr_t words[] = {key.plan, key.x, key.w, key.y, key.bias, key.workspace, key.device};
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words, as KeyHash
    for (uintptr_t w : words) {
      h ^= w;
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h ^ (h >> 29));
    // END OPEN
  }
};

GraphKey graph_key(const Plan* plan, const Args& a, const Buffers& b, const void* workspace) {
  // BEGIN OPEN
  // GOAL: a key naming the plan, every buffer the call touches, the workspace and the device.
  // STUB: TORCH_CHECK(false, "graph_key is not implemented yet");
  GraphKey k;
  k.plan = reinterpret_cast<uintptr_t>(plan);
  k.x = reinterpret_cast<uintptr_t>(b.x);
  k.w = reinterpret_cast<uintptr_t>(b.w);
  k.y = reinterpret_cast<uintptr_t>(b.y);
  k.bias = reinterpret_cast<uintptr_t>(b.bias);  // 0 without a bias: a graph with one is another graph
  k.workspace = reinterpret_cast<uintptr_t>(workspace);
  k.device = static_cast<uintptr_t>(a.device);
  return k;
  // END OPEN
}

// RAII owners: a captured graph (dropped once instantiated) and its executable form.
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177
struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t e) const { cudaGraphExecDestroy(e); }
};
#pragma nv_diagnostic pop
using GraphOwner = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecOwner = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

// One key's graph. Shared: one evicted or cleared while another thread launches it stays alive.
struct Graph {
  std::shared_ptr<const Plan> plan;  // the plan it was captured from: its address stays this key's
  GraphExecOwner exec;               // null: capture failed, so this key always runs the plain call
  std::mutex launch_mu;              // an executable graph is not to be launched by two threads at once
};

// Graphs by key, at most kCapacity, the least recently used evicted first: few entries and rare
// insertions, so eviction scans for the oldest use instead of keeping a list. A key's first call only
// leaves the key in `seen_`; its second captures: a one-off call never pays for a capture.
class GraphCache {
 public:
  static constexpr size_t kCapacity = 64;
  static constexpr size_t kSeenCapacity = 1024;  // forgotten all at once when full

  // The graph (or remembered failure) for key, or null. When null, *capture says that this is the
  // key's second call, so the caller should capture it now.
  std::shared_ptr<Graph> find(const GraphKey& key, bool* capture) {
    // BEGIN OPEN
    // GOAL: the graph (or remembered failure) for key; otherwise remember the key, and say `capture` on its second call.
    // STUB: TORCH_CHECK(false, "GraphCache::find is not implemented yet");
    std::lock_guard<std::mutex> lock(mu_);
    *capture = false;
    auto it = graphs_.find(key);
    if (it != graphs_.end()) {
      it->second.used = ++tick_;
      if (it->second.graph->exec) ++hits_;
      return it->second.graph;
    }
    if (seen_.erase(key) > 0) {
      *capture = true;
    } else {
      if (seen_.size() >= kSeenCapacity) seen_.clear();
      seen_.insert(key);
    }
    return nullptr;
    // END OPEN
  }

  // Keeps `graph` under key (or the one another thread captured first) and returns it.
  std::shared_ptr<Graph> insert(const GraphKey& key, std::shared_ptr<Graph> graph) {
    // BEGIN OPEN
    // GOAL: keep graph under key unless one is there; evict the least recently used past capacity; count captures and failures.
    // STUB: TORCH_CHECK(false, "GraphCache::insert is not implemented yet");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) return it->second.graph;
    ++(graph->exec ? captures_ : failures_);
    if (graphs_.size() >= kCapacity) {
      auto oldest = std::min_element(graphs_.begin(), graphs_.end(),
                                     [](const auto& l, const auto& r) { return l.second.used < r.second.used; });
      graphs_.erase(oldest);
    }
    graphs_.emplace(key, Slot{graph, ++tick_});
    return graph;
    // END OPEN
  }

  void stats(CacheStats* s) {
    // BEGIN OPEN
    // GOAL: the launch cache's counts (graph hits, captures, failures) and the graphs it holds into *s, under the lock.
    std::lock_guard<std::mutex> lock(mu_);
    s->graph_hits = hits_;
    s->graph_captures = captures_;
    s->graph_failures = failures_;
    s->graphs = static_cast<int64_t>(graphs_.size());
    // END OPEN
  }
  void clear() {
    // BEGIN OPEN
    // GOAL: drop every graph and every key seen once, and reset the counts, under the lock.
    std::lock_guard<std::mutex> lock(mu_);
    graphs_.clear();
    seen_.clear();
    hits_ = captures_ = failures_ = 0;
    // END OPEN
  }

 private:
  struct Slot {
    std::shared_ptr<Graph> graph;
    uint64_t used;  // tick_ at the last use
  };
  std::mutex mu_;
  std::unordered_map<GraphKey, Slot, GraphKeyHash> graphs_;
  std::unordered_set<GraphKey, GraphKeyHash> seen_;
  uint64_t tick_ = 0;
  int64_t hits_ = 0, captures_ = 0, failures_ = 0;
};

// Never destroyed: destroying graphs at exit may come after the CUDA driver is gone (as the handles).
GraphCache& graphs() {
  static GraphCache* instance = new GraphCache();
  return *instance;
}

std::atomic<bool> graphs_on{true};

// True when `stream` is being captured into a graph by the caller (torch.cuda.graph, or any other
// capture): then the plain call must run, so that cuDNN's launches are recorded into the caller's
// graph. A failed query (e.g. the legacy stream while a blocking stream captures) counts as capturing.
bool caller_is_capturing(cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: whether the caller is capturing `stream` (a failed query counts as capturing).
  // STUB: TORCH_CHECK(false, "caller_is_capturing is not implemented yet");
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the (non-sticky) error the query left
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
  // END OPEN
}

// Records the plan's call on the device's private capture stream and instantiates it. The handle is
// bound to the capture stream for the capture only, under the device's lock, and bound back to the
// stream it was on, so DeviceHandle::stream stays true. Any failure gives an entry without exec (the
// key then always runs the plain call); it is never an error for the caller.
std::shared_ptr<Graph> capture(DeviceHandle& device, std::shared_ptr<const Plan> plan, const Args& a,
                               const Buffers& b, const c10::DataPtr& ws) {
  // BEGIN OPEN
  // GOAL: capture the plan's call into a graph on the device's capture stream (the handle bound there only for the
  // GOAL: capture, bound back after) and instantiate it; any failure gives an entry without exec, never an error.
  // STUB: TORCH_CHECK(false, "capture is not implemented yet");
  auto entry = std::make_shared<Graph>();
  entry->plan = std::move(plan);
  GraphOwner graph;
  bool ok = false;
  {
    std::lock_guard<std::mutex> lock(device.mu);
    // Non-blocking: no implicit ordering with the legacy default stream. It waits on nothing: a
    // capture records the launches, it runs nothing.
    if (device.capture == nullptr && cudaStreamCreateWithFlags(&device.capture, cudaStreamNonBlocking) != cudaSuccess) {
      device.capture = nullptr;
    }
    cudaStream_t bound = nullptr;
    if (device.capture != nullptr && cudnnGetStream(device.handle, &bound) == CUDNN_STATUS_SUCCESS &&
        cudnnSetStream(device.handle, device.capture) == CUDNN_STATUS_SUCCESS) {
      // ThreadLocal: other threads' unsafe calls (a cudaMalloc) do not break this capture.
      if (cudaStreamBeginCapture(device.capture, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        try {
          execute(*entry->plan, a, b, ws, device.handle);
          ok = true;
        } catch (const std::exception&) {  // refused under capture; the plain call says why if it fails too
        }
        cudaGraph_t raw = nullptr;
        ok = cudaStreamEndCapture(device.capture, &raw) == cudaSuccess && ok;
        graph.reset(raw);
      }
      // back where it was; should that fail, say where it is, so the next call binds it again
      if (cudnnSetStream(device.handle, bound) != CUDNN_STATUS_SUCCESS) device.stream = device.capture;
    }
  }
  size_t nodes = 0;  // no node: cuDNN's work went elsewhere (it already ran), nothing to replay
  ok = ok && graph && cudaGraphGetNodes(graph.get(), nullptr, &nodes) == cudaSuccess && nodes > 0;
  cudaGraphExec_t exec = nullptr;
  if (ok && cudaGraphInstantiateWithFlags(&exec, graph.get(), 0) == cudaSuccess) entry->exec.reset(exec);
  if (!entry->exec) (void)cudaGetLastError();
  return entry;
  // END OPEN
}

// Sets *differs when a and b differ in any of their n bytes.
__global__ void bytes_differ_kernel(const unsigned char* a, const unsigned char* b, size_t n, int* differs) {
  // BEGIN OPEN
  // GOAL: *differs = 1 when a[i] != b[i] for any i < n, whatever the grid's size (graph_reproduces_call launches it).
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (a[i] != b[i]) *differs = 1;
  }
  // END OPEN
}

// The buffer a call writes, and its size in bytes.
std::pair<void*, size_t> output_of(const Plan& p, const Args& a, const Buffers& b) {
  // BEGIN OPEN
  // GOAL: the buffer the call writes and its size in bytes.
  // STUB: TORCH_CHECK(false, "output_of is not implemented yet");
  const std::array<int64_t, 4>& shape = a.op == Op::kForward ? p.y : a.op == Op::kBackwardData ? p.x : p.w;
  void* out = a.op == Op::kForward ? b.y : a.op == Op::kBackwardData ? b.x : b.w;
  const size_t element = a.dtype == CUDNN_DATA_DOUBLE ? 8 : 4;
  return {out, element * static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3])};
  // END OPEN
}

// A captured graph is trusted only once it has reproduced the plain call bit for bit: the plain call
// runs, its output is kept, the output is overwritten with 0xFF bytes, the graph is replayed, and the
// two are compared. This catches a capture that missed some of cuDNN's work (work cuDNN queued
// elsewhere would otherwise go missing from every replay, silently). A nondeterministic algorithm
// (atomics) fails it and keeps the plain call: safe. It costs one sync, once per key. On return the
// call's output is right either way: true when the graph wrote it, false when the caller must run
// the plain call again.
bool graph_reproduces_call(DeviceHandle& device, const Graph& g, const Args& a, const Buffers& b,
                           const c10::DataPtr& ws) {
  // BEGIN OPEN
  // GOAL: run the call, keep its output, overwrite it, replay the graph, compare bit for bit: true when the graph
  // GOAL: reproduced it (the output is right either way).
  // STUB: TORCH_CHECK(false, "graph_reproduces_call is not implemented yet");
  const auto [out, bytes] = output_of(*g.plan, a, b);
  {
    BoundHandle h(device, a.stream);
    execute(*g.plan, a, b, ws, h.get());
  }
  if (bytes == 0) return false;
  c10::DataPtr kept = allocate_workspace(bytes);
  c10::DataPtr differs = allocate_workspace(sizeof(int));
  int host_differs = 1;
  const int blocks = static_cast<int>(std::min<size_t>((bytes + 255) / 256, 1024));
  bool ok = cudaMemcpyAsync(kept.get(), out, bytes, cudaMemcpyDeviceToDevice, a.stream) == cudaSuccess &&
            cudaMemsetAsync(out, 0xFF, bytes, a.stream) == cudaSuccess &&
            cudaMemsetAsync(differs.get(), 0, sizeof(int), a.stream) == cudaSuccess &&
            cudaGraphLaunch(g.exec.get(), a.stream) == cudaSuccess;
  if (ok) {
    bytes_differ_kernel<<<blocks, 256, 0, a.stream>>>(static_cast<const unsigned char*>(out),
                                                       static_cast<const unsigned char*>(kept.get()), bytes,
                                                       static_cast<int*>(differs.get()));
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpyAsync(&host_differs, differs.get(), sizeof(int), cudaMemcpyDeviceToHost, a.stream) == cudaSuccess &&
         cudaStreamSynchronize(a.stream) == cudaSuccess && host_differs == 0;
  }
  if (!ok) (void)cudaGetLastError();
  return ok;
  // END OPEN
}

// Runs the call as a graph when it can: true when it was replayed (or captured now and launched),
// false when the caller must run the plain call (graphs off, the caller capturing, the key's first
// call, or a key whose capture failed or did not reproduce the plain call).
bool run_as_graph(DeviceHandle& device, const std::shared_ptr<const Plan>& plan, const Args& a, const Buffers& b,
                  const c10::DataPtr& ws) {
  // BEGIN OPEN
  // GOAL: replay (or capture on its second call) this key's graph on the caller's stream; false when the plain call must
  // GOAL: run (graphs off, the caller capturing, first call, failed capture).
  // STUB: TORCH_CHECK(false, "run_as_graph is not implemented yet");
  if (!graphs_on.load(std::memory_order_relaxed) || caller_is_capturing(a.stream)) return false;
  const GraphKey key = graph_key(plan.get(), a, b, ws.get());
  bool capture_now = false;
  std::shared_ptr<Graph> g = graphs().find(key, &capture_now);
  if (!g && capture_now) {
    course::took("graph.capture");
    std::shared_ptr<Graph> fresh = capture(device, plan, a, b, ws);
    const bool trusted = fresh->exec && graph_reproduces_call(device, *fresh, a, b, ws);
    if (!trusted) fresh->exec.reset();  // remembered as failed: this key runs the plain call
    g = graphs().insert(key, fresh);
    if (g == fresh) return trusted;  // this call's output is already written (by the graph if trusted)
  }
  if (!g || !g->exec) return false;
  course::took("graph.replay");
  std::lock_guard<std::mutex> lock(g->launch_mu);
  if (cudaGraphLaunch(g->exec.get(), a.stream) != cudaSuccess) {
    (void)cudaGetLastError();  // nothing was queued: the plain call runs instead
    return false;
  }
  return true;
  // END OPEN
}

}  // namespace

// ------------------------------------------------------------------------------------------- run

void run(const Args& a, const Buffers& b) {
  // BEGIN OPEN
  // GOAL: the call on a.stream: uncached, or the plan from the cache (built and inserted on a miss), its workspace from the
  // GOAL: caching allocator, run as a graph where it can be, else executed (Interface; Background: Workspace).
  DeviceHandle& device = handle_for(a.device);
  // (planner paths: course/paths.h) the op, its dtype and math; below, the plan cache and the graphs
  if (a.dtype == CUDNN_DATA_DOUBLE) {
    course::took<double>(a.op == Op::kForward ? "forward" : a.op == Op::kBackwardData ? "backward_data" : "backward_filter");
  } else {
    course::took<float>(a.op == Op::kForward ? "forward" : a.op == Op::kBackwardData ? "backward_data" : "backward_filter");
  }
  if (a.dtype == CUDNN_DATA_FLOAT) course::took(a.allow_tf32 ? "math.tf32_allowed" : "math.strict");
  if (a.mode == Mode::kUncached) {
    course::took("mode.uncached");
    // Everything built for this call and destroyed when it returns: the cost the cache removes.
    Plan plan = describe(a);
    BoundHandle h(device, a.stream);
    choose_algorithm(plan, a, b, h.get());
    check_plan(plan, a);
    c10::DataPtr ws = allocate_workspace(plan.workspace_bytes);
    execute(plan, a, b, ws, h.get());
    return;
  }
  const Key key = make_key(a);
  std::shared_ptr<const Plan> plan = cache().find(key);
  course::took(plan ? "plan.hit" : a.mode == Mode::kBenchmark ? "plan.miss.benchmark" : "plan.miss.heuristic");
  if (!plan) {
    auto fresh = std::make_shared<Plan>(describe(a));
    {
      BoundHandle h(device, a.stream);
      choose_algorithm(*fresh, a, b, h.get());
    }
    plan = cache().insert(key, std::move(fresh));
  }
  check_plan(*plan, a);
  c10::DataPtr ws = allocate_workspace(plan->workspace_bytes);  // held until the work is queued
  if (run_as_graph(device, plan, a, b, ws)) return;
  BoundHandle h(device, a.stream);
  execute(*plan, a, b, ws, h.get());
  // END OPEN
}

void backward_bias(int device, cudaStream_t stream, cudnnDataType_t dtype, const std::array<int64_t, 4>& dy_shape,
                   const void* dy, void* db) {
  // BEGIN OPEN
  // GOAL: db = the per-channel sum of dy, on `stream`, through cuDNN (Background: The bias).
  TensorDesc dy_desc, db_desc;  // two descriptors per call: cheap next to a convolution's plan
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(dy_desc.get(), CUDNN_TENSOR_NCHW, dtype, as_int(dy_shape[0]),
                                         as_int(dy_shape[1]), as_int(dy_shape[2]), as_int(dy_shape[3])));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(db_desc.get(), CUDNN_TENSOR_NCHW, dtype, 1, as_int(dy_shape[1]), 1, 1));
  BoundHandle h(handle_for(device), stream);
  CUDNN_CHECK(cudnnConvolutionBackwardBias(h.get(), one(dtype), dy_desc.get(), dy, zero(dtype), db_desc.get(), db));
  // END OPEN
}

// dst += src, two dense tensors of `shape`, on `stream`, by cudnnAddTensor (C = alpha * A + beta * C with
// alpha = beta = 1): the pieces of a split batch's gradient summed by cuDNN, so the op runs cuDNN's kernels only.
void add_into(int device, cudaStream_t stream, cudnnDataType_t dtype, const std::array<int64_t, 4>& shape,
              const void* src, void* dst) {
  TensorDesc desc;
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc.get(), CUDNN_TENSOR_NCHW, dtype, as_int(shape[0]), as_int(shape[1]),
                                         as_int(shape[2]), as_int(shape[3])));
  BoundHandle h(handle_for(device), stream);
  CUDNN_CHECK(cudnnAddTensor(h.get(), one(dtype), desc.get(), src, one(dtype), desc.get(), dst));
}

CacheStats cache_stats() {
  // BEGIN OPEN
  // GOAL: the plan cache's stats, the launch cache's and whether graphs are on, in one CacheStats.
  // STUB: TORCH_CHECK(false, "cache_stats is not implemented yet");
  CacheStats s = cache().stats();
  graphs().stats(&s);
  s.graphs_enabled = graphs_on.load();
  return s;
  // END OPEN
}
void cache_clear() {
  // BEGIN OPEN
  // GOAL: both caches emptied (plans and graphs), their counts reset.
  cache().clear();
  graphs().clear();
  // END OPEN
}
void cache_set_capacity(int64_t capacity) { cache().set_capacity(static_cast<size_t>(capacity)); }
void set_graphs(bool enabled) { graphs_on.store(enabled); }

}  // namespace conv
