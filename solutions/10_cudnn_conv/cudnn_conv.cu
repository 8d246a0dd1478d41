// Exercise 10: convolution plans (descriptors + algorithm + workspace size), their cache, and the
// cuDNN calls that run them.
//
// Host code only: cuDNN's own kernels do the work, so this file has no kernels. It includes no ATen
// tensor headers, so an edit here rebuilds in seconds; tensors and registration are in cudnn_conv.cpp.
// Order: helpers -> descriptors -> cache -> algorithm choice -> the call -> run().
#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>

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
  // FNV-1a over the key's 64-bit words (it is all int64_t, no padding, so equal keys hash equally):
  // 20 steps per lookup instead of 160 for its bytes. The last line mixes the high bits down.
  uint64_t words[sizeof(Key) / sizeof(uint64_t)];
  std::memcpy(words, &key, sizeof(Key));
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : words) {
    h ^= w;
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
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
cudnnMathType_t math_type_for(const Args& a) {
  if (a.dtype != CUDNN_DATA_FLOAT) return CUDNN_DEFAULT_MATH;
  return a.allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

// alpha = 1 and beta = 0 (overwrite the output), in the type cuDNN expects for the data type.
const void* one(cudnnDataType_t t) {
  static const float f = 1.0f;
  static const double d = 1.0;
  return t == CUDNN_DATA_DOUBLE ? static_cast<const void*>(&d) : static_cast<const void*>(&f);
}
const void* zero(cudnnDataType_t t) {
  static const float f = 0.0f;
  static const double d = 0.0;
  return t == CUDNN_DATA_DOUBLE ? static_cast<const void*>(&d) : static_cast<const void*>(&f);
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
};

DeviceHandle& handle_for(int device) {
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
}

// The device's handle, locked and bound to the caller's stream for as long as this object lives.
class BoundHandle {
 public:
  BoundHandle(DeviceHandle& device, cudaStream_t stream) : lock_(device.mu), handle_(device.handle) {
    // BEGIN SOLUTION
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
  Key key;
  // BEGIN SOLUTION
  // TODO: fill every field of `key` from `a`: op, mode, device, dtype, layout (CUDNN_TENSOR_NCHW),
  // TODO: allow_tf32, the x and w shapes, stride, padding and dilation. A field left out lets two
  // TODO: calls that need different plans share one.
  // STUB: TORCH_CHECK(false, "make_key (cudnn_conv.cu) is not implemented yet");
  key.op = static_cast<int64_t>(a.op);
  key.mode = static_cast<int64_t>(a.mode);
  key.device = a.device;
  key.dtype = a.dtype;
  key.layout = CUDNN_TENSOR_NCHW;
  key.allow_tf32 = a.allow_tf32;
  key.x = a.x;
  key.w = a.w;
  key.stride = a.stride;
  key.padding = a.padding;
  key.dilation = a.dilation;
  // END SOLUTION
  return key;
}

}  // namespace

// ------------------------------------------------------------------------------- descriptors

Plan describe(const Args& a) {
  Plan plan;  // its constructor created the four descriptors; they are destroyed with it
  plan.x = a.x;
  plan.w = a.w;
  // BEGIN SOLUTION
  // TODO: set x_desc (4-d NCHW tensor of a.dtype), w_desc (a KCRS filter, NCHW format) and conv_desc
  // TODO: (2-d cross-correlation with a.padding, a.stride, a.dilation, computing in a.dtype) and its
  // TODO: math type (math_type_for(a)) into plan.math; then ask cuDNN for the output shape
  // TODO: (cudnnGetConvolution2dForwardOutputDim) into plan.y and set y_desc to it. CUDNN_CHECK each call.
  // STUB: TORCH_CHECK(false, "describe (cudnn_conv.cu) is not implemented yet");
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x_desc.get(), CUDNN_TENSOR_NCHW, a.dtype, as_int(a.x[0]),
                                         as_int(a.x[1]), as_int(a.x[2]), as_int(a.x[3])));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w_desc.get(), a.dtype, CUDNN_TENSOR_NCHW, as_int(a.w[0]),
                                         as_int(a.w[1]), as_int(a.w[2]), as_int(a.w[3])));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv_desc.get(), as_int(a.padding[0]), as_int(a.padding[1]),
                                              as_int(a.stride[0]), as_int(a.stride[1]), as_int(a.dilation[0]),
                                              as_int(a.dilation[1]), CUDNN_CROSS_CORRELATION, a.dtype));
  plan.math = math_type_for(a);
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc.get(), plan.math));
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.conv_desc.get(), plan.x_desc.get(), plan.w_desc.get(),
                                                    &n, &c, &h, &w));
  plan.y = {n, c, h, w};
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y_desc.get(), CUDNN_TENSOR_NCHW, a.dtype, n, c, h, w));
  // END SOLUTION
  return plan;
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
    std::lock_guard<std::mutex> lock(mu_);
    int64_t workspace = 0;
    for (const Entry& e : lru_) workspace = std::max<int64_t>(workspace, e.second->workspace_bytes);
    return {hits_, misses_, evictions_, static_cast<int64_t>(lru_.size()), static_cast<int64_t>(capacity_), workspace};
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    index_.clear();
    lru_.clear();
    hits_ = misses_ = evictions_ = 0;
  }
  void set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity;
    evict_over_capacity();
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const Plan>>;

  void evict_over_capacity() {  // the caller holds mu_
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      ++evictions_;
    }
  }

  std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  size_t capacity_ = 256;
  int64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

std::shared_ptr<const Plan> PlanCache::find(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const Plan> found;
  // BEGIN SOLUTION
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
}

std::shared_ptr<const Plan> PlanCache::insert(const Key& key, std::shared_ptr<const Plan> plan) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const Plan> kept;
  // BEGIN SOLUTION
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
  std::vector<Candidate> out;
  for (int i = 0; i < returned; ++i) {
    out.push_back({static_cast<int>(perf[i].algo), perf[i].status, perf[i].memory, perf[i].mathType, perf[i].time});
  }
  return out;
}

int algorithm_count(cudnnHandle_t h, Op op) {
  int count = 0;
  switch (op) {
    case Op::kForward: CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count)); break;
    case Op::kBackwardData: CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count)); break;
    case Op::kBackwardFilter: CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count)); break;
  }
  return count;
}

// The workspace `algo` needs with the plan's current math type; false if cuDNN does not support it here.
bool workspace_size(cudnnHandle_t h, const Plan& p, Op op, int algo, size_t* bytes) {
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
}

// cuDNN's heuristic: its ranking of the algorithms, best first, without running any.
std::vector<Candidate> heuristic_candidates(cudnnHandle_t h, const Plan& p, Op op) {
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
}

// Largest workspace a benchmark may give the algorithms: what the hungriest one asks for, up to this.
constexpr size_t kMaxFindWorkspace = size_t(4) << 30;

// A workspace for cudnnFind...Ex: as large as the hungriest algorithm wants (capped), halved while
// the allocator is out of memory; algorithms that need more than it get are reported as failed.
c10::DataPtr find_workspace(cudnnHandle_t h, const Plan& p, Op op, size_t* bytes) {
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
}

// Benchmark: cuDNN runs every algorithm on the call's own buffers (it writes the output, which the
// real call overwrites next) and returns them fastest first.
std::vector<Candidate> benchmark_candidates(cudnnHandle_t h, const Plan& p, Op op, const Buffers& b, void* workspace,
                                            size_t workspace_bytes) {
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
}

// Sets plan.algo, plan.math and plan.workspace_bytes.
void choose_algorithm(Plan& plan, const Args& a, const Buffers& b, cudnnHandle_t h) {
  // BEGIN SOLUTION
  // TODO: get the candidates, best first: with Mode::kBenchmark from benchmark_candidates (give it
  // TODO: find_workspace(...), kept alive until it returns), otherwise from heuristic_candidates.
  // TODO: Take the first whose status is CUDNN_STATUS_SUCCESS; for strict fp32 (float without
  // TODO: allow_tf32) skip any whose math is a Tensor Core one and keep CUDNN_FMA_MATH, otherwise use
  // TODO: the candidate's math. Set it on conv_desc (cudnnSetConvolutionMathType), then ask
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
    if (strict && (c.math == CUDNN_TENSOR_OP_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
    plan.algo = c.algo;
    plan.math = strict ? CUDNN_FMA_MATH : c.math;
    break;
  }
  TORCH_CHECK(plan.algo >= 0, "cuDNN offers no usable algorithm for this convolution: x ", ref(a.x), ", w ",
              ref(a.w), ", y ", ref(a.y));
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc.get(), plan.math));
  TORCH_CHECK(workspace_size(h, plan, a.op, plan.algo, &plan.workspace_bytes),
              "cuDNN cannot size the workspace of the algorithm it chose (", std::to_string(plan.algo), ")");
  // END SOLUTION
}

// -------------------------------------------------------------------------------------- the call

void execute(const Plan& plan, const Args& a, const Buffers& b, cudnnHandle_t h) {
  // BEGIN SOLUTION
  // TODO: take plan.workspace_bytes from allocate_workspace (never a null pointer with a non-zero
  // TODO: size), then run plan.algo with cudnnConvolutionForward (writes b.y), ...BackwardData
  // TODO: (writes b.x) or ...BackwardFilter (writes b.w) by a.op, with one(a.dtype) and zero(a.dtype).
  // STUB: TORCH_CHECK(false, "execute (cudnn_conv.cu) is not implemented yet");
  c10::DataPtr ws = allocate_workspace(plan.workspace_bytes);
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
}

// A plan found under this call's key must describe this call's tensors. If it does not, the key
// misses a field that changes the plan, and running it would read or write out of bounds: stop.
void check_plan(const Plan& p, const Args& a) {
  TORCH_CHECK(p.x == a.x && p.w == a.w && p.y == a.y, "the plan found for this call describes x ", ref(p.x),
              ", w ", ref(p.w), ", y ", ref(p.y), " but the call has x ", ref(a.x), ", w ", ref(a.w), ", y ",
              ref(a.y), ": the cache key is missing a field that changes the plan");
}

}  // namespace

// ------------------------------------------------------------------------------------------- run

void run(const Args& a, const Buffers& b) {
  DeviceHandle& device = handle_for(a.device);
  if (a.mode == Mode::kUncached) {
    // Everything built for this call and destroyed when it returns: the cost the cache removes.
    Plan plan = describe(a);
    BoundHandle h(device, a.stream);
    choose_algorithm(plan, a, b, h.get());
    check_plan(plan, a);
    execute(plan, a, b, h.get());
    return;
  }
  const Key key = make_key(a);
  std::shared_ptr<const Plan> plan = cache().find(key);
  if (!plan) {
    auto fresh = std::make_shared<Plan>(describe(a));
    {
      BoundHandle h(device, a.stream);
      choose_algorithm(*fresh, a, b, h.get());
    }
    plan = cache().insert(key, std::move(fresh));
  }
  check_plan(*plan, a);
  BoundHandle h(device, a.stream);
  execute(*plan, a, b, h.get());
}

CacheStats cache_stats() { return cache().stats(); }
void cache_clear() { cache().clear(); }
void cache_set_capacity(int64_t capacity) { cache().set_capacity(static_cast<size_t>(capacity)); }

}  // namespace conv
