// `attnprof diff`: kernel names normalised, the bootstrap interval and the verdict it allows,
// cases paired by problem (and by --match rules), the changes found per pair, every way an input
// can be bad, and the four formats and the page.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "diff/bootstrap.hpp"
#include "diff/case_matching.hpp"
#include "diff/diff.hpp"
#include "diff/diff_input.hpp"
#include "diff/html_diff.hpp"
#include "diff/kernel_names.hpp"
#include "diff/render_diff.hpp"
#include "summary/program_summary.hpp"

namespace attnprof {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = ATTNPROF_SOURCE_DIR;
const fs::path kGolden = ATTNPROF_GOLDEN_DIR;

// ---- fixtures ----

KernelSummary kernel(const std::string& name, double per_iter, double us, int registers = 128) {
  KernelSummary k;
  k.name = name;
  k.per_iter = per_iter;
  k.gpu_us_per_iter = us;
  k.registers_per_thread = registers;
  k.block = {128, 1, 1};
  k.grid = {64, 16, 2};
  k.shared_bytes = 49152;
  k.occupancy_valid = true;
  k.theoretical_occupancy_percent = 12.5;
  k.occupancy_limiter = "registers";
  k.launch_api = "cudaLaunchKernel";
  return k;
}

AttentionProblem problem(int seq = 1024, DType dtype = DType::bf16) {
  AttentionProblem p;
  p.shape = {2, 16, seq, seq, 128};
  p.dtype = dtype;
  p.causal = true;
  return p;
}

// A case that ran, with iterations spread ±2% around `median_us`.
CaseSummary ran_case(const std::string& backend, const AttentionProblem& p, double median_us) {
  CaseSummary c;
  c.backend = backend;
  c.problem = p;
  c.label = case_label(backend, p);
  c.status = CaseStatus::ok;
  c.verified = c.verify_passed = true;
  for (double f : {0.98, 0.99, 1.0, 1.0, 1.01, 1.02, 0.995, 1.005, 1.0, 0.99, 1.01, 1.0})
    c.iteration_us.push_back(median_us * f);
  c.iterations = static_cast<int>(c.iteration_us.size());
  c.median_us = median(c.iteration_us);
  c.tflops = attention_flops(p) / (c.median_us * 1e6);
  c.kernels = {kernel("void attnprof::kernels::flash::flash_fwd_kernel<Traits<64, 128>, true>(Params)", 1, median_us * 0.9)};
  c.kernels_per_iter = 1;
  c.launch_apis = {"cudaLaunchKernel"};
  return c;
}

CaseSummary program_case(const std::string& range, double median_us) {
  CaseSummary c = ran_case("", unknown_problem(), median_us);
  c.label = range;
  c.tflops = 0;
  return c;
}

DiffInput input_of(std::vector<CaseSummary> cases, const std::string& path = "run") {
  DiffInput in;
  in.path = in.source = path;
  in.origin = "summary.json";
  in.summary.device.name = "NVIDIA H200";
  in.summary.cases = std::move(cases);
  return in;
}

DiffOptions with_rules(std::vector<std::string> rules) {
  DiffOptions o;
  o.matching = parse_match_rules(rules);
  return o;
}

RunSummary sample_summary() { return load_summary((kSource / "traces/samples/sample_summary.json").string()); }

// A fresh folder under the system's temporary folder, removed with the test.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name) : path_(fs::temp_directory_path() / ("attnprof_diff_test_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
    return path_ / name;
  }

 private:
  fs::path path_;
};

// The message of the UsageError `load_diff_input` throws for `path` ("" if it throws none).
std::string usage_error_for(const fs::path& path) {
  try {
    load_diff_input(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

const ActivityChange* kernel_change(const CaseDiff& d, const std::string& name) {
  for (const ActivityChange& k : d.kernels)
    if (k.name == name) return &k;
  return nullptr;
}

const FieldChange* field_change(const std::vector<FieldChange>& list, const std::string& field) {
  for (const FieldChange& f : list)
    if (f.field == field) return &f;
  return nullptr;
}

// ---- kernel names ----

TEST(DiffKernelNames, TemplateArgumentsAndParametersDoNotMakeANewKernel) {
  EXPECT_EQ(normalize_kernel_name("void attnprof::kernels::flash::flash_fwd_kernel<Traits<64, 128>, true>(Params)"),
            "attnprof::kernels::flash::flash_fwd_kernel");
  EXPECT_EQ(normalize_kernel_name("void attnprof::kernels::flash::flash_fwd_kernel<Traits<128, 64>, false>(Params)"),
            normalize_kernel_name("void attnprof::kernels::flash::flash_fwd_kernel<Traits<64, 128>, true>(Params)"));
  EXPECT_EQ(normalize_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<"
                                  "float>, std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, "
                                  "std::array<char*, 2ul>)"),
            "at::native::vectorized_elementwise_kernel");
}

TEST(DiffKernelNames, AnonymousNamespacesAndTheReturnTypeAreDropped) {
  EXPECT_EQ(normalize_kernel_name("void attnprof::kernels::(anonymous namespace)::convert_kernel<__nv_bfloat16, float>("
                                  "__nv_bfloat16 const*, float*, long, long, long)"),
            "attnprof::kernels::convert_kernel");
  EXPECT_EQ(normalize_kernel_name("attnprof::kernels::(anonymous namespace)::tril_kernel(bool const*, bool*, int)"),
            "attnprof::kernels::tril_kernel");
  EXPECT_EQ(normalize_kernel_name("(anonymous namespace)::top_kernel(int)"), "top_kernel");
  EXPECT_EQ(normalize_kernel_name("void attnprof::k<int>(int) "), "attnprof::k");
  EXPECT_EQ(normalize_kernel_name("void `anonymous namespace'::msvc_kernel<int>(int)"), "msvc_kernel");
}

TEST(DiffKernelNames, LambdaDecorationsAreDropped) {
  EXPECT_EQ(normalize_kernel_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::"
                                  "native::(anonymous namespace)::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{"
                                  "lambda()#3}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
                                  "at::native::(anonymous namespace)::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
                                  "{lambda()#3}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, "
                                  "at::native::gpu_kernel_impl_nocast<>::{lambda(int)#1})"),
            "at::native::elementwise_kernel");
  EXPECT_EQ(normalize_kernel_name("void foo::launch_kernel<[lambda() (instance 1)]>(int)"),
            normalize_kernel_name("void foo::launch_kernel<[lambda() (instance 2)]>(int)"));
}

TEST(DiffKernelNames, MangledNamesAreDemangledFirst) {
  // _ZN8attnprof6kernel3fooIiEEvPT_ = void attnprof::kernel::foo<int>(int*)
  EXPECT_EQ(normalize_kernel_name("_ZN8attnprof6kernel3fooIiEEvPT_"), "attnprof::kernel::foo");
  EXPECT_EQ(normalize_kernel_name("_Znot_a_mangled_name"), "_Znot_a_mangled_name");
}

TEST(DiffKernelNames, AGeneratorsOrdinalIsDroppedOtherDigitsStay) {
  EXPECT_EQ(normalize_kernel_name("triton_poi_fused_add_mul_0"), "triton_poi_fused_add_mul");
  EXPECT_EQ(normalize_kernel_name("triton_poi_fused_add_mul_7"), normalize_kernel_name("triton_poi_fused_add_mul_0"));
  EXPECT_EQ(normalize_kernel_name("triton_poi_fused_pow_2_1"), "triton_poi_fused_pow_2");
  // cuBLAS and cuDNN names say which tile they run: a different tile is a different kernel.
  EXPECT_EQ(normalize_kernel_name("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT"), "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT");
  EXPECT_NE(normalize_kernel_name("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT"),
            normalize_kernel_name("nvjet_sm90_tst_64x24_64x16_2x4_h_bz_TNT"));
  EXPECT_EQ(normalize_kernel_name("softmax_kernel_32"), "softmax_kernel_32");
}

TEST(DiffKernelNames, DifferentKernelsStayDifferent) {
  EXPECT_NE(normalize_kernel_name("void a::flash_fwd_kernel<T>(P)"), normalize_kernel_name("void a::flash_bwd_kernel<T>(P)"));
  EXPECT_NE(normalize_kernel_name("void a::kernel<T>(P)"), normalize_kernel_name("void b::kernel<T>(P)"));
  EXPECT_EQ(normalize_kernel_name("<>"), "<>");  // all brackets: kept whole, not emptied
}

// ---- the interval ----

TEST(DiffBootstrap, TheSameSamplesGiveTheSameIntervalEveryTime) {
  const std::vector<double> a = {10, 11, 9, 10.5, 9.5, 12, 10}, b = {12, 13, 11, 12.5, 14, 12};
  const auto first = bootstrap_median_ratio(a, b), second = bootstrap_median_ratio(a, b);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->low, second->low);
  EXPECT_EQ(first->high, second->high);
  BootstrapOptions other_seed;
  other_seed.seed = 7;
  const auto third = bootstrap_median_ratio(a, b, other_seed);
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->low != first->low || third->high != first->high);
}

TEST(DiffBootstrap, TheIntervalHoldsTheRatioOfMedians) {
  const std::vector<double> a = {100, 104, 96, 101, 99, 103, 97}, b = {120, 126, 115, 121, 119, 124, 117};
  const auto r = bootstrap_median_ratio(a, b);
  ASSERT_TRUE(r);
  const double ratio = median(b) / median(a);
  EXPECT_LE(r->low, ratio);
  EXPECT_GE(r->high, ratio);
  EXPECT_GT(r->low, 1.0);  // every resample of b is slower than every one of a
  EXPECT_TRUE(r->excludes(1.0));
}

TEST(DiffBootstrap, OverlappingSamplesGiveAnIntervalThatHoldsOne) {
  const std::vector<double> a = {100, 80, 120, 95, 110, 70, 130}, b = {105, 75, 125, 90, 115, 85, 128};
  const auto r = bootstrap_median_ratio(a, b);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->excludes(1.0));
}

TEST(DiffBootstrap, AWiderConfidenceGivesAWiderInterval) {
  const std::vector<double> a = {100, 90, 110, 95, 105, 98, 102, 93}, b = {110, 100, 121, 104, 116, 108, 112, 103};
  BootstrapOptions narrow, wide;
  narrow.confidence = 0.5;
  wide.confidence = 0.99;
  const auto n = bootstrap_median_ratio(a, b, narrow), w = bootstrap_median_ratio(a, b, wide);
  ASSERT_TRUE(n && w);
  EXPECT_LE(w->low, n->low);
  EXPECT_GE(w->high, n->high);
  EXPECT_LT(n->high - n->low, w->high - w->low);
}

TEST(DiffBootstrap, OneSampleOrNonPositiveTimesGiveNoInterval) {
  EXPECT_FALSE(bootstrap_median_ratio({10}, {10, 11}));
  EXPECT_FALSE(bootstrap_median_ratio({10, 11}, {}));
  EXPECT_FALSE(bootstrap_median_ratio({0, 0}, {1, 2}));
}

// ---- the verdict ----

TEST(DiffVerdict, SlowerWhenTheIntervalExcludesOneAndTheChangeIsPastTheFloor) {
  const TimeChange t = compare_times(ran_case("flash:fa2", problem(), 100), ran_case("flash:fa2", problem(), 130));
  ASSERT_TRUE(t.ratio && t.interval);
  EXPECT_NEAR(*t.ratio, 1.3, 1e-9);
  EXPECT_TRUE(t.interval->excludes(1.0));
  EXPECT_EQ(t.verdict, Verdict::slower);
  EXPECT_NE(t.reason.find("+30.0%"), std::string::npos) << t.reason;
  EXPECT_EQ(t.iterations_a, 12);
}

TEST(DiffVerdict, FasterWhenBTakesLessTime) {
  const TimeChange t = compare_times(ran_case("flash:fa2", problem(), 100), ran_case("flash:fa2", problem(), 70));
  EXPECT_EQ(t.verdict, Verdict::faster);
  ASSERT_TRUE(t.throughput_ratio && t.throughput_interval);
  // The same problem: throughput moves by the inverse of the time.
  EXPECT_NEAR(*t.throughput_ratio, 1.0 / 0.7, 1e-6);
  EXPECT_NEAR(t.throughput_interval->low, 1.0 / t.interval->high, 1e-9);
  EXPECT_NEAR(t.throughput_interval->high, 1.0 / t.interval->low, 1e-9);
}

TEST(DiffVerdict, ATightChangeInsideTheDriftFloorIsWithinNoise) {
  const CaseSummary a = ran_case("flash:fa2", problem(), 100), b = ran_case("flash:fa2", problem(), 106);
  const TimeChange t = compare_times(a, b);
  ASSERT_TRUE(t.interval);
  EXPECT_TRUE(t.interval->excludes(1.0));  // the spread is 2%: the interval alone would call it
  EXPECT_EQ(t.verdict, Verdict::within_noise);
  EXPECT_NE(t.reason.find("drift floor"), std::string::npos) << t.reason;
  DiffOptions strict;
  strict.noise_percent = 3;
  EXPECT_EQ(compare_times(a, b, strict).verdict, Verdict::slower);
}

TEST(DiffVerdict, ALargeChangeWhoseIntervalHoldsOneIsWithinNoise) {
  CaseSummary a = ran_case("flash:fa2", problem(), 100), b = ran_case("flash:fa2", problem(), 100);
  a.iteration_us = {100, 60, 140, 95, 150, 55, 105};
  b.iteration_us = {120, 70, 160, 65, 150, 58, 125};
  const TimeChange t = compare_times(a, b);
  ASSERT_TRUE(t.ratio && t.interval);
  EXPECT_GT(*t.ratio, 1.1);
  EXPECT_FALSE(t.interval->excludes(1.0));
  EXPECT_EQ(t.verdict, Verdict::within_noise);
  EXPECT_NE(t.reason.find("includes 1"), std::string::npos) << t.reason;
}

TEST(DiffVerdict, OneIterationOrACaseThatDidNotRunIsUnknown) {
  CaseSummary a = ran_case("flash:fa2", problem(), 100), b = ran_case("flash:fa2", problem(), 200);
  b.iteration_us = {200};
  TimeChange t = compare_times(a, b);
  EXPECT_EQ(t.verdict, Verdict::unknown);
  ASSERT_TRUE(t.ratio);  // the ratio is still shown, with no interval to judge it by
  EXPECT_FALSE(t.interval);
  EXPECT_NE(t.reason.find("B has 1 timed iteration"), std::string::npos) << t.reason;

  b = ran_case("flash:fa2", problem(), 200);
  b.status = CaseStatus::failed;
  t = compare_times(a, b);
  EXPECT_EQ(t.verdict, Verdict::unknown);
  EXPECT_FALSE(t.ratio);
  EXPECT_NE(t.reason.find("B did not run (failed)"), std::string::npos) << t.reason;
}

TEST(DiffVerdict, TheNoiseFloorParsesPercentsAndRefusesTheRest) {
  EXPECT_EQ(parse_noise_percent("10"), 10);
  EXPECT_EQ(parse_noise_percent("12.5%"), 12.5);
  EXPECT_EQ(parse_noise_percent("0"), 0);
  for (const char* bad : {"", "%", "abc", "-1", "nan", "inf", "1001", "10%%", "10 x", "1e400"}) {
    try {
      parse_noise_percent(bad);
      ADD_FAILURE() << "accepted --noise '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("--noise '{}'", bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("percent from 0 to 1000"), std::string::npos) << e.what();
    }
  }
}

// ---- pairing ----

TEST(DiffMatching, CasesPairByProblemFieldsNotByLabel) {
  CaseSummary a = ran_case("flash:fa2", problem(), 100), b = ran_case("flash:fa2", problem(), 100);
  b.label = "[rank 0] " + b.label;  // a merged run's label
  const DiffReport r = diff_runs(input_of({a}), input_of({b}));
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].label_b, b.label);
  EXPECT_TRUE(r.only_a.empty() && r.only_b.empty());
}

TEST(DiffMatching, EveryProblemFieldIsPartOfTheKey) {
  const CaseSummary base = ran_case("flash:fa2", problem(), 100);
  std::vector<std::pair<const char*, void (*)(AttentionProblem&)>> edits = {
      {"seq", [](AttentionProblem& p) { p.shape.seq_kv = 2048; }},
      {"heads_kv", [](AttentionProblem& p) { p.shape.heads_kv = 4; }},
      {"dtype", [](AttentionProblem& p) { p.dtype = DType::fp16; }},
      {"causal", [](AttentionProblem& p) { p.causal = false; }},
      {"alignment", [](AttentionProblem& p) { p.alignment = MaskAlignment::bottom_right; }},
      {"window", [](AttentionProblem& p) { p.window = {128, 0}; }},
      {"bias", [](AttentionProblem& p) { p.has_bias = true; }},
      {"scale", [](AttentionProblem& p) { p.scale = 0.5f; }},
      {"pass", [](AttentionProblem& p) { p.pass = AttentionPass::backward; }},
      {"ragged", [](AttentionProblem& p) { p.shape.seq_lens_kv = {1024, 17}; }},
      {"paged", [](AttentionProblem& p) { p.shape.page_size = 16; }},
  };
  for (const auto& [what, edit] : edits) {
    CaseSummary other = base;
    edit(other.problem);
    EXPECT_FALSE(same_match_key(base, other, {})) << what;
  }
  CaseSummary other_backend = base;
  other_backend.backend = "cudnn";
  EXPECT_FALSE(same_match_key(base, other_backend, {}));
  CaseSummary other_device = base;
  other_device.device = 1;
  EXPECT_FALSE(same_match_key(base, other_device, {}));
}

TEST(DiffMatching, UnpairedCasesAreListedOnBothSides) {
  const DiffReport r = diff_runs(input_of({ran_case("flash:fa2", problem(1024), 100), ran_case("cudnn", problem(1024), 90)}),
                                 input_of({ran_case("flash:fa2", problem(1024), 100), ran_case("flash:fa2", problem(4096), 900)}));
  ASSERT_EQ(r.cases.size(), 1u);
  ASSERT_EQ(r.only_a.size(), 1u);
  ASSERT_EQ(r.only_b.size(), 1u);
  EXPECT_EQ(r.only_a[0].label, case_label("cudnn", problem(1024)));
  EXPECT_EQ(r.only_b[0].label, case_label("flash:fa2", problem(4096)));
  EXPECT_EQ(r.only_a[0].status, "ok");
}

TEST(DiffMatching, TheBackendRulePairsOneBackendWithAnother) {
  const DiffInput a = input_of({ran_case("flash:fa2", problem(1024), 100), ran_case("flash:fa2", problem(2048), 350)});
  const DiffInput b = input_of({ran_case("flash:hopper", problem(2048), 200), ran_case("flash:hopper", problem(1024), 60)});
  EXPECT_TRUE(diff_runs(a, b).cases.empty());
  const DiffReport r = diff_runs(a, b, with_rules({"backend"}));
  ASSERT_EQ(r.cases.size(), 2u);
  EXPECT_EQ(r.cases[0].label_a, case_label("flash:fa2", problem(1024)));
  EXPECT_EQ(r.cases[0].label_b, case_label("flash:hopper", problem(1024)));
  EXPECT_EQ(r.cases[0].time.verdict, Verdict::faster);
  EXPECT_EQ(r.cases[1].time.verdict, Verdict::faster);
  EXPECT_EQ(r.cases[0].key, "* bf16 causal 2x16x1024x1024x128");
  EXPECT_EQ(pair_label(r.cases[0]), "flash:fa2 -> flash:hopper bf16 causal 2x16x1024x1024x128");
  CaseDiff unrelated;
  unrelated.label_a = "fa2 step";
  unrelated.label_b = "hopper step 2";
  EXPECT_EQ(pair_label(unrelated), "fa2 step -> hopper step 2");
}

TEST(DiffMatching, TheVariantRuleKeepsBackendFamiliesApart) {
  const DiffInput a = input_of({ran_case("flash:fa2", problem(), 100)});
  const DiffInput b = input_of({ran_case("cudnn", problem(), 90), ran_case("flash:hopper", problem(), 80)});
  const DiffReport r = diff_runs(a, b, with_rules({"variant"}));
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].label_b, case_label("flash:hopper", problem()));
  ASSERT_EQ(r.only_b.size(), 1u);
  EXPECT_EQ(r.only_b[0].label, case_label("cudnn", problem()));
}

TEST(DiffMatching, TheDeviceAndDtypeRulesRelaxTheirField) {
  CaseSummary on_gpu1 = ran_case("flash:fa2", problem(), 100);
  on_gpu1.device = 1;
  const DiffInput a = input_of({ran_case("flash:fa2", problem(), 100)});
  EXPECT_TRUE(diff_runs(a, input_of({on_gpu1})).cases.empty());
  EXPECT_EQ(diff_runs(a, input_of({on_gpu1}), with_rules({"device"})).cases.size(), 1u);

  const DiffInput fp16 = input_of({ran_case("flash:fa2", problem(1024, DType::fp16), 100)});
  EXPECT_TRUE(diff_runs(a, fp16).cases.empty());
  const DiffReport r = diff_runs(a, fp16, with_rules({"dtype", "device"}));
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].key, "flash:fa2 * causal 2x16x1024x1024x128");
}

TEST(DiffMatching, CasesSharingAKeyPairByLabelFirstAndSaySo) {
  // --match backend leaves both backends of one problem with one key: each pairs with its own.
  const DiffInput a = input_of({ran_case("flash:fa2", problem(), 100), ran_case("flash:hopper", problem(), 80)});
  const DiffInput b = input_of({ran_case("flash:hopper", problem(), 81), ran_case("flash:fa2", problem(), 101)});
  const DiffReport r = diff_runs(a, b, with_rules({"backend"}));
  ASSERT_EQ(r.cases.size(), 2u);
  for (const CaseDiff& c : r.cases) EXPECT_EQ(c.label_a, c.label_b);
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_NE(r.notes[0].find("2 cases of A share the key"), std::string::npos) << r.notes[0];
}

TEST(DiffMatching, ProgramCasesPairByRangeName) {
  const DiffInput a = input_of({program_case("sdpa flash", 30), program_case("manual causal", 60)});
  const DiffInput b = input_of({program_case("manual causal", 62), program_case("sdpa cudnn", 25)});
  const DiffReport r = diff_runs(a, b);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].label_a, "manual causal");
  EXPECT_EQ(r.cases[0].key, "range \"manual causal\"");
  EXPECT_FALSE(r.cases[0].time.throughput_ratio);  // no FLOP count for an unknown problem
  ASSERT_EQ(r.only_a.size(), 1u);
  ASSERT_EQ(r.only_b.size(), 1u);
  // A range never pairs with a run's case, even one labelled alike.
  CaseSummary tagged = ran_case("flash:fa2", problem(), 30);
  tagged.label = "sdpa flash";
  EXPECT_FALSE(same_match_key(program_case("sdpa flash", 30), tagged, {}));
}

TEST(DiffMatching, TheOrderAndLabelRulesPairByPositionAndByLabel) {
  const DiffInput a = input_of({program_case("fa2 step", 30), program_case("fa2 warmup", 60)});
  const DiffInput b = input_of({program_case("hopper step", 20)});
  const DiffReport by_order = diff_runs(a, b, with_rules({"order"}));
  ASSERT_EQ(by_order.cases.size(), 1u);
  EXPECT_EQ(by_order.cases[0].label_b, "hopper step");
  ASSERT_EQ(by_order.only_a.size(), 1u);
  EXPECT_EQ(by_order.only_a[0].label, "fa2 warmup");

  CaseSummary relabelled = ran_case("flash:fa2", problem(2048), 100);
  relabelled.label = case_label("flash:fa2", problem(1024));  // the label lies about the problem
  const DiffReport by_label = diff_runs(input_of({ran_case("flash:fa2", problem(1024), 100)}), input_of({relabelled}),
                                        with_rules({"label"}));
  EXPECT_EQ(by_label.cases.size(), 1u);
}

TEST(DiffMatching, UnknownOrClashingRulesAreUsageErrors) {
  try {
    parse_match_rules({"backend", "shape"});
    ADD_FAILURE() << "accepted --match shape";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown --match rule 'shape'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("backend, variant, device, dtype, label or order"), std::string::npos);
  }
  EXPECT_THROW(parse_match_rules({"label", "device"}), UsageError);
  EXPECT_THROW(parse_match_rules({"order", "backend"}), UsageError);
  EXPECT_THROW(parse_match_rules({""}), UsageError);
  EXPECT_EQ(parse_match_rules({"device", "backend", "device"}).rules.size(), 2u);
}

// ---- what changed ----

TEST(DiffChanges, IdenticalCasesChangeNothing) {
  const CaseSummary c = ran_case("flash:fa2", problem(), 100);
  const CaseDiff d = diff_cases(c, c);
  EXPECT_FALSE(d.has_changes());
  EXPECT_EQ(d.time.verdict, Verdict::within_noise);
  EXPECT_EQ(*d.time.ratio, 1.0);
}

TEST(DiffChanges, KernelsAddedRemovedAndChangedByNormalisedName) {
  CaseSummary a = ran_case("math", problem(), 200), b = a;
  a.kernels.push_back(kernel("void attnprof::kernels::(anonymous namespace)::tril_kernel(bool const*, bool*, int)", 1, 3));
  // B: the flash kernel with other template arguments and twice per iteration, a conversion added.
  b.kernels = {kernel("void attnprof::kernels::flash::flash_fwd_kernel<Traits<128, 64>, false>(Params)", 2, 180),
               kernel("void attnprof::kernels::(anonymous namespace)::convert_kernel<float, __nv_bfloat16>(float const*)", 3, 9)};
  const CaseDiff d = diff_cases(a, b);
  const ActivityChange* flash = kernel_change(d, "attnprof::kernels::flash::flash_fwd_kernel");
  ASSERT_NE(flash, nullptr);
  EXPECT_EQ(flash->kind, ChangeKind::changed);
  EXPECT_EQ(flash->per_iter_a, 1);
  EXPECT_EQ(flash->per_iter_b, 2);
  EXPECT_TRUE(flash->instances_differ);
  ASSERT_EQ(flash->full_names_b.size(), 1u);
  const ActivityChange* convert = kernel_change(d, "attnprof::kernels::convert_kernel");
  ASSERT_NE(convert, nullptr);
  EXPECT_EQ(convert->kind, ChangeKind::added);
  EXPECT_EQ(convert->per_iter_b, 3);
  const ActivityChange* tril = kernel_change(d, "attnprof::kernels::tril_kernel");
  ASSERT_NE(tril, nullptr);
  EXPECT_EQ(tril->kind, ChangeKind::removed);
  EXPECT_EQ(d.kernels.front().name, "attnprof::kernels::flash::flash_fwd_kernel");  // the largest first
}

TEST(DiffChanges, AKernelsTimeCountsOnlyPastTheFloorAndAboveAPercentOfTheCase) {
  CaseSummary a = ran_case("math", problem(), 1000), b = a;
  a.kernels.push_back(kernel("tiny_kernel", 1, 1.0));
  b.kernels.push_back(kernel("tiny_kernel", 1, 1.5));  // +50%, but 0.05% of the case
  b.kernels[0].gpu_us_per_iter = a.kernels[0].gpu_us_per_iter * 1.05;  // +5%: inside the floor
  EXPECT_TRUE(diff_cases(a, b).kernels.empty());
  b.kernels[0].gpu_us_per_iter = a.kernels[0].gpu_us_per_iter * 1.2;
  const CaseDiff d = diff_cases(a, b);
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernels[0].kind, ChangeKind::changed);
  EXPECT_FALSE(d.kernels[0].instances_differ);
}

TEST(DiffChanges, MemcpyAndMemsetChanges) {
  CaseSummary a = ran_case("manual:in_place", problem(), 100), b = a;
  b.memory_ops = {{"memcpy DtoD", 1, 262144, 1.1, "cudaMemcpyAsync"}};
  b.memcpy_per_iter = 1;
  b.memcpy_bytes_per_iter = 262144;
  a.memory_ops = {{"memset", 2, 1024, 0.5, "cudaMemsetAsync"}};
  a.memset_per_iter = 2;
  const CaseDiff d = diff_cases(a, b);
  ASSERT_EQ(d.memory_ops.size(), 2u);
  EXPECT_EQ(d.memory_ops[0].name, "memcpy DtoD");
  EXPECT_EQ(d.memory_ops[0].kind, ChangeKind::added);
  EXPECT_EQ(d.memory_ops[0].bytes_b, 262144);
  EXPECT_EQ(d.memory_ops[1].kind, ChangeKind::removed);
  ASSERT_NE(field_change(d.counts, "memcpy/it"), nullptr);
  EXPECT_EQ(field_change(d.counts, "memcpy/it")->b, "1");
  EXPECT_EQ(field_change(d.counts, "memcpy bytes/it")->b, "256.0 KiB");
  EXPECT_EQ(field_change(d.counts, "memset/it")->a, "2");
}

TEST(DiffChanges, TheDominantKernelsResources) {
  CaseSummary a = ran_case("cudnn", problem(), 100), b = a;
  KernelSummary& k = b.kernels[0];
  k.registers_per_thread = 168;
  k.shared_bytes = 229376;
  k.block = {384, 1, 1};
  k.grid = {132, 1, 1};
  k.theoretical_occupancy_percent = 18.75;
  k.occupancy_limiter = "shared memory";
  k.launch_api = "cuLaunchKernelEx";
  b.launch_apis = {"cuLaunchKernelEx"};
  const CaseDiff d = diff_cases(a, b);
  EXPECT_EQ(field_change(d.dominant_kernel, "kernel"), nullptr);  // the same kernel, by name
  ASSERT_NE(field_change(d.dominant_kernel, "registers per thread"), nullptr);
  EXPECT_EQ(field_change(d.dominant_kernel, "registers per thread")->a, "128");
  EXPECT_EQ(field_change(d.dominant_kernel, "registers per thread")->b, "168");
  EXPECT_EQ(field_change(d.dominant_kernel, "shared memory")->b, "224.0 KiB");
  EXPECT_EQ(field_change(d.dominant_kernel, "block")->b, "[384,1,1]");
  EXPECT_EQ(field_change(d.dominant_kernel, "grid")->b, "[132,1,1]");
  EXPECT_EQ(field_change(d.dominant_kernel, "theoretical occupancy")->a, "12.5%");
  EXPECT_EQ(field_change(d.dominant_kernel, "occupancy limiter")->b, "shared memory");
  EXPECT_EQ(field_change(d.dominant_kernel, "launch api")->b, "cuLaunchKernelEx");
  EXPECT_EQ(field_change(d.counts, "launch apis")->b, "cuLaunchKernelEx");
}

TEST(DiffChanges, FindingsAppearAndDisappearByKind) {
  CaseSummary a = ran_case("manual:out_of_place", problem(), 100), b = a;
  a.findings = {{"memcpy_in_iteration", "1 DtoD copy per iteration", {}}, {"low_occupancy", "12.5%", {}}};
  b.findings = {{"low_occupancy", "25% now: another message", {}},
                {"driver_launch", "launched through cuLaunchKernelEx", {}},
                {"driver_launch", "a second one of the kind", {}}};
  const CaseDiff d = diff_cases(a, b);
  ASSERT_EQ(d.findings.size(), 2u);
  EXPECT_EQ(d.findings[0].kind, "driver_launch");
  EXPECT_EQ(d.findings[0].change, ChangeKind::added);
  EXPECT_EQ(d.findings[0].message, "launched through cuLaunchKernelEx");
  EXPECT_EQ(d.findings[1].kind, "memcpy_in_iteration");
  EXPECT_EQ(d.findings[1].change, ChangeKind::removed);
}

TEST(DiffChanges, AStatusChangeIsAChangeAndNothingElseIsCompared) {
  CaseSummary a = ran_case("flash:fa2", problem(), 100), b = a;
  b.status = CaseStatus::failed;
  b.kernels.clear();
  CaseDiff d = diff_cases(a, b);
  EXPECT_TRUE(d.has_changes());
  EXPECT_EQ(d.status_b, "failed");
  EXPECT_TRUE(d.kernels.empty());
  b = a;
  b.verify_passed = false;
  d = diff_cases(a, b);
  EXPECT_EQ(d.status_b, "WRONG");
}

TEST(DiffRuns, NotesSayWhatTheReaderShouldWeigh) {
  DiffInput a = input_of({ran_case("flash:fa2", problem(), 100)}), b = a;
  b.summary.device.name = "NVIDIA H100 80GB HBM3";
  b.summary.capture.dropped_records = 12;
  a.notes = {"the program opened no NVTX range"};
  a.summary.driver_version = "580.1";
  b.summary.driver_version = "590.2";
  const DiffReport r = diff_runs(a, b);
  auto has = [&](const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has("A: the program opened no NVTX range"));
  EXPECT_TRUE(has("A ran on NVIDIA H200, B on NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(has("B lost records (12 dropped"));
  EXPECT_TRUE(has("driver 580.1 in A, 590.2 in B"));
  EXPECT_FALSE(r.b.capture_complete);
}

// ---- inputs ----

TEST(DiffInputs, SummariesFoldersAndTracesAreRead) {
  const DiffInput summary = load_diff_input(kSource / "traces/samples/sample_summary.json");
  EXPECT_EQ(summary.origin, "summary.json");
  EXPECT_EQ(summary.summary.cases.size(), 5u);
  const DiffInput trace = load_diff_input(kSource / "traces/samples/sample_trace.json.gz");
  EXPECT_EQ(trace.origin, "attnprof run");
  EXPECT_EQ(trace.summary.cases.size(), 5u);
  const DiffInput kineto = load_diff_input(kGolden / "kineto_small_trace.json");
  EXPECT_NE(kineto.origin.find("Kineto"), std::string::npos);

  TempFolder folder("run");
  fs::copy_file(kSource / "traces/samples/sample_trace.json.gz", folder.path() / "trace.json.gz");
  EXPECT_EQ(load_diff_input(folder.path()).origin, "attnprof run");
  fs::copy_file(kSource / "traces/samples/sample_summary.json", folder.path() / "summary.json");
  const DiffInput run = load_diff_input(folder.path());  // the summary first: it has the run's own timings
  EXPECT_EQ(run.origin, "summary.json");
  EXPECT_EQ(run.path, folder.path().string());
  EXPECT_EQ(run.source, (folder.path() / "summary.json").string());
}

TEST(DiffInputs, EveryBadInputIsAUsageErrorNamingTheFile) {
  TempFolder folder("bad");
  const fs::path missing = folder.path() / "missing.json";
  EXPECT_NE(usage_error_for(missing).find(missing.string() + ": no such file or folder"), std::string::npos);

  const fs::path empty_folder = folder.path() / "empty";
  fs::create_directories(empty_folder);
  EXPECT_NE(usage_error_for(empty_folder).find("a folder without summary.json"), std::string::npos)
      << usage_error_for(empty_folder);

  const fs::path two = folder.path() / "two";
  fs::create_directories(two);
  fs::copy_file(kGolden / "kineto_small_trace.json", two / "trace-pid1.json");
  fs::copy_file(kGolden / "kineto_small_trace.json", two / "trace-pid2.json");
  EXPECT_NE(usage_error_for(two).find("holds 2 per-process traces"), std::string::npos) << usage_error_for(two);

  struct Case {
    const char* name;
    std::string bytes;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"other.json", R"({"name": "not ours"})", "neither an attnprof summary nor a trace"},
      {"array_of_numbers.json", "[1, 2]", ""},
      {"empty.json", "", ""},
      {"broken.json", R"({"traceEvents": [)", "truncated"},
      {"text.json", "hello", ""},
      {"bad_gzip.json.gz", std::string("\x1f\x8b\x08\x00garbage", 12), ""},
      {"bad_summary.json", R"({"schema": "attnprof-summary", "cases": [{"label": "x"}]})",
       "an attnprof summary that cannot be read"},
  };
  for (const Case& c : cases) {
    const fs::path path = folder.write(c.name, c.bytes);
    const std::string message = usage_error_for(path);
    EXPECT_NE(message.find(path.string()), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << c.name << ": " << message;
  }
}

// ---- formats ----

DiffReport report_with_everything() {
  CaseSummary a = ran_case("flash:fa2", problem(), 100), b = ran_case("flash:fa2", problem(), 140);
  b.kernels[0].name = "void attnprof::kernels::flash::flash_fwd_kernel<Traits<128, 64>, false>(Params)";
  b.kernels[0].registers_per_thread = 232;
  b.kernels.push_back(kernel("void attnprof::kernels::(anonymous namespace)::convert_kernel<float, __nv_bfloat16>(float "
                             "const*, __nv_bfloat16*, long, long, long)",
                             2, 12));
  b.kernels_per_iter = 3;
  b.memory_ops = {{"memcpy DtoD", 1, 262144, 1.1, "cudaMemcpyAsync"}};
  b.memcpy_per_iter = 1;
  b.findings = {{"memcpy_in_iteration", "1 DtoD copy of 256.0 KiB per iteration inside the timed loop, which a fused "
                                        "kernel would not need: <see the trace> | with a pipe",
                 {}}};
  CaseSummary long_label = ran_case("manual:out_of_place", problem(8192), 2000);
  long_label.problem.window = {4096, 0};
  long_label.label = case_label(long_label.backend, long_label.problem) + " with a much longer label than usual to test";
  const DiffInput x = input_of({a, long_label, ran_case("cudnn", problem(), 90)}, "runs/a");
  const DiffInput y = input_of({b, long_label, ran_case("flash:hopper", problem(), 70)}, "runs/b");
  return diff_runs(x, y);
}

TEST(DiffRender, TheTableFitsIn120Columns) {
  const std::string table = render_diff(report_with_everything(), OutputFormat::table);
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), kTableWidth) << line;
  EXPECT_NE(table.find("slower"), std::string::npos);
  EXPECT_NE(table.find("1.400x"), std::string::npos);
  EXPECT_NE(table.find("kernel added"), std::string::npos);
  EXPECT_NE(table.find("memcpy DtoD added"), std::string::npos);
  EXPECT_NE(table.find("registers per thread"), std::string::npos);
  EXPECT_NE(table.find("only in A"), std::string::npos);
  EXPECT_NE(table.find("only in B"), std::string::npos);
  EXPECT_NE(table.find("10% (--noise)"), std::string::npos);
}

TEST(DiffRender, MarkdownEscapesWhatWouldBreakAPullRequestComment) {
  const std::string md = render_diff(report_with_everything(), OutputFormat::md);
  EXPECT_NE(md.find("### attnprof diff"), std::string::npos);
  EXPECT_NE(md.find("| case | A median |"), std::string::npos);
  EXPECT_NE(md.find("<details><summary>Changes in 1 of 2 cases</summary>"), std::string::npos);
  EXPECT_NE(md.find("&lt;see the trace&gt;"), std::string::npos);
  EXPECT_EQ(md.find("<see the trace>"), std::string::npos);
  EXPECT_NE(md.find("\\| with a pipe"), std::string::npos);
}

TEST(DiffRender, CsvHasARowPerPairAndPerUnpairedCase) {
  const std::string csv = render_diff(report_with_everything(), OutputFormat::csv);
  std::istringstream lines(csv);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 1u + 2u + 2u);
  EXPECT_EQ(rows[0].rfind("case_a,case_b,key,status_a,status_b,", 0), 0u);
  const auto columns = std::count(rows[0].begin(), rows[0].end(), ',');
  EXPECT_EQ(std::count(rows[3].begin(), rows[3].end(), ','), columns);
  EXPECT_NE(rows[1].find(",slower,"), std::string::npos) << rows[1];
  EXPECT_NE(rows[3].find("only in A"), std::string::npos);
  EXPECT_NE(rows[4].find("only in B"), std::string::npos);
}

TEST(DiffRender, JsonCarriesTheIntervalAndEveryChange) {
  const nlohmann::json j = nlohmann::json::parse(render_diff(report_with_everything(), OutputFormat::json));
  EXPECT_EQ(j["schema"], "attnprof-diff");
  EXPECT_EQ(j["options"]["noise_percent"], 10.0);
  EXPECT_EQ(j["options"]["resamples"], 2000);
  const nlohmann::json& c = j["cases"][0];
  EXPECT_EQ(c["time"]["verdict"], "slower");
  ASSERT_EQ(c["time"]["interval"].size(), 2u);
  EXPECT_LT(c["time"]["interval"][0].get<double>(), c["time"]["ratio"].get<double>() + 1e-12);
  EXPECT_EQ(c["kernels"].size(), 2u);
  EXPECT_EQ(c["findings"][0]["change"], "appeared");
  EXPECT_EQ(j["verdicts"]["slower"], 1);
  EXPECT_EQ(j["only_a"][0]["label"], case_label("cudnn", problem()));
  EXPECT_EQ(j["only_b"][0]["label"], case_label("flash:hopper", problem()));
}

TEST(DiffHtml, APageInTheReportsStyleWithNothingToLoad) {
  const std::string page = render_diff_html(report_with_everything());
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("Content-Security-Policy"), std::string::npos);
  EXPECT_NE(page.find("--accent"), std::string::npos);  // the report's style sheet
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = page.find(needle); at != std::string::npos; at = page.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<tr class=\"case-pair\""), 2u);
  EXPECT_EQ(count("data-verdict=\"slower\""), 1u);
  EXPECT_EQ(count("<section class=\"case-changes\">"), 1u);
  EXPECT_EQ(count("<li class=\"unmatched\""), 2u);
  EXPECT_NE(page.find("&lt;see the trace&gt;"), std::string::npos);
  // A kernel whose template arguments changed lists its full names, escaped.
  EXPECT_NE(page.find("flash_fwd_kernel&lt;Traits&lt;128, 64&gt;"), std::string::npos);
}

// ---- the sample run, end to end ----

TEST(DiffRuns, TheSampleAgainstItselfIsWithinNoiseAndChangesNothing) {
  const DiffInput a = load_diff_input(kSource / "traces/samples/sample_summary.json");
  const DiffReport r = diff_runs(a, a);
  ASSERT_EQ(r.cases.size(), 5u);
  for (const CaseDiff& c : r.cases) {
    EXPECT_EQ(c.time.verdict, Verdict::within_noise) << c.label_a;
    EXPECT_FALSE(c.has_changes()) << c.label_a;
  }
  EXPECT_TRUE(r.only_a.empty() && r.only_b.empty());
  EXPECT_TRUE(r.notes.empty());
}

TEST(DiffRuns, TheSampleSummaryAgainstItsOwnTracePairsEveryCase) {
  const DiffReport r = diff_runs(load_diff_input(kSource / "traces/samples/sample_summary.json"),
                                 load_diff_input(kSource / "traces/samples/sample_trace.json.gz"));
  EXPECT_EQ(r.cases.size(), 5u);
  EXPECT_TRUE(r.only_a.empty() && r.only_b.empty());
}

TEST(DiffRuns, ASlowerCopyOfTheSampleIsCalledSlower) {
  DiffInput a, b;
  a.summary = sample_summary();
  b.summary = sample_summary();
  CaseSummary& fa2 = b.summary.cases[3];
  ASSERT_EQ(fa2.backend, "flash:fa2");
  // Three iterations each side: the interval is wide, and only a large, clean change is called.
  for (double& us : fa2.iteration_us) us = 40 + (us - 15);
  fa2.median_us = median(fa2.iteration_us);
  const DiffReport r = diff_runs(a, b);
  EXPECT_EQ(r.cases[3].time.verdict, Verdict::slower) << r.cases[3].time.reason;
  EXPECT_EQ(r.count(Verdict::slower), 1);
  EXPECT_EQ(r.count(Verdict::within_noise), 4);
}

}  // namespace
}  // namespace attnprof
