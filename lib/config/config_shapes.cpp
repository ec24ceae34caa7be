#include <algorithm>
#include <climits>
#include <cstdint>

#include <fmt/format.h>

#include "config/config_sections.hpp"

namespace attnprof::config_sections {

using namespace config_fields;

namespace {

// Far above any real attention problem, low enough that every size fits an int and the
// element count of q, k, v and o stays checkable in 64 bits.
constexpr std::uint64_t kMaxHeadDim = 1024;
constexpr std::uint64_t kMaxSequence = std::uint64_t{1} << 24;
constexpr std::uint64_t kMaxBatchTimesHeads = INT_MAX;  // kernels index batch*heads in an int

const std::vector<std::string> kShapeKeys = {"batch",    "heads",      "seq_q",       "seq_kv",   "head_dim",
                                             "heads_kv", "seq_lens_q", "seq_lens_kv", "page_size"};
const std::vector<std::string> kSweepShapeKeys = {"batch",    "heads",    "seq_q",  "seq_kv",     "head_dim",
                                                  "heads_kv", "window",   "bias",   "seq_lens_q", "seq_lens_kv",
                                                  "page_size", "causal"};
constexpr std::uint64_t kMaxPageSize = std::uint64_t{1} << 20;
const std::vector<std::string> kCausalWords = {"top_left", "bottom_right"};

std::optional<std::uint64_t> read_size(const json& object, const std::string& pointer, std::string_view key,
                                       std::uint64_t maximum, IssueList& issues) {
  const std::string member_pointer = child_pointer(pointer, key);
  const json* value = find_member(object, key);
  if (!value) {
    report_missing(issues, member_pointer, "a positive integer");
    return std::nullopt;
  }
  return read_integer(*value, member_pointer, IntegerRule{1, maximum}, issues);
}

// Whether v is an integer in [low, high]. Read as unsigned where JSON holds it so: an unsigned
// value above INT64_MAX would otherwise wrap to a negative one (2^64 - 1 to -1).
bool integer_between(const json& v, std::int64_t low, std::int64_t high) {
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    return u <= static_cast<std::uint64_t>(high) && (low <= 0 || u >= static_cast<std::uint64_t>(low));
  }
  return v.is_number_integer() && v.get<std::int64_t>() >= low && v.get<std::int64_t>() <= high;
}

// a * b, or nothing when the product does not fit an int64.
std::optional<std::uint64_t> checked_product(std::uint64_t a, std::uint64_t b) {
  constexpr std::uint64_t kLimit = INT64_MAX;
  if (b != 0 && a > kLimit / b) return std::nullopt;
  return a * b;
}

bool element_count_fits(const AttentionShape& shape, const std::string& pointer, IssueList& issues) {
  const std::uint64_t batch = shape.batch, heads = shape.heads, head_dim = shape.head_dim;
  const std::uint64_t seq = std::max(shape.seq_q, shape.seq_kv);
  const std::uint64_t batch_times_heads = batch * heads;  // both below 2^31: no overflow
  if (batch_times_heads > kMaxBatchTimesHeads) {
    issues.add(pointer, fmt::format("expected batch * heads to be at most {}, found {} * {} = {}",
                                    kMaxBatchTimesHeads, batch, heads, batch_times_heads));
    return false;
  }
  const std::optional<std::uint64_t> rows = checked_product(batch_times_heads, seq);
  const std::optional<std::uint64_t> elements = rows ? checked_product(*rows, head_dim) : std::nullopt;
  if (!elements) {
    const double approximate = static_cast<double>(batch_times_heads) * seq * head_dim;
    issues.add(pointer, fmt::format("expected batch * heads * max(seq_q, seq_kv) * head_dim to fit in a "
                                    "64-bit integer, found {} * {} * {} * {} (about {:.3g})",
                                    batch, heads, seq, head_dim, approximate));
    return false;
  }
  return true;
}

// The five sizes of `object`, which the caller has checked is an object.
std::optional<AttentionShape> read_sizes(const json& object, const std::string& pointer, IssueList& issues) {
  const std::size_t issues_before = issues.size();
  const auto batch = read_size(object, pointer, "batch", kMaxBatchTimesHeads, issues);
  const auto heads = read_size(object, pointer, "heads", kMaxBatchTimesHeads, issues);
  const auto seq_q = read_size(object, pointer, "seq_q", kMaxSequence, issues);
  const auto seq_kv =
      find_member(object, "seq_kv") ? read_size(object, pointer, "seq_kv", kMaxSequence, issues) : seq_q;
  const auto head_dim = read_size(object, pointer, "head_dim", kMaxHeadDim, issues);
  if (issues.size() != issues_before) return std::nullopt;

  AttentionShape shape;
  shape.batch = static_cast<int>(*batch);
  shape.heads = static_cast<int>(*heads);
  shape.seq_q = static_cast<int>(*seq_q);
  shape.seq_kv = static_cast<int>(*seq_kv);
  shape.head_dim = static_cast<int>(*head_dim);
  if (!element_count_fits(shape, pointer, issues)) return std::nullopt;
  return shape;
}

// "heads_kv": K/V heads that groups of query heads share; `heads` must be a multiple of it.
void read_heads_kv(const json& object, const std::string& pointer, AttentionShape& shape, IssueList& issues) {
  const json* value = find_member(object, "heads_kv");
  if (!value) return;
  const std::string member = child_pointer(pointer, "heads_kv");
  const std::optional<std::uint64_t> heads_kv = read_integer(*value, member, IntegerRule{1, kMaxBatchTimesHeads}, issues);
  if (!heads_kv) return;
  if (*heads_kv > static_cast<std::uint64_t>(shape.heads) || shape.heads % static_cast<int>(*heads_kv) != 0) {
    issues.add(member, fmt::format("expected a divisor of heads ({}): each K/V head serves the same number of "
                                   "query heads; found {}",
                                   shape.heads, *heads_kv));
    return;
  }
  shape.heads_kv = static_cast<int>(*heads_kv);
}

// "window": [left, right] keys around the diagonal, -1 for an unbounded side.
std::optional<AttentionWindow> read_window(const json& value, const std::string& pointer, const AttentionShape& shape,
                                           IssueList& issues) {
  if (!value.is_array() || value.size() != 2) {
    issues.add(pointer, fmt::format("expected [left, right] (keys before and after the diagonal, -1 for no bound), "
                                    "found {}",
                                    describe_value(value)));
    return std::nullopt;
  }
  const std::int64_t limit = std::max(shape.seq_q, shape.seq_kv);
  std::optional<int> sides[2];
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string side = child_pointer(pointer, i);
    const json& v = value[i];
    if (!integer_between(v, -1, limit)) {
      issues.add(side, fmt::format("expected -1 (unbounded) or a number of keys from 0 to max(seq_q, seq_kv) = {}, "
                                   "found {}",
                                   limit, describe_value(v)));
      continue;
    }
    sides[i] = static_cast<int>(v.get<std::int64_t>());
  }
  if (!sides[0] || !sides[1]) return std::nullopt;
  return AttentionWindow{*sides[0], *sides[1]};
}

// "seq_lens_q" / "seq_lens_kv": a ragged batch, one length per sequence, each from 1 to the
// maximum (seq_q / seq_kv).
std::optional<std::vector<int>> read_lengths(const json& object, const std::string& pointer, std::string_view key,
                                             int batch, int maximum, std::string_view maximum_name, IssueList& issues) {
  const json* value = find_member(object, key);
  if (!value) return std::vector<int>{};
  const std::string member = child_pointer(pointer, key);
  if (!value->is_array() || value->size() != static_cast<std::size_t>(batch)) {
    issues.add(member, fmt::format("expected an array of batch = {} lengths, one per sequence, found {}", batch,
                                   value->is_array() ? fmt::format("{} entries", value->size()) : describe_value(*value)));
    return std::nullopt;
  }
  std::vector<int> lens;
  bool ok = true;
  for (std::size_t i = 0; i < value->size(); ++i) {
    const json& v = (*value)[i];
    if (!integer_between(v, 1, maximum)) {
      issues.add(child_pointer(member, i), fmt::format("expected a length from 1 to {} = {}, found {}", maximum_name,
                                                       maximum, describe_value(v)));
      ok = false;
      continue;
    }
    lens.push_back(static_cast<int>(v.get<std::int64_t>()));
  }
  if (!ok) return std::nullopt;
  // The packed layout's cumulative offsets are 32-bit, as varlen kernels take them.
  std::int64_t total = 0;
  for (int len : lens) total += len;
  if (total > INT_MAX) {
    issues.add(member, fmt::format("expected lengths that sum to at most {} tokens (the packed batch's offsets are "
                                   "32-bit), found a sum of {}",
                                   INT_MAX, total));
    return std::nullopt;
  }
  return lens;
}

void read_ragged_and_pages(const json& object, const std::string& pointer, AttentionShape& shape, IssueList& issues) {
  if (auto lens = read_lengths(object, pointer, "seq_lens_q", shape.batch, shape.seq_q, "seq_q", issues))
    shape.seq_lens_q = std::move(*lens);
  if (auto lens = read_lengths(object, pointer, "seq_lens_kv", shape.batch, shape.seq_kv, "seq_kv", issues))
    shape.seq_lens_kv = std::move(*lens);
  if (const json* value = find_member(object, "page_size")) {
    const std::string member = child_pointer(pointer, "page_size");
    if (!integer_between(*value, 1, static_cast<std::int64_t>(kMaxPageSize))) {
      issues.add(member, fmt::format("expected a page size in tokens from 1 to {}, found {}", kMaxPageSize,
                                     describe_value(*value)));
    } else {
      shape.page_size = static_cast<int>(value->get<std::int64_t>());
    }
  }
}

}  // namespace

std::optional<ShapeSpec> read_shape_spec(const json& value, const std::string& pointer, IssueList& issues) {
  if (!require_object(value, pointer, "a shape object", issues)) return std::nullopt;
  const std::size_t issues_before = issues.size();
  reject_unknown_keys(value, pointer, kSweepShapeKeys, issues);
  ShapeSpec spec;
  if (const std::optional<AttentionShape> shape = read_sizes(value, pointer, issues)) {
    spec.shape = *shape;
    read_heads_kv(value, pointer, spec.shape, issues);
    read_ragged_and_pages(value, pointer, spec.shape, issues);
    if (const json* window = find_member(value, "window"))
      if (auto bounds = read_window(*window, child_pointer(pointer, "window"), spec.shape, issues)) spec.window = *bounds;
  }
  if (const json* causal = find_member(value, "causal")) {
    const std::string member = child_pointer(pointer, "causal");
    if (!causal->is_array()) {
      if (const auto mode = read_causal_mode(*causal, member, issues)) spec.causal = {*mode};
    } else if (causal->empty()) {
      issues.add(member, "expected a causal setting or a non-empty array of them, found an empty array");
    } else {
      for (std::size_t i = 0; i < causal->size(); ++i)
        if (const auto mode = read_causal_mode((*causal)[i], child_pointer(member, i), issues)) {
          if (std::find(spec.causal.begin(), spec.causal.end(), *mode) != spec.causal.end())
            issues.add(child_pointer(member, i), fmt::format("duplicate causal setting {}", (*causal)[i].dump()));
          else
            spec.causal.push_back(*mode);
        }
    }
  }
  if (const json* bias = find_member(value, "bias")) {
    if (const std::optional<bool> has_bias = read_boolean(*bias, child_pointer(pointer, "bias"), issues)) {
      spec.bias = *has_bias;
    }
  }
  if (issues.size() != issues_before) return std::nullopt;
  return spec;
}

std::optional<AttentionShape> read_expected_shape(const json& value, const std::string& pointer,
                                                  IssueList& issues) {
  if (!require_object(value, pointer, "a shape object", issues)) return std::nullopt;
  const std::size_t issues_before = issues.size();
  reject_unknown_keys(value, pointer, kShapeKeys, issues);
  std::optional<AttentionShape> shape = read_sizes(value, pointer, issues);
  if (shape) {
    read_heads_kv(value, pointer, *shape, issues);
    read_ragged_and_pages(value, pointer, *shape, issues);
  }
  if (issues.size() != issues_before) return std::nullopt;
  return shape;
}

bool same_case(const ShapeSpec& a, const ShapeSpec& b, const std::vector<CausalMode>& config_causal) {
  if (!(a.shape == b.shape && a.window == b.window && a.bias == b.bias)) return false;
  const std::vector<CausalMode>& runs_a = a.causal.empty() ? config_causal : a.causal;
  const std::vector<CausalMode>& runs_b = b.causal.empty() ? config_causal : b.causal;
  return std::any_of(runs_a.begin(), runs_a.end(), [&](CausalMode mode) {
    return std::find(runs_b.begin(), runs_b.end(), mode) != runs_b.end();
  });
}

std::optional<CausalMode> read_causal_mode(const json& value, const std::string& pointer, IssueList& issues) {
  if (value.is_boolean()) return value.get<bool>() ? CausalMode::top_left : CausalMode::none;
  if (value.is_string()) {
    const std::optional<std::string> word = read_choice(value, pointer, kCausalWords, issues);
    if (!word) return std::nullopt;
    return *word == "bottom_right" ? CausalMode::bottom_right : CausalMode::top_left;
  }
  issues.add(pointer, fmt::format("expected false, true, \"top_left\" or \"bottom_right\", found {}",
                                  describe_value(value)));
  return std::nullopt;
}

}  // namespace attnprof::config_sections
