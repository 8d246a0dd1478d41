// Exercise 10's algorithm set on a GPU: cuDNN's legacy Find (what the op chooses among) against the graph
// (backend) API's engines (what PyTorch chooses among), for the forward, data-gradient and weight-gradient
// convolutions, strict fp32 and TF32. Built and run by scripts/cudnn_engines_probe.py, which also times
// PyTorch on the same shapes; shapes arrive on stdin, one a line: name n c h w k r s sh sw ph pw dh dw groups.
//
// Legacy: cudnnFind...AlgorithmEx under CUDNN_FMA_MATH (strict) or CUDNN_TENSOR_OP_MATH (TF32), its fastest
// usable algorithm re-timed. Engines: every configuration of heuristics A, instant and fallback, filtered as
// PyTorch filters them (no DOWN_CONVERT_INPUTS; strict: no TENSOR_CORE note), each finalized, run and timed;
// the fastest kept. Tensors declare 16-byte alignment, as PyTorch's do for cudaMalloc'd storage: at 4 bytes
// the Tensor Core engines of 1x1 convolutions ran 2-3x slower (H200, 2026-12-02).
// Times: CUDA events, 2 warm-up calls, median of 15, L2 flushed (256 MiB written) before each.
// The error: normwise, of the fastest engine's output against the legacy strict output of the same op.
// A probe: the backend descriptors it creates are not destroyed (a few thousand, freed at exit).
#include <cudnn.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(e)                                                                                  \
  do {                                                                                         \
    cudnnStatus_t s_ = (e);                                                                    \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                          \
      char m_[512] = {0};                                                                      \
      cudnnGetLastErrorString(m_, sizeof m_);                                                  \
      fprintf(stderr, "%s:%d %s: %s %s\n", __FILE__, __LINE__, #e, cudnnGetErrorString(s_), m_); \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)
#define CC(e)                                                          \
  do {                                                                 \
    cudaError_t s_ = (e);                                              \
    if (s_ != cudaSuccess) {                                           \
      fprintf(stderr, "%s: %s\n", #e, cudaGetErrorString(s_));         \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

enum OpKind { kForward = 0, kData = 1, kFilter = 2 };

struct Shape {
  std::string name;
  int n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, g;
};

// One call's tensors: x (n, c, h, w), w (k, c / g, r, s), y (n, k, oh, ow). Every op reads two and writes the third.
struct Call {
  Shape S;
  int64_t xd[4], wd[4], yd[4];
  size_t nx, nw, ny;
  float *x, *w, *y;
  float* out(OpKind op) const { return op == kForward ? y : op == kData ? x : w; }
  size_t nout(OpKind op) const { return op == kForward ? ny : op == kData ? nx : nw; }
};

__global__ void fill(float* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned v = (unsigned)i * 2654435761u ^ seed;
    v ^= v >> 13;
    v *= 0x5bd1e995u;
    v ^= v >> 15;
    p[i] = (v & 0xffff) / 32768.0f - 1.0f;
  }
}

struct Timing {
  void* flush;
  size_t flush_bytes;
  template <class F>
  float us(F f) const {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    f();
    f();
    CC(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < 15; ++i) {
      cudaMemsetAsync(flush, i, flush_bytes);
      cudaEventRecord(a);
      f();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      ts.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ts.begin(), ts.end());
    return 1000 * ts[ts.size() / 2];
  }
};

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = (double)got[i] - ref[i];
    num += d * d;
    den += (double)ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The legacy API: cudnnFind's fastest usable algorithm, re-timed; -1 when none is usable.
float legacy_us(cudnnHandle_t h, const Call& c, OpKind op, bool tf32, void* ws, size_t ws_cap, const Timing& t) {
  const Shape& S = c.S;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CK(cudnnCreateTensorDescriptor(&xd));
  CK(cudnnCreateTensorDescriptor(&yd));
  CK(cudnnCreateFilterDescriptor(&wd));
  CK(cudnnCreateConvolutionDescriptor(&cd));
  CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, S.n, S.c, S.h, S.w));
  CK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, S.n, S.k, (int)c.yd[2], (int)c.yd[3]));
  CK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, S.k, S.c / S.g, S.r, S.s));
  CK(cudnnSetConvolution2dDescriptor(cd, S.ph, S.pw, S.sh, S.sw, S.dh, S.dw, CUDNN_CROSS_CORRELATION,
                                     CUDNN_DATA_FLOAT));
  CK(cudnnSetConvolutionGroupCount(cd, S.g));
  CK(cudnnSetConvolutionMathType(cd, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int algo = -1;
  size_t mem = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  auto pick = [&](auto* perf, int returned) {  // fastest first; strict: FMA math only, as the op
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      if (!tf32 && perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH) continue;
      algo = (int)perf[i].algo;
      mem = perf[i].memory;
      math = perf[i].mathType;
      return;
    }
  };
  int returned = 0;
  if (op == kForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    CK(cudnnFindConvolutionForwardAlgorithmEx(h, xd, c.x, wd, c.w, cd, yd, c.y, 16, &returned, perf, ws, ws_cap));
    pick(perf, returned);
  } else if (op == kData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[16];
    CK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, c.w, yd, c.y, cd, xd, c.x, 16, &returned, perf, ws,
                                                   ws_cap));
    pick(perf, returned);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
    CK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, c.x, yd, c.y, cd, wd, c.w, 16, &returned, perf, ws,
                                                     ws_cap));
    pick(perf, returned);
  }
  float us = -1;
  if (algo >= 0) {
    CK(cudnnSetConvolutionMathType(cd, tf32 ? math : CUDNN_FMA_MATH));
    const float one = 1, zero = 0;
    us = t.us([&] {
      if (op == kForward)
        CK(cudnnConvolutionForward(h, &one, xd, c.x, wd, c.w, cd, (cudnnConvolutionFwdAlgo_t)algo, ws, mem, &zero,
                                   yd, c.y));
      else if (op == kData)
        CK(cudnnConvolutionBackwardData(h, &one, wd, c.w, yd, c.y, cd, (cudnnConvolutionBwdDataAlgo_t)algo, ws, mem,
                                        &zero, xd, c.x));
      else
        CK(cudnnConvolutionBackwardFilter(h, &one, xd, c.x, yd, c.y, cd, (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
                                          mem, &zero, wd, c.w));
    });
  }
  CK(cudnnDestroyTensorDescriptor(xd));
  CK(cudnnDestroyTensorDescriptor(yd));
  CK(cudnnDestroyFilterDescriptor(wd));
  CK(cudnnDestroyConvolutionDescriptor(cd));
  return us;
}

cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d;
  CK(cudnnBackendCreateDescriptor(type, &d));
  return d;
}
template <class T>
void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
         const T* values) {
  CK(cudnnBackendSetAttribute(d, name, type, n, values));
}

cudnnBackendDescriptor_t tensor(int64_t uid, const int64_t* dims) {
  const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const int64_t alignment = 16;
  cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  CK(cudnnBackendFinalize(d));
  return d;
}

// The operation graph of one convolution op, alpha 1, beta 0.
cudnnBackendDescriptor_t operation_graph(cudnnHandle_t h, const Call& c, OpKind op) {
  const Shape& S = c.S;
  cudnnBackendDescriptor_t tx = tensor('x', c.xd), tw = tensor('w', c.wd), ty = tensor('y', c.yd);
  cudnnBackendDescriptor_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t dims = 2, stride[2] = {S.sh, S.sw}, pad[2] = {S.ph, S.pw}, dilation[2] = {S.dh, S.dw};
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  CK(cudnnBackendFinalize(conv));
  const float alpha = 1, beta = 0;
  cudnnBackendDescriptor_t o;
  if (op == kForward) {
    o = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tx);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tw);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ty);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  } else if (op == kData) {
    o = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tx);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tw);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ty);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  } else {
    o = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tx);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tw);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ty);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(o, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  }
  CK(cudnnBackendFinalize(o));
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  CK(cudnnBackendFinalize(graph));
  return graph;
}

// The engine configurations PyTorch's cuDNN path draws from: heuristics A, instant and fallback, in that order.
// *from_a: how many came from heuristics A.
std::vector<cudnnBackendDescriptor_t> engine_configs(cudnnBackendDescriptor_t graph, int* from_a) {
  std::vector<cudnnBackendDescriptor_t> configs;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK}) {
    cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    CK(cudnnBackendFinalize(heur));
    int64_t count = 0, got = 0;
    CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                nullptr));
    std::vector<cudnnBackendDescriptor_t> found(count);
    for (auto& d : found) d = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                found.data()));
    configs.insert(configs.end(), found.begin(), found.begin() + got);
    if (mode == CUDNN_HEUR_MODE_A) *from_a = (int)got;
  }
  return configs;
}

// The graph API: every engine configuration PyTorch would allow, timed; the fastest one's time, its description and
// its output in *best_out.
float engines_us(cudnnHandle_t h, const Call& c, OpKind op, bool tf32, void* ws, size_t ws_cap, const Timing& t,
                 std::string* best, std::vector<float>* best_out, int* allowed, int* ran) {
  cudnnBackendDescriptor_t graph = operation_graph(h, c, op);
  int from_a = 0;
  const std::vector<cudnnBackendDescriptor_t> configs = engine_configs(graph, &from_a);
  float best_us = 1e30f;
  *allowed = *ran = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    cudnnBackendDescriptor_t engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    if (cudnnBackendGetAttribute(configs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &engine) != CUDNN_STATUS_SUCCESS)
      continue;
    cudnnBackendNumericalNote_t notes[16];
    int64_t note_count = 0, index = -1;
    cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 16, &note_count,
                             notes);
    cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
    bool tensor_core = false, down_convert = false;
    std::string noted;
    for (int64_t j = 0; j < note_count; ++j) {
      tensor_core |= notes[j] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
      down_convert |= notes[j] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
      noted += (noted.empty() ? "" : ",") + std::to_string((int)notes[j]);
    }
    if (down_convert || (!tf32 && tensor_core)) continue;  // PyTorch's filter
    ++*allowed;
    cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
    if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) continue;
    int64_t workspace = 0;
    CK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &workspace));
    if ((size_t)workspace > ws_cap) continue;
    cudnnBackendDescriptor_t pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    const int64_t uids[3] = {'x', 'w', 'y'};
    void* pointers[3] = {c.x, c.w, c.y};
    set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers);
    set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    CK(cudnnBackendFinalize(pack));
    if (cudnnBackendExecute(h, plan, pack) != CUDNN_STATUS_SUCCESS) continue;
    ++*ran;
    const float us = t.us([&] { CK(cudnnBackendExecute(h, plan, pack)); });
    if (us < best_us) {
      best_us = us;
      *best = "engine " + std::to_string(index) + " (" + noted + "), " +
              ((int)i < from_a ? "heuristics A #" + std::to_string(i) : "instant or fallback");
      best_out->resize(c.nout(op));
      CC(cudaMemcpy(best_out->data(), c.out(op), c.nout(op) * 4, cudaMemcpyDeviceToHost));
    }
  }
  return best_us;
}

int main() {
  std::vector<Shape> shapes;
  char name[128];
  Shape S{};
  while (scanf("%127s %d %d %d %d %d %d %d %d %d %d %d %d %d %d", name, &S.n, &S.c, &S.h, &S.w, &S.k, &S.r, &S.s,
               &S.sh, &S.sw, &S.ph, &S.pw, &S.dh, &S.dw, &S.g) == 15) {
    S.name = name;
    shapes.push_back(S);
  }
  cudnnHandle_t h;
  CK(cudnnCreate(&h));
  Timing t{nullptr, size_t(256) << 20};
  CC(cudaMalloc(&t.flush, t.flush_bytes));
  const size_t ws_cap = size_t(2) << 30;
  void* ws;
  CC(cudaMalloc(&ws, ws_cap));
  printf("cuDNN %zu\n", cudnnGetVersion());
  printf("%-24s %-5s %-6s %10s %10s  %s\n", "shape", "op", "mode", "legacy_us", "engine_us",
         "fastest engine (numerical notes), source, error");
  for (const Shape& shape : shapes) {
    Call c{shape};
    const Shape& s = c.S;
    const int64_t oh = (s.h + 2 * s.ph - s.dh * (s.r - 1) - 1) / s.sh + 1;
    const int64_t ow = (s.w + 2 * s.pw - s.dw * (s.s - 1) - 1) / s.sw + 1;
    const int64_t xd[4] = {s.n, s.c, s.h, s.w}, wd[4] = {s.k, s.c / s.g, s.r, s.s}, yd[4] = {s.n, s.k, oh, ow};
    std::copy(xd, xd + 4, c.xd);
    std::copy(wd, wd + 4, c.wd);
    std::copy(yd, yd + 4, c.yd);
    c.nx = xd[0] * xd[1] * xd[2] * xd[3];
    c.nw = wd[0] * wd[1] * wd[2] * wd[3];
    c.ny = yd[0] * yd[1] * yd[2] * yd[3];
    CC(cudaMalloc(&c.x, c.nx * 4));
    CC(cudaMalloc(&c.w, c.nw * 4));
    CC(cudaMalloc(&c.y, c.ny * 4));
    fill<<<1024, 256>>>(c.x, c.nx, 1);
    fill<<<1024, 256>>>(c.w, c.nw, 2);
    fill<<<1024, 256>>>(c.y, c.ny, 3);
    for (OpKind op : {kForward, kData, kFilter}) {
      const char* op_name = op == kForward ? "fwd" : op == kData ? "dgrad" : "wgrad";
      std::vector<float> reference(c.nout(op));
      for (bool tf32 : {false, true}) {
        const float legacy = legacy_us(h, c, op, tf32, ws, ws_cap, t);
        if (!tf32) CC(cudaMemcpy(reference.data(), c.out(op), c.nout(op) * 4, cudaMemcpyDeviceToHost));
        std::string best;
        std::vector<float> best_out;
        int allowed = 0, ran = 0;
        const float engines = engines_us(h, c, op, tf32, ws, ws_cap, t, &best, &best_out, &allowed, &ran);
        printf("%-24s %-5s %-6s %10.1f %10.1f  %s, error %.1e (%d engines allowed, %d ran)\n", s.name.c_str(),
               op_name, tf32 ? "tf32" : "strict", legacy, engines, best.c_str(),
               best_out.empty() ? -1.0 : rel_err(best_out, reference), allowed, ran);
        fflush(stdout);
      }
    }
    cudaFree(c.x);
    cudaFree(c.w);
    cudaFree(c.y);
  }
  return 0;
}
