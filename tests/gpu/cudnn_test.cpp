// cudnn beyond the shared correctness suites (backend_correctness_test.cpp runs it on every
// workload it accepts): what each cuDNN version takes, by cudnn-frontend's support surface, with
// the version it would need named (no GPU needed); that the band its graphs build keeps exactly
// the keys visible_keys() names; that the plan cache tells apart problems that differ only in K/V
// heads, alignment or window; GQA at a shape of the PyTorch reference figures. On request
// (--gtest_also_run_disabled_tests --gtest_filter='CudnnProbe.*'), a probe that prints what the
// loaded cuDNN does with the bands the backend refuses (rows that see no key, seq_q > seq_kv).
// Ragged batches and paged K/V caches (issue 19): the version gates of the per-sequence features,
// the ragged offsets, and on the GPU every layout against the float64 reference.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "backends/cudnn.hpp"
#include "backends/cudnn_info.hpp"
#include "backends/cudnn_sdpa_graph.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "refusals_here.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

constexpr auto tl = MaskAlignment::top_left;
constexpr auto br = MaskAlignment::bottom_right;

struct Mask {
  bool causal = false;
  AttentionWindow window;
  MaskAlignment alignment = tl;
};

const Mask kFull{};
const Mask kCausal{true, {-1, -1}, tl};
const Mask kCausalBottomRight{true, {-1, -1}, br};

AttentionProblem problem(int batch, int heads, int heads_kv, int seq_q, int seq_kv, int head_dim, const Mask& mask,
                         DType dtype = DType::bf16) {
  AttentionProblem p;
  p.shape = {batch, heads, seq_q, seq_kv, head_dim, heads_kv};
  p.dtype = dtype;
  p.causal = mask.causal;
  p.window = mask.window;
  p.alignment = mask.alignment;
  return p;
}

std::string label(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  return fmt::format("{} {}{} window[{},{}] {}x{}/{}x{}x{}x{}", to_string(p.dtype), p.causal ? "causal" : "full",
                     p.is_bottom_right() ? " bottom_right" : "", p.window.left, p.window.right, s.batch, s.heads,
                     s.kv_heads(), s.seq_q, s.seq_kv, s.head_dim);
}

// ---------------------------------------------------------------------------------------------
// What each version takes (pure: the support rules and the band, no GPU work).

TEST(CudnnSupport, VersionGatesNameTheVersionNeeded) {
  struct Case {
    AttentionProblem problem;
    std::size_t version;
    std::string expect;  // "" runs; otherwise a piece of the reason
  };
  const Mask window{false, {17, 5}, tl};
  const Mask window_br{false, {17, 5}, br};
  const Mask left_only{false, {64, -1}, tl};
  const Mask causal_left{true, {64, -1}, tl};
  const std::vector<Case> cases = {
      // GQA / MQA: every cuDNN 9, as long as the query heads split evenly.
      {problem(1, 8, 2, 33, 255, 64, kFull), 90000, ""},
      {problem(1, 8, 1, 33, 255, 128, kCausal), 90000, ""},
      {problem(1, 8, 3, 33, 255, 64, kFull), 91900, "multiple of heads_kv 3"},
      // Bottom-right causal: 9.3.0; lengths off multiples of 64 from 9.6.0.
      {problem(1, 8, 8, 33, 255, 64, kCausalBottomRight), 90200, "9.3.0"},
      {problem(1, 8, 8, 33, 255, 64, kCausalBottomRight), 90300, "9.6.0"},
      {problem(1, 8, 8, 64, 256, 64, kCausalBottomRight), 90300, ""},
      {problem(1, 8, 8, 33, 255, 64, kCausalBottomRight), 90600, ""},
      // Square bottom-right is top-left: no version gate.
      {problem(1, 8, 8, 33, 33, 64, kCausalBottomRight), 90000, ""},
      // Windows: a left bound from 9.2.0 when a right bound comes with it; left alone from 9.10.2.
      {problem(1, 8, 2, 33, 255, 64, window), 90100, "9.2.0"},
      {problem(1, 8, 2, 33, 255, 64, window), 90200, ""},
      {problem(1, 8, 2, 33, 255, 64, window_br), 90500, "9.6.0"},
      {problem(1, 8, 2, 33, 255, 64, window_br), 90600, ""},
      {problem(1, 8, 2, 255, 255, 64, left_only), 91001, "9.10.2"},
      {problem(1, 8, 2, 255, 255, 64, left_only), 91002, ""},
      // cuDNN 9.14.0's known bug: left bound without right bound and seq_kv > 1024.
      {problem(1, 8, 2, 255, 2048, 64, left_only), 91400, "9.14.1"},
      {problem(1, 8, 2, 255, 2048, 64, left_only), 91401, ""},
      {problem(1, 8, 2, 255, 2048, 64, causal_left), 91400, ""},
      {problem(1, 8, 2, 255, 1024, 64, left_only), 91400, ""},
      // A left bound no row reaches (33 rows, window 64) is no mask at all.
      {problem(1, 8, 2, 33, 2048, 64, left_only), 91400, ""},
      // Decode with a causal mask: 9.10.0.
      {problem(4, 8, 2, 1, 255, 64, kCausal), 90900, "9.10.0"},
      {problem(4, 8, 2, 1, 255, 64, kCausal), 91000, ""},
      // Bottom-right decode sees every key: no mask, no gate.
      {problem(4, 8, 2, 1, 255, 64, kCausalBottomRight), 90000, ""},
      // Rows that see no key, and left-bounded or bottom-right bands with seq_q > seq_kv: never.
      {problem(1, 8, 2, 255, 33, 64, kCausalBottomRight), 91900, "222 of the 255 query rows see no key"},
      {problem(1, 8, 2, 255, 33, 64, {false, {3, 0}, tl}), 91900, "see no key"},
      {problem(1, 8, 2, 255, 33, 64, {false, {-1, 4}, br}), 91900, "see no key"},
      {problem(1, 8, 2, 255, 33, 64, {false, {230, 0}, tl}), 91900, "seq_q 255 > seq_kv 33"},
      // seq_q > seq_kv without a left bound, top-left: runs (no row is empty).
      {problem(1, 8, 2, 255, 33, 64, {false, {-1, 4}, tl}), 91900, ""},
      {problem(1, 8, 2, 255, 33, 64, kCausal), 91900, ""},
      // What the fused attention never takes.
      {problem(1, 8, 2, 33, 255, 64, kFull, DType::fp32), 91900, "fp32"},
      {problem(1, 8, 2, 33, 255, 36, kFull), 91900, "multiple of 8"},
      {problem(1, 8, 2, 33, 255, 264, kFull), 91900, "above 256"},
  };
  for (const Case& c : cases) {
    const std::string reason = sdpa_unsupported(c.problem, c.version).value_or("");
    const std::string where = fmt::format("{} on cuDNN {}", label(c.problem), format_cudnn_version(c.version));
    if (c.expect.empty()) {
      EXPECT_EQ(reason, "") << where;
    } else {
      EXPECT_NE(reason.find(c.expect), std::string::npos) << where << ": \"" << reason << "\" lacks \"" << c.expect << "\"";
    }
  }
  // The probe's backend lets the refused bands through to the library; version gates still hold.
  EXPECT_EQ(sdpa_unsupported(problem(1, 8, 2, 255, 33, 64, kCausalBottomRight), 91900, false).value_or(""), "");
  EXPECT_NE(sdpa_unsupported(problem(1, 8, 2, 255, 33, 64, kCausalBottomRight), 90200, false).value_or(""), "");
}

TEST(CudnnSupport, BoundsThatMaskNothingAreDropped) {
  EXPECT_FALSE(sdpa_band(problem(4, 8, 2, 1, 255, 64, kCausalBottomRight)).masked());  // decode sees every key
  EXPECT_FALSE(sdpa_band(problem(1, 8, 2, 33, 255, 64, {false, {1000, -1}, tl})).masked());
  EXPECT_FALSE(sdpa_band(problem(1, 8, 2, 1, 1, 64, kCausal)).masked());
  const SdpaBand square = sdpa_band(problem(1, 8, 2, 33, 33, 64, kCausalBottomRight));
  EXPECT_EQ(square.right_bound, 0);
  EXPECT_FALSE(square.left_bound.has_value());
  EXPECT_FALSE(square.bottom_right);  // the same band as top-left: the plain causal graph
  const SdpaBand window = sdpa_band(problem(1, 8, 2, 33, 255, 64, {false, {17, 5}, br}));
  EXPECT_EQ(window.left_bound, 18);  // cuDNN's left bound counts the diagonal
  EXPECT_EQ(window.right_bound, 5);
  EXPECT_TRUE(window.bottom_right);
  EXPECT_EQ(window.shift, 255 - 33);
  const SdpaBand causal_window = sdpa_band(problem(1, 8, 2, 33, 255, 64, {true, {20, 7}, br}));
  EXPECT_EQ(causal_window.right_bound, 0);  // causal caps the right side
  EXPECT_EQ(causal_window.left_bound, 21);
  // A left bound that reaches past key 0 from every row (row 0's diagonal is key 222) masks nothing.
  EXPECT_FALSE(sdpa_band(problem(1, 8, 2, 33, 255, 64, {true, {300, 7}, br})).left_bound.has_value());
}

// Every mask and length of the Workloads suite (and then some): the band cuDNN is given keeps
// key j of row i exactly when visible_keys() says the row sees it.
TEST(CudnnSupport, BandKeepsExactlyTheVisibleKeys) {
  std::vector<Mask> masks = {kFull, kCausal, kCausalBottomRight};
  for (MaskAlignment a : {tl, br})
    for (bool causal : {false, true})
      for (AttentionWindow w : {AttentionWindow{3, 0}, AttentionWindow{64, 0}, AttentionWindow{17, 5},
                                AttentionWindow{-1, 4}, AttentionWindow{300, -1}, AttentionWindow{0, 0},
                                AttentionWindow{64, -1}, AttentionWindow{0, -1}, AttentionWindow{-1, 0}})
        masks.push_back({causal, w, a});
  const std::vector<std::pair<int, int>> lengths = {{1, 1},    {17, 17},  {33, 255}, {255, 33},
                                                    {1, 255},  {255, 1},  {64, 256}, {300, 17}};
  for (const Mask& mask : masks)
    for (auto [seq_q, seq_kv] : lengths) {
      const AttentionProblem p = problem(1, 8, 2, seq_q, seq_kv, 64, mask);
      const SdpaBand band = sdpa_band(p);
      for (int row = 0; row < seq_q; ++row) {
        const KeyRange keys = visible_keys(p, row, seq_q, seq_kv);
        for (int key = 0; key < seq_kv; ++key) {
          const bool visible = key >= keys.first && key <= keys.last;
          ASSERT_EQ(band.keeps(row, key), visible) << label(p) << " row " << row << " key " << key;
        }
      }
    }
}

// A ragged and/or paged problem: lengths per sequence (empty: dense), page_size 0 = not paged.
AttentionProblem ragged(AttentionProblem p, std::vector<int> lens_q, std::vector<int> lens_kv, int page_size = 0) {
  p.shape.seq_lens_q = std::move(lens_q);
  p.shape.seq_lens_kv = std::move(lens_kv);
  p.shape.page_size = page_size;
  return p;
}

// Per sequence, a bottom-right causal band seen from one query row masks nothing (paged or
// ragged decode): no mask in the graph. Two rows, or top-left, keep it.
TEST(CudnnSupport, PerSequenceDecodeDropsTheVacuousCausalMask) {
  EXPECT_FALSE(sdpa_band(ragged(problem(3, 8, 2, 1, 4096, 64, kCausalBottomRight), {}, {}, 16)).masked());
  EXPECT_FALSE(sdpa_band(ragged(problem(3, 8, 2, 1, 4096, 64, kCausalBottomRight), {1, 1, 1}, {4096, 17, 1})).masked());
  EXPECT_TRUE(sdpa_band(ragged(problem(3, 8, 2, 2, 4096, 64, kCausalBottomRight), {2, 1, 1}, {4096, 17, 1})).masked());
  EXPECT_TRUE(sdpa_band(ragged(problem(3, 8, 2, 1, 4096, 64, kCausal), {}, {}, 16)).masked());
}

std::string ragged_label(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  return fmt::format("{} q[{}] kv[{}]{}", label(p), fmt::join(s.seq_lens_q, ","), fmt::join(s.seq_lens_kv, ","),
                     s.paged() ? fmt::format(" pages of {}", s.page_size) : "");
}

TEST(CudnnSupport, PerSequenceFeaturesNameTheVersionNeeded) {
  struct Case {
    AttentionProblem problem;
    std::size_t version;
    std::string expect;  // "" runs; otherwise a piece of the reason
  };
  const AttentionProblem base = problem(3, 8, 2, 64, 300, 64, kFull);
  const AttentionProblem causal_br = problem(3, 8, 2, 64, 300, 64, kCausalBottomRight);
  const AttentionProblem d128 = problem(3, 8, 2, 64, 300, 128, kFull);
  const std::vector<Case> cases = {
      // Ragged (packed) batches: a padding mask with ragged offsets, every cuDNN 9 (the device
      // gate for pre-Hopper GPUs is prepare()'s).
      {ragged(base, {1, 17, 64}, {5, 300, 17}), 90000, ""},
      {ragged(base, {1, 17, 64}, {}), 90000, ""},
      // A bottom-right diagonal per sequence: 9.6.0.
      {ragged(causal_br, {1, 17, 64}, {5, 300, 64}), 90500, "9.6.0"},
      {ragged(causal_br, {1, 17, 64}, {5, 300, 64}), 90600, ""},
      // Paged caches: 9.5.0; with packed queries 9.7.0; head_dim 128 < 9.10 is fine, above not.
      {ragged(base, {}, {5, 300, 17}, 16), 90400, "9.5.0"},
      {ragged(base, {}, {5, 300, 17}, 16), 90500, ""},
      {ragged(base, {}, {}, 64), 90500, ""},
      {ragged(base, {1, 17, 64}, {5, 300, 17}, 16), 90600, "9.7.0"},
      {ragged(base, {1, 17, 64}, {5, 300, 17}, 16), 90700, ""},
      {ragged(d128, {}, {5, 300, 17}, 64), 90500, ""},
      {ragged(problem(3, 8, 2, 64, 300, 256, kFull), {}, {5, 300, 17}, 64), 90900, "9.10.0"},
      // Rows that see no key: a key-less sequence; q_len > kv_len under a bottom-right diagonal.
      {ragged(base, {1, 17, 64}, {5, 0, 17}), 91900, "sequence 1"},
      {ragged(causal_br, {1, 17, 64}, {5, 300, 17}), 91900, "sequence 2"},
      {ragged(problem(3, 8, 2, 64, 300, 64, kCausal), {1, 17, 64}, {5, 300, 17}), 91900, ""},
      // An empty query sequence has no rows: fine.
      {ragged(causal_br, {0, 17, 64}, {0, 300, 64}), 91900, ""},
      // Windows do not follow per-sequence lengths here.
      {ragged(problem(3, 8, 2, 64, 300, 64, {true, {16, -1}, br}), {1, 17, 64}, {5, 300, 64}), 91900, "window"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ragged_label(c.problem) + " on " + format_cudnn_version(c.version));
    const std::string reason = sdpa_unsupported(c.problem, c.version).value_or("");
    if (c.expect.empty())
      EXPECT_EQ(reason, "");
    else
      EXPECT_NE(reason.find(c.expect), std::string::npos) << reason;
  }
}

TEST(CudnnSupport, RaggedOffsetsCountElements) {
  EXPECT_EQ(sdpa_ragged_offsets({1, 17, 0, 300}, 8, 64),
            (std::vector<std::int64_t>{0, 512, 512 + 17 * 512, 512 + 17 * 512, 512 + 317 * 512}));
  // A causal mask per sequence: a right bound, the alignment kept even when the maxima are square.
  const SdpaBand band = sdpa_band(ragged(problem(2, 8, 2, 33, 33, 64, kCausalBottomRight), {1, 33}, {33, 1}));
  EXPECT_EQ(band.right_bound, 0);
  EXPECT_TRUE(band.bottom_right);
  EXPECT_FALSE(sdpa_band(ragged(problem(2, 8, 2, 33, 33, 64, kFull), {1, 33}, {33, 1})).masked());
  // Packed K/V as one-token pages: each sequence's token rows, then its last row as padding.
  const AttentionProblem packed = ragged(problem(3, 8, 2, 1, 4, 64, kFull), {}, {2, 0, 4});
  EXPECT_EQ(sdpa_token_page_table(packed.shape), (std::vector<std::int32_t>{0, 1, 1, 1, 0, 0, 0, 0, 2, 3, 4, 5}));
  // Decode reads packed K/V as one-token pages first (then ragged offsets); prefill the other way.
  EXPECT_TRUE(sdpa_prefers_token_pages(packed));
  EXPECT_FALSE(sdpa_prefers_token_pages(ragged(problem(3, 8, 2, 129, 300, 64, kFull), {}, {17, 300, 129})));
  EXPECT_FALSE(sdpa_prefers_token_pages(ragged(problem(3, 8, 2, 1, 300, 64, kFull), {}, {}, 16)));
  const std::vector<SdpaGraphVariant> decode = sdpa_graph_variants(packed, 91400, true);
  ASSERT_EQ(decode.size(), 2u);
  EXPECT_TRUE(decode[0].packed_kv_as_pages);
  EXPECT_FALSE(decode[1].packed_kv_as_pages);
  // No paged caches before 9.5.0: ragged offsets only.
  EXPECT_FALSE(sdpa_graph_variants(packed, 90400, true).front().packed_kv_as_pages);
}

// ---------------------------------------------------------------------------------------------
// On the GPU.

Verification verify(AttentionBackend& backend, const AttentionProblem& p, CudaStream& stream) {
  DeviceCase device_case(p, std::random_device{}(), stream.get());
  return run_and_verify(backend, device_case, stream.get());
}

// What a refusal (by check_problem, or by the plan build) does to the test: fails it, or, where
// the refusal policy accepts it (a version gate this cuDNN is below, or what `attnprof backends`'
// table of cudnn refuses: refusals_here.hpp), is counted and printed.
enum class OnRefusal { fail, accept_documented };

struct Tally {
  int verified = 0;
  int refused = 0;  // accepted refusals only: any other failed the test
};

// Each problem once on one backend instance (so its plan cache is exercised) against the float64
// reference.
Tally verify_each(AttentionBackend& backend, const std::vector<AttentionProblem>& problems, OnRefusal on_refusal,
                  std::string (*name)(const AttentionProblem&)) {
  CudaStream stream;
  Tally tally;
  auto refused = [&](const AttentionProblem& p, const std::string& refusal) {
    const test::RefusalVerdict verdict = *test::case_refusal_here("cudnn", p, name(p), refusal);
    if (on_refusal == OnRefusal::fail || !verdict.accepted) {
      ADD_FAILURE() << (on_refusal == OnRefusal::fail ? "every problem here must run; " : "") << verdict.message;
      return;
    }
    std::printf("  REFUSED %s\n", verdict.message.c_str());
    ++tally.refused;
  };
  for (const AttentionProblem& p : problems) {
    SCOPED_TRACE(name(p));
    if (auto reason = backend.check_problem(p)) {
      refused(p, *reason);
      continue;
    }
    try {
      const Verification v = verify(backend, p, stream);
      EXPECT_TRUE(v.passed) << v.detail;
      EXPECT_EQ(v.non_finite, 0);
      std::printf("  %s %-72s rel.err %.3e (bound %.0e, %lld rows)\n", v.passed ? "OK  " : "FAIL", name(p).c_str(),
                  v.relative_error, v.bound, static_cast<long long>(v.rows_checked));
      ++tally.verified;
    } catch (const BackendUnsupportedError& e) {
      refused(p, std::string("the plan build rejected it: ") + e.what());
    }
  }
  return tally;
}

// One backend instance, problems that share batch, heads, lengths, head dim, dtype and causal:
// a plan keyed without heads_kv, alignment or window would run the wrong graph for the later ones.
TEST(Cudnn, PlanCacheTellsApartHeadsKvAlignmentAndWindow) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  const std::vector<AttentionProblem> problems = {
      problem(2, 8, 8, 33, 255, 64, kCausal),
      problem(2, 8, 2, 33, 255, 64, kCausal),
      problem(2, 8, 2, 33, 255, 64, kCausalBottomRight),
      problem(2, 8, 1, 33, 255, 64, kCausalBottomRight),
      problem(2, 8, 2, 33, 255, 64, {false, {17, 5}, tl}),
      problem(2, 8, 2, 33, 255, 64, {false, {17, 5}, br}),
      problem(2, 8, 2, 33, 255, 64, {false, {3, 0}, br}),
      problem(2, 8, 8, 33, 255, 64, kCausal),  // the first plan again, from the cache
  };
  const Tally tally = verify_each(*backend, problems, OnRefusal::fail, label);
  EXPECT_EQ(tally.verified, static_cast<int>(problems.size()));
}

// GQA as in GPU.md's PyTorch figures (32 query heads over 8 K/V heads), d128, where the engine
// tiles many heads and rows; plus decode against a long cache and a bottom-right chunk.
TEST(Cudnn, GroupedHeadsAtReferenceShapes) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  const std::vector<AttentionProblem> problems = {
      problem(1, 32, 8, 2048, 2048, 128, kCausal),
      problem(8, 32, 8, 1, 4096, 128, kFull),
      problem(2, 32, 8, 512, 2048, 128, kCausalBottomRight, DType::fp16),
      problem(1, 32, 8, 1024, 1024, 128, {true, {255, -1}, tl}),
  };
  const Tally tally = verify_each(*backend, problems, OnRefusal::fail, label);
  EXPECT_EQ(tally.verified, static_cast<int>(problems.size()));
}

// Ragged batches and paged caches against the float64 reference: lengths 1, 17 and the maximum,
// seq_q != seq_kv, the three causal modes, GQA, head dims 64 and 128, bf16 and fp16, pages of 16
// and 64, decode (seq_q 1). A refusal is accepted only as a version gate this cuDNN is below (the
// gates are tested above) or what `attnprof backends`' table of cudnn refuses; others fail.
TEST(Cudnn, RaggedAndPagedMatchTheReference) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  std::printf("cuDNN %s\n", cudnn_runtime_description().c_str());
  const Mask modes[] = {kFull, kCausal, kCausalBottomRight};
  std::vector<AttentionProblem> problems;
  for (const Mask& mask : modes) {
    // Ragged prefill, packed Q/O and K/V, q_len <= kv_len per sequence (every row sees a key).
    problems.push_back(ragged(problem(3, 8, 2, 129, 300, 64, mask), {1, 17, 129}, {17, 300, 129}));
    problems.push_back(ragged(problem(3, 8, 8, 129, 300, 128, mask, DType::fp16), {1, 17, 129}, {1, 300, 200}));
    // Ragged K/V only (dense Q), and ragged Q only (dense K/V).
    problems.push_back(ragged(problem(3, 8, 2, 17, 300, 64, mask), {}, {17, 300, 64}));
    problems.push_back(ragged(problem(3, 8, 2, 255, 255, 128, mask), {1, 17, 255}, {}));
    // Paged K/V, pages of 16 and 64, with per-sequence K/V lengths; dense and packed queries.
    problems.push_back(ragged(problem(3, 8, 2, 17, 300, 128, mask), {}, {17, 300, 150}, 16));
    problems.push_back(ragged(problem(3, 8, 2, 64, 300, 64, mask, DType::fp16), {}, {}, 64));
    problems.push_back(ragged(problem(3, 8, 2, 33, 300, 128, mask), {1, 17, 33}, {17, 300, 33}, 64));
    // Decode: one query row per sequence against a paged, ragged cache; GQA 32/8, d128.
    problems.push_back(ragged(problem(4, 32, 8, 1, 1000, 128, mask), {}, {1, 17, 1000, 513}, 16));
    problems.push_back(ragged(problem(4, 32, 8, 1, 1000, 128, mask, DType::fp16), {}, {1, 17, 1000, 513}, 64));
  }
  const Tally tally = verify_each(*backend, problems, OnRefusal::accept_documented, ragged_label);
  std::printf("  %d verified, %d refused as documented, of %zu\n", tally.verified, tally.refused, problems.size());
  RecordProperty("cudnn_version", cudnn_runtime_version());
  EXPECT_EQ(tally.verified + tally.refused, static_cast<int>(problems.size())) << "refusals that failed the test";
  // cuDNN 9.7+ takes every one of these (paged with packed queries is 9.7's); a refusal there is a
  // regression of this backend.
  if (cudnn_runtime_version_number() >= 90700) {
    EXPECT_EQ(tally.refused, 0);
  }
}

// The plan cache keys on the lengths and the page size: the same maxima with other lengths, or
// paged against not, must build (and run) another graph.
TEST(Cudnn, PlanCacheTellsApartLengthsAndPages) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  const AttentionProblem base = problem(2, 8, 2, 40, 200, 64, kCausalBottomRight);
  const std::vector<AttentionProblem> problems = {
      ragged(base, {1, 40}, {100, 200}), ragged(base, {40, 1}, {200, 100}), ragged(base, {}, {200, 100}, 16),
      ragged(base, {}, {200, 100}, 64),  ragged(base, {}, {}, 16),            base,
      ragged(base, {1, 40}, {100, 200}),
  };
  const Tally tally = verify_each(*backend, problems, OnRefusal::accept_documented, ragged_label);
  EXPECT_EQ(tally.verified + tally.refused, static_cast<int>(problems.size())) << "refusals that failed the test";
  // From cuDNN 9.6 (bottom-right per sequence; paged caches are 9.5's) every problem runs: a plan
  // cache that confused two of them shows only when both run.
  if (cudnn_runtime_version_number() >= 90600) {
    EXPECT_EQ(tally.verified, static_cast<int>(problems.size()));
  }
}

// Not a regular test: prints what the loaded cuDNN does with the bands check_problem refuses,
// so the refusal can be revisited per version. Run it alone (a kernel fault would poison the
// process): gpu_cudnn_test --gtest_also_run_disabled_tests --gtest_filter='CudnnProbe.*'
TEST(CudnnProbe, DISABLED_BandsTheBackendRefuses) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{.check_band_surface = false});
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  const std::vector<AttentionProblem> problems = {
      problem(2, 8, 2, 255, 33, 64, kCausalBottomRight),
      problem(2, 8, 2, 255, 33, 128, {false, {3, 0}, tl}),
      problem(2, 8, 2, 255, 33, 64, {false, {-1, 4}, br}),
      problem(2, 8, 2, 255, 33, 64, {false, {230, 0}, tl}),  // seq_q > seq_kv, left bound, no empty row
      problem(1, 8, 2, 300, 256, 128, kCausalBottomRight),
  };
  std::printf("cuDNN %s\n", cudnn_runtime_description().c_str());
  CudaStream stream;
  for (const AttentionProblem& p : problems) {
    int empty = 0;
    for (int row = 0; row < p.shape.seq_q; ++row) empty += visible_keys(p, row, p.shape.seq_q, p.shape.seq_kv).count() == 0;
    std::string outcome;
    try {
      if (auto reason = backend->check_problem(p)) {
        outcome = "refused by a version gate: " + *reason;
      } else {
        const Verification v = verify(*backend, p, stream);
        outcome = v.passed ? "matches the reference (rows without keys are zeros)"
                           : fmt::format("WRONG: {} (non-finite elements: {})", v.detail, v.non_finite);
      }
    } catch (const BackendUnsupportedError& e) {
      outcome = std::string("the plan build refused it: ") + e.what();
    } catch (const std::exception& e) {
      outcome = std::string("FAILED: ") + e.what();
    }
    std::printf("  %-56s rows without keys %3d: %s\n", label(p).c_str(), empty, outcome.c_str());
    RecordProperty(label(p), outcome);
  }
}

// Not a regular test (timings are never asserted): decode at the shapes, dense K/V
// against a paged cache (pages of 16 and 64) of the same lengths, and a ragged cache, in GB/s of
// the minimum-bytes model (median of 20 runs, CUDA events). Run it alone:
// gpu_cudnn_test --gtest_also_run_disabled_tests --gtest_filter='CudnnProbe.DISABLED_DecodeBandwidth'
TEST(CudnnProbe, DISABLED_DecodeBandwidth) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  std::printf("cuDNN %s\n", cudnn_runtime_description().c_str());
  struct Shape {
    int batch, seq_kv;
  };
  CudaStream stream;
  for (const Shape& shape : {Shape{8, 32768}, Shape{64, 4096}, Shape{1, 131072}}) {
    const AttentionProblem dense = problem(shape.batch, 32, 8, 1, shape.seq_kv, 128, kFull);
    std::vector<int> lens(static_cast<std::size_t>(shape.batch));
    for (int b = 0; b < shape.batch; ++b) lens[static_cast<std::size_t>(b)] = shape.seq_kv - (b * 977) % (shape.seq_kv / 2);
    for (const AttentionProblem& p : {dense, ragged(dense, {}, {}, 16), ragged(dense, {}, {}, 64),
                                      ragged(dense, {}, lens), ragged(dense, {}, lens, 64)}) {
      std::string outcome;
      try {
        if (auto reason = backend->check_problem(p)) {
          outcome = "skipped: " + *reason;
        } else {
          DeviceCase device_case(p, 1234, stream.get());
          backend->prepare(p, stream.get());
          const AttentionBuffers buffers = device_case.buffers();
          for (int i = 0; i < 3; ++i) backend->run(p, buffers, stream.get());
          std::vector<float> ms;
          for (int i = 0; i < 20; ++i) {
            CudaEvent start, stop;
            CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
            backend->run(p, buffers, stream.get());
            CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
            CUDA_CHECK(cudaEventSynchronize(stop.get()));
            float elapsed = 0.f;
            CUDA_CHECK(cudaEventElapsedTime(&elapsed, start.get(), stop.get()));
            ms.push_back(elapsed);
          }
          std::sort(ms.begin(), ms.end());
          const double median_ms = ms[ms.size() / 2];
          outcome = fmt::format("{:8.1f} us  {:7.0f} GB/s", median_ms * 1e3, attention_min_bytes(p) / (median_ms * 1e6));
        }
      } catch (const std::exception& e) {
        outcome = std::string("failed: ") + e.what();
      }
      std::printf("  %-72s %s\n", ragged_label(p).c_str(), outcome.c_str());
    }
  }
}

}  // namespace
}  // namespace attnprof
