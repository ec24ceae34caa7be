// The FLOP and byte model of a case and its name: exact FLOPs against a brute-force count of
// (row, key) pairs over causal alignments, windows, unequal lengths and grouped heads; minimum
// bytes with K/V read once per K/V head; labels that tell every workload apart.
#include <gtest/gtest.h>

#include "core/types.hpp"

namespace attnprof {
namespace {

// Every (row, key) pair the mask lets through, counted one by one from the definition.
double brute_force_pairs(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  const long offset = p.is_bottom_right() ? static_cast<long>(s.seq_kv) - s.seq_q : 0;
  double pairs = 0;
  for (long i = 0; i < s.seq_q; ++i)
    for (long j = 0; j < s.seq_kv; ++j) {
      const long diagonal = i + offset;
      if (p.causal && j > diagonal) continue;
      if (p.window.right >= 0 && j > diagonal + p.window.right) continue;
      if (p.window.left >= 0 && j < diagonal - p.window.left) continue;
      ++pairs;
    }
  return pairs;
}

struct Workload {
  int seq_q, seq_kv;
  CausalMode causal;
  AttentionWindow window;
};

TEST(WorkloadModel, ExactFlopsMatchABruteForceCount) {
  const Workload workloads[] = {
      {17, 17, CausalMode::none, {}},          {17, 17, CausalMode::top_left, {}},
      {17, 33, CausalMode::top_left, {}},      {17, 33, CausalMode::bottom_right, {}},
      {33, 17, CausalMode::bottom_right, {}},  {33, 17, CausalMode::top_left, {}},
      {1, 4096, CausalMode::bottom_right, {}}, {255, 255, CausalMode::top_left, {64, 0}},
      {255, 300, CausalMode::bottom_right, {64, 0}}, {100, 100, CausalMode::none, {17, 5}},
      {100, 100, CausalMode::none, {-1, 4}},   {40, 100, CausalMode::bottom_right, {3, -1}},
      {100, 40, CausalMode::none, {3, 0}},
  };
  for (const Workload& w : workloads) {
    AttentionProblem p;
    p.shape = {2, 8, w.seq_q, w.seq_kv, 64, 2};
    set_causal_mode(p, w.causal);
    p.window = w.window;
    EXPECT_DOUBLE_EQ(attention_flops(p), 4.0 * 2 * 8 * 64 * brute_force_pairs(p)) << case_label("x", p);
  }
}

TEST(WorkloadModel, BottomRightAndTopLeftAgreeOnSquareProblems) {
  AttentionProblem top, bottom;
  top.shape = bottom.shape = {1, 4, 129, 129, 128};
  set_causal_mode(top, CausalMode::top_left);
  set_causal_mode(bottom, CausalMode::bottom_right);
  EXPECT_DOUBLE_EQ(attention_flops(top), attention_flops(bottom));
}

TEST(WorkloadModel, MinimumBytesReadKAndVOncePerKvHead) {
  AttentionProblem p;
  p.shape = {1, 32, 8192, 8192, 128, 8};
  const double q_and_o = 2.0 * 32 * 8192 * 128, k_and_v = 2.0 * 8 * 8192 * 128;
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), (q_and_o + k_and_v) * 2);
  // Decode: one query token against a long cache is almost all K/V.
  p.shape = {8, 32, 1, 32768, 128, 8};
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), (2.0 * 8 * 32 * 128 + 2.0 * 8 * 8 * 32768 * 128) * 2);
}

TEST(WorkloadModel, LabelsNameHeadsMaskAndWindow) {
  AttentionProblem p;
  p.shape = {1, 32, 8192, 8192, 128, 8};
  set_causal_mode(p, CausalMode::bottom_right);
  p.window = {4096, 0};
  EXPECT_EQ(case_label("flash", p), "flash bf16 causal_br window[4096,0] 1x32/8x8192x8192x128");
  p.shape.heads_kv = 32;  // as many as the query heads: no group in the name
  p.window = {};
  set_causal_mode(p, CausalMode::none);
  EXPECT_EQ(case_label("flash", p), "flash bf16 full 1x32x8192x8192x128");
  EXPECT_EQ(to_string(causal_mode(p)), "false");
}

}  // namespace
}  // namespace attnprof

namespace attnprof {
namespace {

// A ragged batch counts each sequence at its own lengths: the sum of per-sequence problems.
TEST(WorkloadModel, RaggedFlopsAndBytesCountEachSequence) {
  for (CausalMode mode : {CausalMode::none, CausalMode::top_left, CausalMode::bottom_right}) {
    AttentionProblem ragged;
    ragged.shape = {3, 8, 64, 300, 128, 2};
    ragged.shape.seq_lens_q = {1, 17, 64};
    ragged.shape.seq_lens_kv = {300, 17, 33};
    set_causal_mode(ragged, mode);
    ragged.window = {40, -1};
    double flops = 0, bytes = 0;
    for (int b = 0; b < 3; ++b) {
      AttentionProblem one = ragged;
      one.shape = {1, 8, ragged.shape.seq_lens_q[b], ragged.shape.seq_lens_kv[b], 128, 2};
      flops += attention_flops(one);
      bytes += attention_min_bytes(one);
    }
    EXPECT_DOUBLE_EQ(attention_flops(ragged), flops) << case_label("x", ragged);
    // Plus the int32 lengths and cumulative offsets: 2 x 3 + 1 entries.
    EXPECT_DOUBLE_EQ(attention_min_bytes(ragged), bytes + 4.0 * 7) << case_label("x", ragged);
    // Padded to the longest, the batch computes every sequence at 64 x 300.
    AttentionProblem padded = ragged;
    padded.shape.seq_lens_q.clear();
    padded.shape.seq_lens_kv.clear();
    EXPECT_DOUBLE_EQ(attention_padded_flops(ragged), attention_flops(padded));
    EXPECT_GT(attention_padded_flops(ragged), attention_flops(ragged));
  }
}

TEST(WorkloadModel, PagedBytesCountTokensAndTheBlockTable) {
  AttentionProblem p;
  p.shape = {2, 32, 1, 4096, 128, 8};
  const double dense = attention_min_bytes(p);
  p.shape.page_size = 16;  // 256 pages per sequence: the table is 2 x 256 int32
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), dense + 4.0 * 2 * 256);
  p.shape.seq_lens_kv = {4096, 100};  // only the cached tokens are read
  const double k_and_v = 2.0 * (4096 + 100) * 8 * 128 * 2, q_and_o = 2.0 * 2 * 32 * 128 * 2;
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), k_and_v + q_and_o + 4.0 * 5 + 4.0 * 2 * 256);
}

TEST(WorkloadModel, LabelsNameRaggedLengthsAndPages) {
  AttentionProblem p;
  p.shape = {3, 32, 1, 4096, 128, 8};
  p.shape.seq_lens_kv = {1, 17, 4096};
  p.shape.page_size = 16;
  set_causal_mode(p, CausalMode::bottom_right);
  EXPECT_EQ(case_label("flash", p), "flash bf16 causal_br ragged(kv 1,17,4096) paged16 3x32/8x1x4096x128");
  p.shape = {9, 4, 64, 64, 64};
  p.shape.seq_lens_q = {1, 2, 3, 4, 5, 6, 7, 8, 64};
  EXPECT_EQ(layout_label(p.shape), "ragged(q sum 100 max 64 #2e1f9ddd)");
  // The same lengths in another order are another case: its label differs.
  AttentionShape permuted = p.shape;
  std::swap(permuted.seq_lens_q[0], permuted.seq_lens_q[8]);
  EXPECT_NE(layout_label(permuted), layout_label(p.shape));
  EXPECT_EQ(layout_label(permuted).rfind("ragged(q sum 100 max 64 #", 0), 0u);
}

}  // namespace
}  // namespace attnprof
