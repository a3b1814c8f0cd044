// Hand-written expert lowering of the suite entries `conv2d.fp16` and (with -DFP8=1)
// `conv2d.fp8` for sm_90a (3x3, stride 1, pad 1, NHWC; fp32 accumulate, fp16 out).
// Compiled to PTX by gen.py (nvcc -arch=sm_90a -ptx).
//
// Implicit GEMM with overlap reuse: a CTA owns a TH x TW = 16 x 8 block of output pixels of one
// image (2 warpgroups, 8 x 8 pixels = the wgmma M of 64 each) and 128 output channels. Per chunk of
// 128 bytes of input channels (64 fp16 / 128 fp8) it loads the (TH+2) x (TW+2) = 18 x 10 input
// window ONCE into shared memory, zero-filled outside the image (the padding) and past C, and
// feeds all 9 filter taps from it: the A operand of tap (r, s) is the same window seen through a
// shifted wgmma matrix descriptor (start = pixel (r, s), SBO = one window row), no per-tap gather.
// Window layout: [16-byte channel chunk j][window pixel p] (no-swizzle core matrices: 8 pixels of
// an output row are 8 consecutive 16-byte rows). Filters: w[co, r, s, c-chunk] tiles (128 co x
// 128 B) by TMA (a rank-3 tensor map each CTA builds once in its 128-byte slot of Triton's
// global scratch; 128B swizzle, zero fill past C and CO) through a 4-deep mbarrier ring
// (-DF_TMA=0: cp.async, no-swizzle); the window (cp.async, zero-filled halo) is double-buffered.
// Loads are issued two (chunk, tap) steps ahead; wgmma.wait_group 1 keeps one step in flight.
// Persistent over tiles (grid-stride), so any grid size is correct.
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef FP8
#define FP8 0
#endif
#ifndef F_TMA
#define F_TMA 1     // filter tiles by TMA (a tensor map built on the device in Triton's global scratch)
#endif
#define TH 16
#define TW 8
#define WH (TH + 2)
#define WW (TW + 2)
#define WPIX (WH * WW)                  // 180 window pixels
#define CHB 128                         // bytes of channels per chunk
#define NCH (CHB / 16)                  // 16-byte chunks per pixel per chunk
#define WIN_BYTES (NCH * WPIX * 16)     // 23040
#define BN 128                          // output channels per CTA tile
#define FB_BYTES (NCH * BN * 16)        // 16384
#define FSTAGES 4
#define AHEAD 2
#define ISZ (FP8 ? 1 : 2)

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// sm_90 matrix descriptor, no swizzle (PTX ISA 9.1 s9.7.15.5.1): start>>4 [0,14),
// LBO>>4 [16,30) = next 16-byte K chunk, SBO>>4 [32,46) = next 8-row group.
__device__ __forceinline__ uint64_t desc_nosw(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// TMA tile load of the 3-D box at (c0, c1, c2) (innermost first) of the tensor map at `tmap`
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tmap, int c0, int c1, int c2,
                                            uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];\n"
               :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
// The filter tensor map: w (CO, 9, C) as rank 3 (C inner, tap, CO outer), box CHB bytes of
// channels x 1 tap x 128 output channels, 128B swizzle, zero fill past C and CO (CUtensorMap
// fields through PTX ISA 9.1 s9.7.9.27 tensormap.replace), built in the zeroed 128-byte shared
// buffer `smap`, copied to the global slot `gmap` with the tensormap-proxy release and acquired.
// Called by the whole warp 0 (the .sync.aligned copy); lane 0 writes the fields.
__device__ __forceinline__ void build_wmap(uint32_t smap, void* gmap, const void* base, int C,
                                           int CO, int lane) {
  if (lane == 0) {
    asm volatile(
        "tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\n"
        "tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], 2;\n"
        "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 0, %5;\n"
        "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, 1;\n"
        "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 2, 128;\n"
        "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %2;\n"
        "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, 9;\n"
        "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 2, %3;\n"
        "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %4;\n"
        "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 1, %6;\n"
        "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 0, 1;\n"
        "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, 1;\n"
        "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 2, 1;\n"
        "tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], %7;\n"
        "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;\n"
        :: "r"(smap), "l"(base), "r"(C), "r"(CO), "l"((uint64_t)C * ISZ), "r"(CHB / ISZ),
           "l"((uint64_t)C * ISZ * 9), "n"(FP8 ? 0 : 6) : "memory");
  }
  __syncwarp();
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
      " [%0], [%1], 128;\n"
      "fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n"
      :: "l"(gmap), "r"(smap) : "memory");
}
// sm_90 matrix descriptor of a K-major 128B-swizzled tile (rows of 128 B, 8-row groups 1024 B
// apart; LBO unused = 1)
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

#define WGMMA_ARGS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define D64 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23," \
  "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"

// d (64 x 128 f32) += A (64 x 32 bytes of K, smem desc) * B (128 x 32 bytes of K, smem desc)
__device__ __forceinline__ void wgmma_ss(float* d, uint64_t adesc, uint64_t bdesc) {
#if FP8
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " D64
               ", %64, %65, 1, 1, 1;\n" : WGMMA_ARGS : "l"(adesc), "l"(bdesc));
#else
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " D64
               ", %64, %65, 1, 1, 1, 0, 0;\n" : WGMMA_ARGS : "l"(adesc), "l"(bdesc));
#endif
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait(float* d) {
  asm volatile("wgmma.wait_group.sync.aligned %64;\n" : WGMMA_ARGS : "n"(N) : "memory");
}

extern "C" __global__ void __launch_bounds__(256, 2)   // 2 CTAs per SM (<= 128 registers)
conv2d_kernel(const uint8_t* __restrict__ x, const uint8_t* __restrict__ w, __half* __restrict__ out,
              int NB, int H, int W, int C, int CO, void* global_scratch, void* profile_scratch) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t win0 = smem_u32(smem);                 // 2 window buffers
  const uint32_t fil0 = win0 + 2 * WIN_BYTES;            // FSTAGES filter tiles (1024-aligned)
#if F_TMA
  const uint32_t bars = fil0 + FSTAGES * FB_BYTES;       // one mbarrier per filter stage
  void* wmap = (uint8_t*)global_scratch + 128 * (int64_t)blockIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < FSTAGES; ++s) mbar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (threadIdx.x < 32) {
    const uint32_t smap = bars + 128;
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(smap + 4 * threadIdx.x), "r"(0) : "memory");
    __syncwarp();
    build_wmap(smap, wmap, w, C, CO, threadIdx.x);
  }
  __syncthreads();
  uint32_t gbase = 0;                                    // global step index of this tile's step 0
#endif
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wi = warp & 3;
  const int g = lane >> 2, q = lane & 3;
  const int n_co = (CO + BN - 1) / BN, n_tw = (W + TW - 1) / TW, n_th = (H + TH - 1) / TH;
  const int cb = C * ISZ;                               // bytes of channels per pixel
  const int NC = (cb + CHB - 1) / CHB;                  // channel chunks
  const int steps = NC * 9;                             // (chunk, tap) steps per tile
  const int n_tiles = NB * n_th * n_tw * n_co;
  for (int tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    // output-channel tile fastest: consecutive CTAs share the input window in L2
    int rest = tile;
    const int cot = rest % n_co; rest /= n_co;
    const int twt = rest % n_tw; rest /= n_tw;
    const int tht = rest % n_th;
    const int nb = rest / n_th;
    const int co0 = cot * BN, oh0 = tht * TH, ow0 = twt * TW;

    // loads of step it = (chunk it / 9, tap it % 9): the window at tap 0, the filter tile always
    auto issue = [&](int it) {
      const int cc = it / 9, tap = it % 9, c0b = cc * CHB;
      if (tap == 0) {
        const uint32_t win = win0 + (cc & 1) * WIN_BYTES;
        for (int i = tid; i < NCH * WPIX; i += 256) {
          const int j = i / WPIX, p = i % WPIX;
          const int ih = oh0 - 1 + p / WW, iw = ow0 - 1 + p % WW;
          const bool ok = ih >= 0 && ih < H && iw >= 0 && iw < W && c0b + 16 * j < cb;
          const uint8_t* src = ok ? x + (((int64_t)nb * H + ih) * W + iw) * cb + c0b + 16 * j : x;
          cp_async16(win + j * (WPIX * 16) + p * 16, src, ok ? 16 : 0);
        }
      }
#if F_TMA
      // filter tile (128 channels x 128 B of C at tap) by TMA into stage (gbase + it) % 4
      if (tid == 0) {
        const uint32_t g = gbase + it, bar = bars + 8 * (g % FSTAGES);
        mbar_expect_tx(bar, FB_BYTES);   // the whole box: past C and CO zero-filled and counted
        tma_load_3d(fil0 + (g % FSTAGES) * FB_BYTES, wmap, c0b / ISZ, tap, co0, bar);
      }
#else
      const uint32_t fb = fil0 + (it % FSTAGES) * FB_BYTES;
#pragma unroll
      for (int i = 0; i < (NCH * BN) / 256; ++i) {
        const int e = tid + 256 * i, j = e / BN, n = e % BN;
        const bool ok = co0 + n < CO && c0b + 16 * j < cb;
        const uint8_t* src = ok ? w + ((int64_t)(co0 + n) * 9 + tap) * cb + c0b + 16 * j : w;
        cp_async16(fb + j * (BN * 16) + n * 16, src, ok ? 16 : 0);
      }
#endif
    };

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
      if (s < steps) issue(s);
      cp_async_commit();
    }
    for (int it = 0; it < steps; ++it) {
      cp_async_wait<AHEAD - 1>();
      fence_proxy_async();          // cp.async (generic proxy) writes -> wgmma (async proxy) reads
#if F_TMA
      mbar_wait(bars + 8 * ((gbase + it) % FSTAGES), ((gbase + it) / FSTAGES) & 1);
#endif
      __syncthreads();              // all copies of step it landed
      // step it + AHEAD reuses filter stage (it - 2) % 4 and, at tap 0, the window of chunk
      // cc - 1: their MMAs retired (wait_group 1 at the end of step it - 1)
      if (it + AHEAD < steps) issue(it + AHEAD);
      cp_async_commit();
      const int cc = it / 9, tap = it % 9, r = tap / 3, s = tap % 3;
      const uint32_t win = win0 + (cc & 1) * WIN_BYTES;
#if F_TMA
      const uint32_t fb = fil0 + ((gbase + it) % FSTAGES) * FB_BYTES;
#else
      const uint32_t fb = fil0 + (it % FSTAGES) * FB_BYTES;
#endif
      // A of tap (r, s): output pixel (8 wg + i, t) reads window pixel (8 wg + i + r, t + s)
      const uint32_t abase = win + ((8 * wg + r) * WW + s) * 16;
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < NCH / 2; ++k)   // 4 K steps of 32 bytes (k16 fp16 / k32 fp8)
        wgmma_ss(d, desc_nosw(abase + 2 * k * (WPIX * 16), WPIX * 16, WW * 16),
#if F_TMA
                 desc_sw128(fb + 32 * k));   // [co][128 B] swizzled: +32 B per K step
#else
                 desc_nosw(fb + 2 * k * (BN * 16), BN * 16, 128));
#endif
      wgmma_commit();
      wgmma_wait<1>(d);
    }
    wgmma_wait<0>(d);
    cp_async_wait<0>();
    // epilogue: d[4i + e] = (pixel 16 wi + g (+8 for e >= 2), channel 8i + 2q + (e & 1))
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int pr = 16 * wi + g + 8 * half;             // pixel within this warpgroup's 8 x 8
      const int oh = oh0 + 8 * wg + pr / 8, ow = ow0 + pr % 8;
      if (oh < H && ow < W) {
        __half* o = out + (((int64_t)nb * H + oh) * W + ow) * CO;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int co = co0 + 8 * i + 2 * q;
          if (co < CO) {
            __half2 v = __floats2half2_rn(d[4 * i + 2 * half], d[4 * i + 2 * half + 1]);
            *reinterpret_cast<__half2*>(o + co) = v;
          }
        }
      }
    }
    __syncthreads();                 // the buffers are reused by the next tile
#if F_TMA
    gbase += steps;
#endif
  }
}
