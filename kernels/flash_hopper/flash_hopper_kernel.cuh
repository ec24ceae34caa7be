// The Hopper-native forward kernel (sm_90a), generic over HopperTraits.
//
// One persistent block of three warpgroups per SM, walking work tiles (128 query rows of one
// head and batch; see persistent_tile and work_tile):
//   warpgroup 0, the producer: gives registers back (setmaxnreg.dec); one thread loads each Q
//     tile once and streams K and V tiles of kBlockN keys with TMA into a kStages-deep ring of
//     128-byte-swizzled shared-memory slots, each slot guarded by a "full" mbarrier (TMA bytes
//     landed) and an "empty" one (every consumer warp is done reading it).
//   warpgroups 1 and 2, the consumers: take registers (setmaxnreg.inc), 64 query rows each.
//     Per key tile:  S = Q K^T     wgmma m64n{128,176}k16, Q and K from shared-memory descriptors
//                    mask          only on tiles that hold a tail key or cross a band edge
//                    online softmax in registers (exp2 domain, quad shuffles for the row max)
//                    O += P V      wgmma m64nDk16, P from registers (the accumulator layout of
//                                  S is the A-fragment layout), V as stored (MN-major, B
//                                  transposed by the instruction)
// S of tile n is issued with PV of tile n - 1 (the softmax runs under that PV), and the two
// consumers take turns issuing their GEMMs (ping-pong; the turns run on from one work tile to the
// next, so neither waits for the other's epilogue). The last PV of a tile stops at the last key
// the warpgroup sees. The score matrix never leaves registers; O is normalised once at the end
// and written straight from registers. Query head h reads K/V head h / group_size; a row that sees no key
// writes zeros and a logsumexp of -inf (as flash:fa2).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/fast_math.cuh"
#include "common/shared_memory.cuh"
#include "core/mask_bounds.hpp"
#include "flash_hopper/hopper_ptx.cuh"
#include "flash_hopper/register_budget.hpp"
#include "flash_hopper/wgmma_ops.cuh"

namespace attnprof::kernels::hopper {

// kBlockN keys per K/V tile: 128, or 176 at head dim 128 without a mask band (fewer tiles, so
// less of the per-tile softmax and synchronisation cost; a band's edges prefer smaller tiles).
template <typename ElementT, int kHeadDimT, int kBlockNT = 128>
struct HopperTraits {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimT;
  static constexpr int kConsumers = kConsumerWarpgroups;
  static constexpr int kWarpgroupRows = 64;     // rows of one wgmma M
  static constexpr int kBlockM = kConsumers * kWarpgroupRows;
  static constexpr int kBlockN = kBlockNT;
  static constexpr int kStages = 2;
  static constexpr bool kPrefetchQ = kBlockN == 128;  // the next work tile's Q into L2 (produce)
  static constexpr int kThreads = kHopperThreads;
  static constexpr int kProducerRegisters = hopper::kProducerRegisters;
  static constexpr int kConsumerRegisters = hopper::kConsumerRegisters;
  static constexpr int kAtoms = kHeadDim / 64;     // 128-byte (64-element) column blocks
  static constexpr int kAtomBytesQ = kBlockM * 128;
  static constexpr int kAtomBytesKV = kBlockN * 128;
  static constexpr int kQBytes = kAtoms * kAtomBytesQ;
  static constexpr int kTileBytes = kAtoms * kAtomBytesKV;
  static constexpr int kOffK = kQBytes;
  static constexpr int kOffV = kOffK + kStages * kTileBytes;
  static constexpr int kOffBarriers = kOffV + kStages * kTileBytes;
  static constexpr int kBarriers = 2 + 4 * kStages;
  static constexpr int kSmemBytes = kOffBarriers + 8 * kBarriers + 1024;  // + 1024: aligning the base
  static constexpr int kConsumerWarps = 4 * kConsumers;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dims 64 and 128");
  static_assert(kBlockN == 128 || kBlockN == 176, "S = QK^T is wgmma m64n128 or m64n176");
  static_assert(kAtomBytesKV % 1024 == 0, "K/V slots stay 1024-byte aligned for the 128-byte swizzle");
};

// The problem's sizes, softmax scale and mask, as both Hopper kernels (forward and backward) read
// them.
struct HopperProblem {
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;  // heads / heads_kv
  int seq_q = 0;
  int seq_kv = 0;
  float scale = 0.f;
  float scale_log2 = 0.f;  // scale * log2(e): the kernels exponentiate in base 2
  MaskBounds mask;
};

// What the launch passes (by value, __grid_constant__: TMA reads the descriptors in place).
struct HopperKernelParams {
  CUtensorMap q_map;  // [batch * heads][seq_q][head_dim], boxes of 64 x 128 x 1
  CUtensorMap k_map;  // [batch * heads_kv][seq_kv][head_dim]
  CUtensorMap v_map;
  void* o = nullptr;
  float* lse = nullptr;
  HopperProblem problem;
  int work_tiles = 0;  // query tiles x heads x batch
};

template <typename Traits>
struct Barriers {
  uint32_t base;
  __device__ uint32_t full_q() const { return base; }
  __device__ uint32_t full_k(int s) const { return base + 8 * (1 + s); }
  __device__ uint32_t full_v(int s) const { return base + 8 * (1 + Traits::kStages + s); }
  __device__ uint32_t empty_k(int s) const { return base + 8 * (1 + 2 * Traits::kStages + s); }
  __device__ uint32_t empty_v(int s) const { return base + 8 * (1 + 3 * Traits::kStages + s); }
  __device__ uint32_t empty_q() const { return base + 8 * (1 + 4 * Traits::kStages); }
};

// A developer's timeline (the CMake option ATTNPROF_HOPPER_TIMELINE; never in the shipped
// kernel): one thread of each warpgroup appends (clock64 << 8 | event) to its block's log, and the
// launch writes the logs of the last launch to $ATTNPROF_HOPPER_TIMELINE (flash_hopper_launch.cuh).
enum TimelineEvent : int {
  kTileStart = 1, kQReady, kTurnWait, kTurnGranted, kKReady, kSIssued, kSDone, kVReady, kPvDone, kEpilogueDone,
  kProduceK, kProduceV, kProduceQ, kSoftmaxDone
};
#ifdef ATTNPROF_HOPPER_TIMELINE
constexpr int kTimelineEvents = 4096;
constexpr int kTimelineBlocks = 160;
static __device__ unsigned long long g_timeline[kTimelineBlocks * 3 * kTimelineEvents];
static __device__ int g_timeline_count[kTimelineBlocks * 3];
struct Timeline {
  int log = -1;  // -1: this thread does not record
  int n = 0;
  __device__ void operator()(int event) {
    if (log < 0 || n >= kTimelineEvents) return;
    g_timeline[log * kTimelineEvents + n++] = (static_cast<unsigned long long>(clock64()) << 8) | event;
  }
  __device__ void finish() const {
    if (log >= 0) g_timeline_count[log] = n;
  }
};
#else
struct Timeline {
  int log = -1;
  __device__ void operator()(int) {}
  __device__ void finish() const {}
};
#endif

// One query tile of the grid: its coordinates and the key tiles its rows see.
struct WorkTile {
  int m_block;
  int head;
  int batch;
  KeyTiles keys;
};

// Work tile t of the (query tile, head, batch) space. Without a mask band every tile costs the
// same: heads and batches outer, query tiles inner, so that the blocks running together share a
// head's K and V in L2. Under a band (causal, windows) the cost grows with the query tile: query
// tiles outer from the last (heaviest) down, heads and batches inner, so work is handed out
// longest first.
template <typename Traits>
__device__ __forceinline__ WorkTile work_tile(const HopperKernelParams& p, int t, int m_blocks) {
  WorkTile w;
  const int heads_batches = p.work_tiles / m_blocks;
  int bh;
  if (p.problem.mask.bounded()) {
    w.m_block = m_blocks - 1 - t / heads_batches;
    bh = t % heads_batches;
  } else {
    bh = t / m_blocks;
    w.m_block = m_blocks - 1 - (t - bh * m_blocks);
  }
  w.head = bh % p.problem.heads;
  w.batch = bh / p.problem.heads;
  w.keys = key_tiles(p.problem.mask, p.problem.seq_q, p.problem.seq_kv, w.m_block * Traits::kBlockM, Traits::kBlockM,
                     Traits::kBlockN);
  return w;
}

// The k-th work tile of persistent block `block` of `blocks`: rounds of `blocks` consecutive
// tiles, walked forwards in even rounds and backwards in odd ones (a full round only), so that
// with tiles sorted by cost each block's sum evens out (block 0 takes the largest of one round
// and the smallest of the next). -1 past the end.
__device__ __forceinline__ int persistent_tile(int k, int block, int blocks, int total) {
  const int round_start = k * blocks;
  if (round_start >= total) return -1;
  const bool full_round = round_start + blocks <= total;
  const int t = round_start + ((k & 1) && full_round ? blocks - 1 - block : block);
  return t < total ? t : -1;
}

// Where the producer and the consumers are in their shared sequences: `ring` counts the key
// tiles through the K/V slots so far, `q_round` the Q tiles loaded (both continue across the
// work tiles of a persistent block; work tiles without keys load no Q).
struct Progress {
  int ring = 0;
  int q_round = 0;
  Timeline timeline;
};

// The producer: one thread issues every TMA load of the block, for one work tile (`next`, when
// has_next, is the block's next work tile: its Q is prefetched into L2).
template <typename Traits>
__device__ __forceinline__ void produce(const HopperKernelParams& p, uint32_t base, Barriers<Traits> bars,
                                        const WorkTile& w, const WorkTile& next, bool has_next, Progress& progress) {
  const int bh_q = w.batch * p.problem.heads + w.head;
  const int bh_kv = w.batch * p.problem.heads_kv + w.head / p.problem.group_size;
  // Key tile n of K or V into ring slot s, once the consumers have emptied it.
  auto load_tile = [&](int offset, const CUtensorMap* map, uint32_t empty, uint32_t full, int s, uint32_t phase, int n) {
    mbarrier_wait_sleep(empty, phase ^ 1);
    progress.timeline(offset == Traits::kOffK ? kProduceK : kProduceV);
    mbarrier_arrive_expect_tx(full, Traits::kTileBytes);
#pragma unroll
    for (int a = 0; a < Traits::kAtoms; ++a)
      tma_load_3d(base + offset + s * Traits::kTileBytes + a * Traits::kAtomBytesKV, map, full, 64 * a,
                  n * Traits::kBlockN, bh_kv);
  };
  for (int n = w.keys.begin; n < w.keys.end; ++n, ++progress.ring) {
    const int s = progress.ring % Traits::kStages;
    const uint32_t phase = (progress.ring / Traits::kStages) & 1;
    load_tile(Traits::kOffK, &p.k_map, bars.empty_k(s), bars.full_k(s), s, phase, n);
    if (n == w.keys.begin) {
      // Q after the first K tile, whose slot is usually free earlier: the Q slot is free once both
      // consumers have finished the last S of the previous work tile.
      mbarrier_wait_sleep(bars.empty_q(), (progress.q_round & 1) ^ 1);
      progress.timeline(kProduceQ);
      mbarrier_arrive_expect_tx(bars.full_q(), Traits::kQBytes);
#pragma unroll
      for (int a = 0; a < Traits::kAtoms; ++a)
        tma_load_3d(base + a * Traits::kAtomBytesQ, &p.q_map, bars.full_q(), 64 * a, w.m_block * Traits::kBlockM,
                    bh_q);
      ++progress.q_round;
    }
    load_tile(Traits::kOffV, &p.v_map, bars.empty_v(s), bars.full_v(s), s, phase, n);
    // Halfway through, the next tile's Q into L2: its load into shared memory waits for this
    // tile's last S, and would otherwise come from DRAM while the consumers wait for it. Measured
    // a gain with 128-key tiles (head dim 64: -3.5% at 1024; causal: -1 to -3% at 4k and 16k) and
    // a loss with 176 (+1% at 4k): kPrefetchQ.
    if (Traits::kPrefetchQ && has_next && n == (w.keys.begin + w.keys.end) / 2)
#pragma unroll
      for (int a = 0; a < Traits::kAtoms; ++a)
        tma_prefetch_l2_3d(&p.q_map, 64 * a, next.m_block * Traits::kBlockM, next.batch * p.problem.heads + next.head);
  }
}

// The steps of one consumer warpgroup (64 query rows) on one key tile.
template <typename Traits>
struct ConsumerSteps {
  using Element = typename Traits::Element;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kSAcc = Traits::kBlockN / 2;  // S accumulator floats per thread
  static constexpr int kOAcc = kHeadDim / 2;         // O accumulator floats per thread
  static constexpr int kPSteps = Traits::kBlockN / 16;

  // S = Q K^T, issued (the caller commits and waits).
  __device__ static void issue_s(float (&s_acc)[kSAcc], uint32_t q_base, uint32_t k_base) {
    const uint64_t desc_q0 = smem_descriptor(q_base, 16, 1024);
    const uint64_t desc_k0 = smem_descriptor(k_base, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint64_t desc_q = advance_descriptor(desc_q0, (kk / 4) * Traits::kAtomBytesQ + (kk % 4) * 32);
      const uint64_t desc_k = advance_descriptor(desc_k0, (kk / 4) * Traits::kAtomBytesKV + (kk % 4) * 32);
      if constexpr (Traits::kBlockN == 176)
        Wgmma<Element>::ss_m64n176k16(s_acc, desc_q, desc_k, kk > 0 ? 1 : 0);
      else
        Wgmma<Element>::ss_m64n128k16(s_acc, desc_q, desc_k, kk > 0 ? 1 : 0);
    }
  }

  // O += P V over the first `steps` k16 steps of keys (all by default), issued.
  __device__ static void issue_pv(float (&o)[kOAcc], const uint32_t (&pa)[kPSteps][4], uint32_t v_base,
                                  int steps = kPSteps) {
    const uint64_t desc_v0 = smem_descriptor(v_base, Traits::kAtomBytesKV, 1024);
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      if (kk >= steps) break;
      const uint64_t desc_v = advance_descriptor(desc_v0, kk * 16 * 128);
      if constexpr (kHeadDim == 128)
        Wgmma<Element>::rs_m64n128k16(o, pa[kk], desc_v, 1);
      else
        Wgmma<Element>::rs_m64n64k16(o, pa[kk], desc_v, 1);
    }
  }

  // -inf where the key is past seq_kv or outside the band (tiles that need it only).
  __device__ static void mask(float (&s_acc)[kSAcc], const HopperKernelParams& p, const KeyTiles& tiles, int n,
                              int row0, int col0) {
    if (n >= tiles.unmasked_begin && n < tiles.unmasked_end) return;
#pragma unroll
    for (int j = 0; j < Traits::kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n * Traits::kBlockN + 8 * j + col0 + (e & 1);
        const int row = row0 + 8 * (e >> 1);
        if (key >= p.problem.seq_kv || !p.problem.mask.sees(row, key)) s_acc[4 * j + e] = -INFINITY;
      }
  }

  // Online softmax: S becomes P (unnormalised, in place), each row's max and partial sum move
  // on, and `correction` says by how much O must shrink for the new max.
  __device__ static void softmax(float (&s_acc)[kSAcc], float (&row_max)[2], float (&row_sum)[2],
                                 float (&correction)[2], float scale_log2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[h];
#pragma unroll
      for (int j = 0; j < Traits::kBlockN / 8; ++j)
        mx = fmaxf(mx, fmaxf(s_acc[4 * j + 2 * h], s_acc[4 * j + 2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with every key so far masked keeps max -inf; subtracting 0 then gives exp2(-inf) = 0.
      const float max_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;
      correction[h] = exp2_approx(row_max[h] * scale_log2 - max_scaled);
      row_max[h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < Traits::kBlockN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s_acc[4 * j + 2 * h + e];
          x = exp2_approx(fmaf(x, scale_log2, -max_scaled));
          sum += x;
        }
      row_sum[h] = row_sum[h] * correction[h] + sum;
    }
  }

  __device__ static void rescale(float (&o)[kOAcc], const float (&correction)[2]) {
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[4 * j + e] *= correction[e >> 1];
  }

  // P as A fragments: k16 step kk takes the accumulator chunks 2kk and 2kk+1.
  __device__ static void convert(const float (&s_acc)[kSAcc], uint32_t (&pa)[kPSteps][4]) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = pack2<Element>(s_acc[8 * kk + 2 * r], s_acc[8 * kk + 2 * r + 1]);
  }
};

// The 4 x 4 transpose across a quad (lanes 4k .. 4k + 3): v[c] of lane q becomes v[q] of lane c.
// Two exchanges of 2 x 2 blocks (partner q ^ 2, then q ^ 1), two shuffles each; every lane of the
// warp takes part.
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4], int lane) {
  const bool high = lane & 2;  // lanes 2, 3 of the quad: send columns 0, 1 and take the partner's 2, 3
  uint32_t r0 = __shfl_xor_sync(0xffffffffu, high ? v[0] : v[2], 2);
  uint32_t r1 = __shfl_xor_sync(0xffffffffu, high ? v[1] : v[3], 2);
  if (high) {
    v[0] = r0;
    v[1] = r1;
  } else {
    v[2] = r0;
    v[3] = r1;
  }
  const bool odd = lane & 1;  // then within each 2 x 2 block, with the neighbour lane
  r0 = __shfl_xor_sync(0xffffffffu, odd ? v[0] : v[1], 1);
  r1 = __shfl_xor_sync(0xffffffffu, odd ? v[2] : v[3], 1);
  if (odd) {
    v[0] = r0;
    v[2] = r1;
  } else {
    v[1] = r0;
    v[3] = r1;
  }
}

// Whose turn it is to issue GEMMs: named barrier 1 + consumer (0 is __syncthreads). The two
// consumer warpgroups take turns, so that one's softmax runs under the other's GEMMs.
__device__ __forceinline__ void wait_turn(int consumer) { named_barrier_sync(1 + consumer, 256); }
__device__ __forceinline__ void pass_turn(int consumer) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (1 - consumer)) : "memory");
}

// One consumer warpgroup: 64 query rows of one work tile against every key tile the producer
// streams. Within the warpgroup, S of key tile n is issued together with PV of tile n - 1, and the
// softmax of tile n runs while that PV is on the tensor cores; between the two warpgroups, turns.
template <typename Traits>
__device__ __forceinline__ void consume(const HopperKernelParams& p, uint32_t base, Barriers<Traits> bars,
                                        const WorkTile& w, Progress& progress, int consumer) {
  using Element = typename Traits::Element;
  using Steps = ConsumerSteps<Traits>;
  constexpr int kHeadDim = Traits::kHeadDim;
  const KeyTiles& tiles = w.keys;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // This thread's two rows (h = 0, 1: +8) and its first key column within a tile.
  const int row0 = w.m_block * Traits::kBlockM + consumer * Traits::kWarpgroupRows + warp * 16 + lane / 4;
  const int col0 = 2 * (lane % 4);
  const int wg_last_row =
      min(w.m_block * Traits::kBlockM + (consumer + 1) * Traits::kWarpgroupRows, p.problem.seq_q) - 1;
  auto slot = [](int i) { return i % Traits::kStages; };
  auto k_slot = [&](int i) { return base + Traits::kOffK + slot(i) * Traits::kTileBytes; };
  auto v_slot = [&](int i) { return base + Traits::kOffV + slot(i) * Traits::kTileBytes; };
  auto phase = [](int i) { return static_cast<uint32_t>((i / Traits::kStages) & 1); };
  auto release = [&](uint32_t bar) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(bar);
  };

  float o[Steps::kOAcc];
#pragma unroll
  for (int i = 0; i < Steps::kOAcc; ++i) o[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  float correction[2];

  Timeline& event = progress.timeline;
  event(kTileStart);
  if (tiles.begin < tiles.end) {
    const uint32_t q_base = base + consumer * Traits::kWarpgroupRows * 128;
    float s_acc[Steps::kSAcc];
    uint32_t pa[Steps::kPSteps][4];
    mbarrier_wait(bars.full_q(), progress.q_round & 1);
    event(kQReady);
    ++progress.q_round;
    // Key tile 0: S alone.
    int i = progress.ring;
    event(kTurnWait);
    wait_turn(consumer);
    event(kTurnGranted);
    mbarrier_wait(bars.full_k(slot(i)), phase(i));
    event(kKReady);
    wgmma_fence();
    Steps::issue_s(s_acc, q_base, k_slot(i));
    wgmma_commit();
    pass_turn(consumer);
    event(kSIssued);
    wgmma_wait<0>();
    fence_registers(s_acc);
    event(kSDone);
    release(bars.empty_k(slot(i)));
    if (tiles.end - tiles.begin == 1) release(bars.empty_q());
    Steps::mask(s_acc, p, tiles, tiles.begin, row0, col0);
    Steps::softmax(s_acc, row_max, row_sum, correction, p.problem.scale_log2);
    Steps::convert(s_acc, pa);
    ++i;
    for (int n = tiles.begin + 1; n < tiles.end; ++n, ++i) {
      // S of key tile i and PV of tile i - 1 go to the tensor cores together.
      event(kTurnWait);
      wait_turn(consumer);
      event(kTurnGranted);
      mbarrier_wait(bars.full_k(slot(i)), phase(i));
      event(kKReady);
      wgmma_fence();
      Steps::issue_s(s_acc, q_base, k_slot(i));
      wgmma_commit();
      mbarrier_wait(bars.full_v(slot(i - 1)), phase(i - 1));
      event(kVReady);
      Steps::issue_pv(o, pa, v_slot(i - 1));
      wgmma_commit();
      pass_turn(consumer);
      event(kSIssued);
      wgmma_wait<1>();  // S done; PV may still run
      fence_registers(s_acc);
      event(kSDone);
      release(bars.empty_k(slot(i)));
      if (n == tiles.end - 1) release(bars.empty_q());
      Steps::mask(s_acc, p, tiles, n, row0, col0);
      Steps::softmax(s_acc, row_max, row_sum, correction, p.problem.scale_log2);
      event(kSoftmaxDone);
      wgmma_wait<0>();
      fence_registers(o);
      fence_registers(pa);
      event(kPvDone);
      release(bars.empty_v(slot(i - 1)));
      Steps::rescale(o, correction);
      Steps::convert(s_acc, pa);
    }
    // PV of the last key tile.
    event(kTurnWait);
    wait_turn(consumer);
    event(kTurnGranted);
    mbarrier_wait(bars.full_v(slot(i - 1)), phase(i - 1));
    event(kVReady);
    wgmma_fence();
    // Only the k16 steps up to the warpgroup's last visible key (none when it lies before this
    // tile): past it P is 0 (the tail of seq_kv, the upper warpgroup on the causal diagonal).
    const int last_steps =
        (p.problem.mask.last_key(wg_last_row, p.problem.seq_kv) - (tiles.end - 1) * Traits::kBlockN) / 16 + 1;
    Steps::issue_pv(o, pa, v_slot(i - 1), last_steps);
    wgmma_commit();
    pass_turn(consumer);  // turns run on across work tiles: each consumer takes tiles + 1 per tile
    event(kSIssued);
    wgmma_wait<0>();
    fence_registers(o);
    event(kPvDone);
    release(bars.empty_v(slot(i - 1)));
    progress.ring = i;
  }

  // Epilogue: O / l straight from registers, 16 bytes per store; the logsumexp (natural log) of
  // each row.
  const int64_t bh = static_cast<int64_t>(w.batch) * p.problem.heads + w.head;
  Element* out = static_cast<Element*>(p.o) + bh * p.problem.seq_q * kHeadDim;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inverse = sum > 0.f ? 1.f / sum : 0.f;
    const int row = row0 + 8 * h;
    if (p.lse != nullptr && lane % 4 == 0 && row < p.problem.seq_q)
      p.lse[bh * p.problem.seq_q + row] = sum > 0.f ? row_max[h] * p.problem.scale + logf(sum) : -INFINITY;
    Element* out_row = out + static_cast<int64_t>(row) * kHeadDim;
#pragma unroll
    for (int m = 0; m < kHeadDim / 32; ++m) {
      // Columns 32m .. 32m + 31 of the row: the quad's threads each hold two of every eight;
      // quad_transpose gives thread q the eight of columns 32m + 8q .. + 7, one 16-byte store.
      uint32_t v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = 4 * m + c;
        v[c] = pack2<Element>(o[4 * j + 2 * h] * inverse, o[4 * j + 2 * h + 1] * inverse);
      }
      quad_transpose(v, lane);
      if (row < p.problem.seq_q)
        *reinterpret_cast<uint4*>(out_row + 32 * m + 8 * (lane % 4)) = make_uint4(v[0], v[1], v[2], v[3]);
    }
  }
  event(kEpilogueDone);
}

// Persistent: one block per SM walks its work tiles (persistent_tile); the next tile's first K/V
// tiles and its Q load while the consumers finish the current one.
template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) flash_hopper_fwd_kernel(const __grid_constant__ HopperKernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = shared_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const Barriers<Traits> bars{base + Traits::kOffBarriers};
  const int m_blocks = (p.problem.seq_q + Traits::kBlockM - 1) / Traits::kBlockM;
  // This block's k-th work tile, -1 when done.
  auto tile_at = [&](int k) {
    return persistent_tile(k, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), p.work_tiles);
  };

  if (threadIdx.x == 0) {
    mbarrier_init(bars.full_q(), 1);
    mbarrier_init(bars.empty_q(), Traits::kConsumerWarps);
    for (int s = 0; s < Traits::kStages; ++s) {
      mbarrier_init(bars.full_k(s), 1);
      mbarrier_init(bars.full_v(s), 1);
      mbarrier_init(bars.empty_k(s), Traits::kConsumerWarps);
      mbarrier_init(bars.empty_v(s), Traits::kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  Progress progress;
#ifdef ATTNPROF_HOPPER_TIMELINE
  if (blockIdx.x < kTimelineBlocks && threadIdx.x % 128 == 0)
    progress.timeline.log = static_cast<int>(blockIdx.x) * 3 + static_cast<int>(threadIdx.x / 128);
#endif
  // Broadcast from lane 0 so that the compiler sees it warp-uniform (the last PV branches on it).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (warpgroup == 0) {
    release_registers<Traits::kProducerRegisters>();
    if (threadIdx.x == 0) {
      tma_prefetch_descriptor(&p.q_map);
      tma_prefetch_descriptor(&p.k_map);
      tma_prefetch_descriptor(&p.v_map);
      for (int k = 0, t = tile_at(0); t >= 0; t = tile_at(++k)) {
        const WorkTile w = work_tile<Traits>(p, t, m_blocks);
        const int t_next = tile_at(k + 1);
        const WorkTile next = work_tile<Traits>(p, t_next >= 0 ? t_next : t, m_blocks);
        if (w.keys.begin < w.keys.end) produce<Traits>(p, base, bars, w, next, t_next >= 0, progress);
      }
      progress.timeline.finish();
    }
    return;
  }
  claim_registers<Traits::kConsumerRegisters>();
  // Consumer 0 takes the first turn; consumer 1's pass after its last turn is taken up at the end.
  if (warpgroup == 2) pass_turn(1);
  for (int k = 0, t = tile_at(0); t >= 0; t = tile_at(++k))
    consume<Traits>(p, base, bars, work_tile<Traits>(p, t, m_blocks), progress, warpgroup - 1);
  if (warpgroup == 1) wait_turn(0);
  progress.timeline.finish();
#endif
}

}  // namespace attnprof::kernels::hopper
