// The most an mma.sync kernel can reach on this GPU: warps issuing nothing but independent tensor-core
// instructions (16 accumulators each, operands in registers, no memory traffic), for TF32 (m16n8k8) and
// BF16 (m16n8k16), at 4, 8 and 16 warps per SM. 05's kernel 5 is measured against this ceiling and against
// cuBLAS (on Hopper cuBLAS uses `wgmma`, a different instruction with a higher one).
//
//   nvcc -arch=sm_80 -O3 scripts/mma_peak.cu -o /tmp/mma_peak && /tmp/mma_peak     (compute capability 8.0+)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

template <bool kTf32>
__global__ void mma_only(float* out, int iters, uint32_t seed) {
  float acc[16][4] = {};
  uint32_t a[4], b[2];  // arbitrary bits, so the compiler cannot fold anything
  for (int i = 0; i < 4; ++i) a[i] = seed * (threadIdx.x + i);
  for (int i = 0; i < 2; ++i) b[i] = seed * (threadIdx.x + 7 * i);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      if constexpr (kTf32) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      }
    }
  }
  float sum = 0.0f;  // stored, so that the work is kept
  for (int j = 0; j < 16; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

int main() {
  int sms = 0, clock_khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  float* out = nullptr;
  if (cudaMalloc(&out, sizeof(float) * sms * 2 * 256) != cudaSuccess) return 1;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int tf32 = 1; tf32 >= 0; --tf32) {
    for (int warps_per_sm : {4, 8, 16}) {
      const int iters = 4096, blocks = 2 * sms, threads = 32 * warps_per_sm / 2;
      float ms = 0.0f;
      for (int rep = 0; rep < 3; ++rep) {  // the last of three runs: the clocks have risen by then
        cudaEventRecord(start);
        if (tf32) {
          mma_only<true><<<blocks, threads>>>(out, iters, 3);
        } else {
          mma_only<false><<<blocks, threads>>>(out, iters, 3);
        }
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        cudaEventElapsedTime(&ms, start, stop);
      }
      const double flops_per_mma = tf32 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
      const double flops = double(blocks) * (threads / 32) * iters * 16 * flops_per_mma;
      std::printf("%s mma.sync, %2d warps per SM: %6.1f TFLOP/s\n", tf32 ? "TF32 m16n8k8 " : "BF16 m16n8k16",
                  warps_per_sm, flops / (ms * 1e-3) / 1e12);
    }
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::printf("%d SMs, clock %d MHz\n", sms, clock_khz / 1000);
  return 0;
}
