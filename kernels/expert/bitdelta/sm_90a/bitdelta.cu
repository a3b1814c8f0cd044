// Hand-written expert lowering of the suite entries `bitdelta` and (with -DBATCHED=1)
// `bitdelta_batched` for sm_90a. Compiled to PTX by gen.py (nvcc -arch=sm_90a -ptx).
//
// Transposed product: y^T (N x M) = W_eff (N x K) . x^T (K x M), W_eff = W + alpha[n] * sign.
// * A = W_eff, the wgmma *register* operand: each thread ldmatrix-es its W fragment from shared
//   memory, decodes its own +-1 bits (ld.global of the packed words, one stage ahead, straight into
//   registers) and adds +-alpha in f16x2; the decoded tile never goes back to shared memory.
// * B = x^T, K-major: the 128 x 64 x tile arrives by TMA (cp.async.bulk.tensor.2d, 128B swizzle,
//   zero fill past M and K) through a tensor map each CTA builds once in its 128-byte slot of
//   Triton's global scratch (tensormap.replace + tensormap.cp_fenceproxy); -DX_TMA=0: cp.async.cg.
// * W tiles (128 rows x 64) arrive by TMA as well (a second tensor map, 128B swizzle: ldmatrix
//   reads the swizzled chunks, conflict-free); one mbarrier per stage counts both boxes.
//   -DW_TMA=0: W rows by cp.async.bulk (1-D bulk copies) into padded 144 B rows; -DW_BULK=0
//   -DX_TMA=0: everything by cp.async.cg 16 B (debugging variants).
// CTA: 256 threads = 2 warpgroups, tile 128 W rows (64 per warpgroup) x 128 tokens, BK = 64,
// STAGES-deep ring. Persistent over tiles (grid-stride), so any grid size is correct.
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef BATCHED
#define BATCHED 0
#endif
#ifndef W_BULK
#define W_BULK 1
#endif
#ifndef X_TMA
#define X_TMA 1     // x tiles by TMA (a tensor map built on the device in Triton's global scratch)
#endif
#ifndef W_TMA
#define W_TMA X_TMA // W tiles by TMA too (128B-swizzled rows) instead of 1-D bulk copies per row
#endif
#if X_TMA && !W_BULK
#error "X_TMA needs W_BULK (one mbarrier per stage carries both)"
#endif
#if W_TMA && !X_TMA
#error "W_TMA needs X_TMA"
#endif
#define BN 128      // W rows (output features) per CTA tile
#define BM 128      // tokens per CTA tile (the wgmma N)
#define BK 64
#define STAGES 3
#define GROUP_M 8
#define XS_BYTES (BM * BK * 2)          // 16384, 128B-swizzled rows
#if W_TMA
#define WROW 128                        // 128B-swizzled W row (TMA), bytes
#else
#define WROW 144                        // padded W row (bulk copies / cp.async), bytes
#endif
#define WS_BYTES (BN * WROW)            // 16384 or 18432
#define STAGE_BYTES (XS_BYTES + WS_BYTES)

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
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// TMA tile load of the 2-D box at (c0 inner, c1 outer) of the tensor map at global `tmap`
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tmap, int c0, int c1, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// Build a tensor map of a (rows x K) f16 row-major matrix (rank 2: K inner, rows outer; box 64 x 128 f16, 128B swizzle, zero fill
// out of bounds; CUtensorMap field semantics of PTX ISA 9.1 s9.7.9.27 tensormap.replace) in the
// 128-byte shared staging buffer `smap` (zeroed by the caller), then copy it to the global
// scratch slot `gmap` with the tensormap proxy release and acquire it for this thread's TMAs.
// Called by the whole warp 0 (the .sync.aligned copy); lane 0 writes the fields.
__device__ __forceinline__ void build_tmap(uint32_t smap, void* gmap, const void* base, int rows,
                                             int K, int lane) {
  if (lane == 0) {
    asm volatile(
        "tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\n"
        "tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], 1;\n"
        "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 0, 64;\n"
        "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, 128;\n"
        "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %2;\n"
        "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %3;\n"
        "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %4;\n"
        "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 0, 1;\n"
        "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, 1;\n"
        "tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 6;\n"
        "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;\n"
        :: "r"(smap), "l"(base), "r"(K), "r"(rows), "l"((uint64_t)K * 2) : "memory");
  }
  __syncwarp();
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
      " [%0], [%1], 128;\n"
      "fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n"
      :: "l"(gmap), "r"(smap) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}
// sm_90 matrix descriptor (PTX ISA 9.1 s9.7.15.5.1): start>>4 [0,14), LBO>>4 [16,30),
// SBO>>4 [32,46), swizzle [62,64) (1 = 128B).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}
// W + sign(bit) * alpha for the bit pair (p, p+1) of `word` and the f16x2 pair `w2` (bit 1 ->
// +alpha, 0 -> -alpha), added in fp32 and rounded to fp16 once, as Triton's kernel does
// (`(w.to(f32) + alpha * sign).to(f16)`); `ab` is alpha's fp32 bit pattern.
__device__ __forceinline__ uint32_t decode_pair(uint32_t w2, uint32_t word, int p, uint32_t ab) {
  const uint32_t nw = ~word >> p;
  const float a_lo = __uint_as_float(ab ^ ((nw & 1u) << 31));
  const float a_hi = __uint_as_float(ab ^ ((nw & 2u) << 30));
  uint32_t d;
  asm("{\n\t.reg .b16 l, h;\n\t.reg .f32 fl, fh;\n\t"
      "mov.b32 {l, h}, %1;\n\t"
      "cvt.f32.f16 fl, l;\n\tcvt.f32.f16 fh, h;\n\t"
      "add.rn.f32 fl, fl, %2;\n\tadd.rn.f32 fh, fh, %3;\n\t"
      "cvt.rn.f16x2.f32 %0, fh, fl;\n\t}\n"
      : "=r"(d) : "r"(w2), "f"(a_lo), "f"(a_hi));
  return d;
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

// d (64 x 128 f32) += A (64 x 16 f16, registers) * B (16 x 128, K-major smem descriptor)
__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t bdesc) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " D64
               ", {%64,%65,%66,%67}, %68, 1, 1, 1, 0;\n"
               : WGMMA_ARGS : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0(float* d) {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" : WGMMA_ARGS :: "memory");
}

#if BATCHED
#define KNAME bitdelta_batched_kernel
#else
#define KNAME bitdelta_kernel
#endif

extern "C" __global__ void __launch_bounds__(256, 2)   // 2 CTAs per SM (<= 128 registers)
KNAME(const __half* __restrict__ x, const __half* __restrict__ w, const uint32_t* __restrict__ packed,
      const float* __restrict__ alpha, __half* __restrict__ y, int M, int N, int K,
      void* global_scratch, void* profile_scratch) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // 1024-align the ring (128B swizzle atoms); mbarriers after it
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t sbase = smem_u32(smem);
  const uint32_t bars = sbase + STAGES * STAGE_BYTES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wi = warp & 3;
  const int g = lane >> 2, q = lane & 3;
#if BATCHED
  const int64_t req = blockIdx.y;
  x += req * (int64_t)M * K;
  packed += req * (int64_t)N * (K / 32);
  alpha += req * (int64_t)N;
  y += req * (int64_t)M * N;
#endif
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
#if X_TMA
  // this CTA's tensor maps (x, then W with -DW_TMA), in its slot of Triton's global scratch
  void* xmap = (uint8_t*)global_scratch +
               (W_TMA ? 256 : 128) * ((int64_t)blockIdx.y * gridDim.x + blockIdx.x);
  void* wmap = (uint8_t*)xmap + 128;
  if (warp == 0) {
    const uint32_t smap = bars + 128;
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(smap + 4 * lane), "r"(0) : "memory");
#if W_TMA
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(smap + 128 + 4 * lane), "r"(0) : "memory");
#endif
    __syncwarp();
    build_tmap(smap, xmap, x, M, K, lane);
#if W_TMA
    build_tmap(smap + 128, wmap, w, N, K, lane);
#endif
  }
#endif
  __syncthreads();
  const int n_m = (M + BM - 1) / BM, n_n = (N + BN - 1) / BN;
  const int KT = (K + BK - 1) / BK;
  const int KW = K / 32;
  uint32_t issued = 0, consumed = 0;     // ring positions (stage = pos % STAGES, phase = pos / STAGES)
  for (int tile = blockIdx.x; tile < n_m * n_n; tile += gridDim.x) {
    // Triton's grouped order (GROUP_M token tiles share a W tile in L2)
    const int per_group = GROUP_M * n_n, group = tile / per_group, m0g = group * GROUP_M;
    const int rows_in_group = min(n_m - m0g, GROUP_M);
    const int pid_m = m0g + (tile % per_group) % rows_in_group;
    const int pid_n = (tile % per_group) / rows_in_group;
    const int m0 = pid_m * BM, n0 = pid_n * BN;
    // this thread's two A rows (W rows / output features) and their scales
    const int r_lo = n0 + 64 * wg + 16 * wi + g, r_hi = r_lo + 8;
    const int rc_lo = min(r_lo, N - 1), rc_hi = min(r_hi, N - 1);
    // alpha stays fp32 (its bit pattern; the sign is set per element in decode_pair)
    const uint32_t ab_lo = __float_as_uint(alpha[rc_lo]), ab_hi = __float_as_uint(alpha[rc_hi]);
    const uint32_t* p_lo = packed + (int64_t)rc_lo * KW;
    const uint32_t* p_hi = packed + (int64_t)rc_hi * KW;

    auto issue = [&](int kt) {
      const uint32_t st = issued % STAGES;
      const uint32_t xs = sbase + st * STAGE_BYTES, ws = xs + XS_BYTES;
      const int k0 = kt * BK;
      const int kvalid = min(BK, K - k0);
#if !X_TMA
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int c = tid + 256 * i, row = c >> 3, ch = c & 7;
        const int m = min(m0 + row, M - 1);
        const bool ok = ch * 8 < kvalid;
        const __half* src = ok ? x + (int64_t)m * K + k0 + ch * 8 : x;
        cp_async16(xs + row * 128 + ((ch ^ (row & 7)) << 4), src, ok ? 16 : 0);
      }
#endif
#if W_BULK
      if (warp == 0) {
        const uint32_t bar = bars + 8 * st;
#if W_TMA
        // both boxes are always 128 x 64 f16 (rows past M / N and columns past K zero-filled,
        // and counted)
        if (lane == 0) {
          mbar_expect_tx(bar, XS_BYTES + WS_BYTES);
          tma_load_2d(xs, xmap, k0, m0, bar);
          tma_load_2d(ws, wmap, k0, n0, bar);
        }
#elif X_TMA
        // the x box is always 128 x 64 f16 (rows past M and columns past K zero-filled: counted)
        if (lane == 0) {
          mbar_expect_tx(bar, BN * kvalid * 2 + XS_BYTES);
          tma_load_2d(xs, xmap, k0, m0, bar);
        }
#else
        if (lane == 0) mbar_expect_tx(bar, BN * kvalid * 2);
#endif
#if !W_TMA
        __syncwarp();
#pragma unroll
        for (int i = 0; i < BN / 32; ++i) {
          const int row = lane + 32 * i, n = min(n0 + row, N - 1);
          bulk_g2s(ws + row * WROW, w + (int64_t)n * K + k0, kvalid * 2, bar);
        }
#endif
      }
#else
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int c = tid + 256 * i, row = c >> 3, ch = c & 7;
        const int n = min(n0 + row, N - 1);
        const bool ok = ch * 8 < kvalid;
        const __half* src = ok ? w + (int64_t)n * K + k0 + ch * 8 : w;
        cp_async16(ws + row * WROW + ch * 16, src, ok ? 16 : 0);
      }
#endif
      ++issued;
    };

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
    // prologue: STAGES-1 stages in flight (one cp.async group each, empty past the end)
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < KT) issue(s);
#if !X_TMA
      cp_async_commit();
#endif
    }
    // packed words of stage 0 (two per row: k0/32, k0/32 + 1), one stage ahead in registers
    uint32_t bl0 = p_lo[0], bh0 = p_hi[0];
    uint32_t bl1 = KW > 1 ? p_lo[1] : 0u, bh1 = KW > 1 ? p_hi[1] : 0u;
    for (int kt = 0; kt < KT; ++kt) {
#if !X_TMA
      cp_async_wait<STAGES - 2>();
#endif
      // cp.async (generic proxy) writes -> wgmma (async proxy) reads; and this thread's ldmatrix
      // reads of stage kt-1 (generic) -> the TMA / bulk refill of it issued after the barrier
      // (async-proxy writes: a write after read across proxies, ptx_rules AP2)
      fence_proxy_async();
      const uint32_t st = consumed % STAGES, ph = (consumed / STAGES) & 1;
#if W_BULK
      mbar_wait(bars + 8 * st, ph);
#endif
      __syncthreads();               // every thread's copies landed; stage (kt-1) fully consumed
      if (kt + STAGES - 1 < KT) issue(kt + STAGES - 1);
#if !X_TMA
      cp_async_commit();
#endif
      // next stage's packed words (ld.global into registers)
      uint32_t nl0 = 0, nh0 = 0, nl1 = 0, nh1 = 0;
      if (kt + 1 < KT) {
        const int wbase = (kt + 1) * (BK / 32);
        nl0 = p_lo[wbase]; nh0 = p_hi[wbase];
        if (wbase + 1 < KW) { nl1 = p_lo[wbase + 1]; nh1 = p_hi[wbase + 1]; }
      }
      const uint32_t xs = sbase + st * STAGE_BYTES, ws = xs + XS_BYTES;
      const int steps = min(BK, K - kt * BK) / 16;
      // A fragments of every k16 step: W from smem (ldmatrix), +-alpha from the bits, f16x2 add
      uint32_t a[4][4];
      const int arow = 64 * wg + 16 * wi + (lane & 15);   // this lane's ldmatrix row of W
      const uint32_t wrow = ws + arow * WROW;
      // per k16 step: decode its A fragment, fence, issue its MMA; the decode of step j + 1
      // runs while the MMA of step j is in flight (distinct A registers per step; the fence
      // orders only this step's fresh registers, it does not wait for earlier MMAs)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // k16 steps past K (the last stage of a K that is no multiple of 64): A = 0 there, x is
        // zero-filled, so the 4 MMAs run unconditionally (no branch between fence and MMA)
        const uint32_t keep = (j < steps) ? 0xFFFFFFFFu : 0u;
        uint32_t w0, w1, w2, w3;
        // 16-byte chunk 2j + lane/16 of the row (128B swizzle: chunk ^ row % 8 under W_TMA)
        const int ch = 2 * j + (lane >> 4);
        ldmatrix_x4(wrow + ((W_TMA ? (ch ^ (arow & 7)) : ch) << 4), w0, w1, w2, w3);
        const uint32_t blo = (j < 2) ? bl0 : bl1, bhi = (j < 2) ? bh0 : bh1;
        const int p = 16 * (j & 1) + 2 * q;
        a[j][0] = decode_pair(w0, blo, p, ab_lo) & keep;
        a[j][1] = decode_pair(w1, bhi, p, ab_hi) & keep;
        a[j][2] = decode_pair(w2, blo, p + 8, ab_lo) & keep;
        a[j][3] = decode_pair(w3, bhi, p + 8, ab_hi) & keep;
        wgmma_fence();
        wgmma_rs(d, a[j], desc_sw128(xs + 32 * j));
      }
      wgmma_commit();
      wgmma_wait0(d);
      ++consumed;
      bl0 = nl0; bh0 = nh0; bl1 = nl1; bh1 = nh1;
    }
#if !X_TMA
    cp_async_wait<0>();
#endif
    // epilogue: d[4i + e] = (W row 16 wi + g (+8 for e >= 2), token 8i + 2q + (e & 1))
#pragma unroll
    for (int i = 0; i < 16; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = (e >= 2) ? r_hi : r_lo;
        const int m = m0 + 8 * i + 2 * q + (e & 1);
        if (m < M && n < N) y[(int64_t)m * N + n] = __float2half_rn(d[4 * i + e]);
      }
    }
    fence_proxy_async();             // this tile's ldmatrix reads before the next tile's refills
    __syncthreads();                 // the ring is reused by the next tile
  }
}
