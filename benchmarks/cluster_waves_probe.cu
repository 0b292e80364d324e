// cluster_waves_probe: do clusters of C CTAs at 2 (100 KB of shared memory) or 4 (50 KB) CTAs
// per SM fit in one wave on this GPU, under the spread and load-balancing cluster scheduling
// policies? cudaOccupancyMaxActiveClusters, then a grid of CTAs that each spin 50 us, timed with
// events (one wave: ~the spin time; two: twice it), and the most CTAs any SM received over the
// launch. Standalone (no torch): nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o
// cluster_waves benchmarks/cluster_waves_probe.cu. Results: benchmarks/results/NOTES.md session 69.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void spin(unsigned long long ns, int* smids) {
  extern __shared__ char s[];
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  if (threadIdx.x == 0) { smids[blockIdx.x] = int(smid); s[0] = 1; }
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
int main() {
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, 110 * 1024);
  cudaFuncSetAttribute(spin, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int* smids; cudaMalloc(&smids, 4096 * sizeof(int));
  int host[4096];
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  struct Case { int smem_kb, ctas, cluster; };
  const Case cases[] = {{100, 224, 1}, {100, 256, 1}, {100, 264, 1}, {100, 256, 2}, {100, 256, 4},
                        {100, 256, 8}, {100, 224, 8}, {100, 240, 16}, {50, 448, 1}, {50, 512, 8},
                        {50, 448, 8}, {50, 448, 16}, {50, 528, 8}};
  for (const Case& c : cases) {
    for (int policy = 0; policy < 2; ++policy) {
      cudaLaunchAttribute attr[2];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = c.cluster; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
      attr[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
      attr[1].val.clusterSchedulingPolicyPreference =
          policy ? cudaClusterSchedulingPolicyLoadBalancing : cudaClusterSchedulingPolicySpread;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(c.ctas); cfg.blockDim = dim3(128); cfg.dynamicSmemBytes = c.smem_kb * 1024;
      cfg.attrs = attr; cfg.numAttrs = 2;
      int active = -1;
      cudaError_t q = cudaOccupancyMaxActiveClusters(&active, spin, &cfg);
      float best = 1e9f;
      for (int rep = 0; rep < 3; ++rep) {
        cudaEventRecord(e0);
        cudaError_t l = cudaLaunchKernelEx(&cfg, spin, 50000ull, smids);
        cudaEventRecord(e1); cudaEventSynchronize(e1);
        if (l != cudaSuccess) { printf("launch error %s\n", cudaGetErrorString(l)); break; }
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
      }
      cudaMemcpy(host, smids, c.ctas * sizeof(int), cudaMemcpyDeviceToHost);
      int per_sm[256] = {0}, most = 0;
      for (int i = 0; i < c.ctas; ++i) { int v = ++per_sm[host[i] & 255]; if (v > most) most = v; }
      printf("smem %3d KB, %4d CTAs, cluster %2d, %s: max active clusters %4d (%s) -> %4d CTAs; "
             "time %6.1f us for a 50 us spin (%.2f waves); most CTAs on one SM %d\n",
             c.smem_kb, c.ctas, c.cluster, policy ? "load-balancing" : "spread", active,
             cudaGetErrorString(q), active * c.cluster, best * 1000.f, best * 1000.f / 50.f, most);
    }
  }
  return 0;
}
