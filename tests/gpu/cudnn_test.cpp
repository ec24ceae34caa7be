// cudnn beyond the shared correctness suites (backend_correctness_test.cpp runs it on every
// workload it accepts): what each cuDNN version takes, by cudnn-frontend's support surface, with
// the version it would need named (no GPU needed); that the band its graphs build keeps exactly
// the keys visible_keys() names; that the plan cache tells apart problems that differ only in K/V
// heads, alignment or window; GQA at a shape of the PyTorch reference figures. On request
// (--gtest_also_run_disabled_tests --gtest_filter='CudnnProbe.*'), a probe that prints what the
// loaded cuDNN does with the bands the backend refuses (rows that see no key, seq_q > seq_kv).
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "backends/cudnn.hpp"
#include "backends/cudnn_info.hpp"
#include "backends/cudnn_sdpa_graph.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
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

// ---------------------------------------------------------------------------------------------
// On the GPU.

Verification verify(AttentionBackend& backend, const AttentionProblem& p, CudaStream& stream) {
  DeviceCase device_case(p, std::random_device{}(), stream.get());
  return run_and_verify(backend, device_case, stream.get());
}

// One backend instance, problems that share batch, heads, lengths, head dim, dtype and causal:
// a plan keyed without heads_kv, alignment or window would run the wrong graph for the later ones.
TEST(Cudnn, PlanCacheTellsApartHeadsKvAlignmentAndWindow) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  if (auto reason = backend->check_device(query_device_properties(0))) GTEST_SKIP() << *reason;
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
  CudaStream stream;
  for (const AttentionProblem& p : problems) {
    SCOPED_TRACE(label(p));
    if (auto reason = backend->check_problem(p)) {
      ADD_FAILURE() << "rejected: " << *reason;
      continue;
    }
    try {
      const Verification v = verify(*backend, p, stream);
      EXPECT_TRUE(v.passed) << v.detail;
      EXPECT_EQ(v.non_finite, 0);
    } catch (const BackendUnsupportedError& e) {
      std::printf("  %s: the plan build rejected it: %s\n", label(p).c_str(), e.what());
    }
  }
}

// GQA as in GPU.md's PyTorch figures (32 query heads over 8 K/V heads), d128, where the engine
// tiles many heads and rows; plus decode against a long cache and a bottom-right chunk.
TEST(Cudnn, GroupedHeadsAtReferenceShapes) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  if (auto reason = backend->check_device(query_device_properties(0))) GTEST_SKIP() << *reason;
  const std::vector<AttentionProblem> problems = {
      problem(1, 32, 8, 2048, 2048, 128, kCausal),
      problem(8, 32, 8, 1, 4096, 128, kFull),
      problem(2, 32, 8, 512, 2048, 128, kCausalBottomRight, DType::fp16),
      problem(1, 32, 8, 1024, 1024, 128, {true, {255, -1}, tl}),
  };
  CudaStream stream;
  for (const AttentionProblem& p : problems) {
    SCOPED_TRACE(label(p));
    if (auto reason = backend->check_problem(p)) {
      ADD_FAILURE() << "rejected: " << *reason;
      continue;
    }
    try {
      const Verification v = verify(*backend, p, stream);
      EXPECT_TRUE(v.passed) << v.detail;
      EXPECT_EQ(v.non_finite, 0);
      std::printf("  %-56s rel.err %.3e (bound %.0e, %lld rows)\n", label(p).c_str(), v.relative_error, v.bound,
                  static_cast<long long>(v.rows_checked));
    } catch (const BackendUnsupportedError& e) {
      std::printf("  %s: the plan build rejected it: %s\n", label(p).c_str(), e.what());
    }
  }
}

// Not a regular test: prints what the loaded cuDNN does with the bands check_problem refuses,
// so the refusal can be revisited per version. Run it alone (a kernel fault would poison the
// process): gpu_cudnn_test --gtest_also_run_disabled_tests --gtest_filter='CudnnProbe.*'
TEST(CudnnProbe, DISABLED_BandsTheBackendRefuses) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{.check_band_surface = false});
  if (auto reason = backend->check_device(query_device_properties(0))) GTEST_SKIP() << *reason;
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

}  // namespace
}  // namespace attnprof
