// The run configuration: schema, parsing and validation. Validation runs before any GPU is
// touched, reports every problem at once, and names each by its JSON pointer.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/types.hpp"
#include "trace/trace_format.hpp"

namespace attnprof {

struct ShapeSpec {
  AttentionShape shape;   // heads_kv included (GQA/MQA)
  AttentionWindow window;  // a sliding window around the diagonal; unbounded by default
  bool bias = false;      // add an additive fp32 [seq_q, seq_kv] bias (backends that support it)
  // This shape's own causal settings ("causal" in the shape: one or a list), in place of the
  // config's: decode needs bottom_right where prefill shapes beside it sweep both.
  std::vector<CausalMode> causal;
};

// A user's guess about what the trace will show, for one backend (variant or family) and
// optionally narrowed to a dtype, causal setting or shape. Unset fields are not checked.
struct Expectation {
  std::string backend;                    // "flash", "manual", "manual:in_place"
  std::optional<DType> dtype;
  std::optional<CausalMode> causal;      // false / true (top_left) / "top_left" / "bottom_right"
  // "forward" or "backward"; a guess written without one is about the forward (the kernels of a
  // backward are others).
  AttentionPass pass = AttentionPass::forward;
  std::optional<AttentionShape> shape;
  std::optional<double> kernels_per_iter;
  std::optional<double> memcpy_per_iter;
  std::optional<double> memset_per_iter;
  std::optional<double> max_registers;
  std::optional<double> min_theoretical_occupancy;  // percent
  std::optional<double> max_theoretical_occupancy;  // percent
  std::optional<std::string> launch_api;            // e.g. "cuLaunchKernelEx"
  std::optional<std::string> note;                  // the user's words on the guess, shown with a surprise
  std::optional<std::string> pointer;               // "/expect/2", for messages
};

struct Config {
  std::string source;  // the file name, or "<embedded default>"
  std::string name;    // optional "name" field, shown in the summary
  std::vector<std::string> backends;
  std::vector<DType> dtypes;
  std::vector<CausalMode> causal;
  std::vector<AttentionPass> passes = {AttentionPass::forward};  // "forward", "backward", or both
  std::vector<ShapeSpec> shapes;
  int warmup = 3;
  int iterations = 20;
  bool verify = true;
  std::uint64_t seed = 20261202;
  std::vector<std::string> metrics;  // "occupancy", "dram", "tensor"
  std::vector<Expectation> expect;
  trace::TraceFormat trace_format = trace::TraceFormat::json;  // "json" or "json.gz" (trace.json.gz)
  nlohmann::json document;  // the document as given, copied into trace.json for provenance
};

struct ConfigIssue {
  std::string pointer;  // JSON pointer, "" for the whole document
  std::string message;  // what was expected and what was found
  // Malformed JSON has no pointer yet, only a place in the text: 1-based, 0 when not known.
  int line = 0;
  int column = 0;
};

class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string source, std::vector<ConfigIssue> issues);
  const std::string& source() const { return source_; }
  const std::vector<ConfigIssue>& issues() const { return issues_; }

 private:
  std::string source_;
  std::vector<ConfigIssue> issues_;
};

// The compiled-in configs/default.json.
std::string_view embedded_default_config();

// Parses and validates `text`. `source` names it in messages; `known_backends` are the names a
// "backends" entry may use (variants and families). Throws ConfigError listing every issue.
Config parse_config(std::string_view text, std::string_view source,
                    const std::vector<std::string>& known_backends);

// The one-line form of a single shape for quick runs without a file, e.g.
// "b=8,h=32,hkv=8,sq=1,skv=32768,d=128,causal=bottom_right,window=4096:0,dtype=bf16", as the
// config document it stands for (shapes, and causal / dtypes when given). Keys: b, h, hkv, sq,
// skv (default sq), d, causal (false, true, top_left, bottom_right), window (L:R, -1 unbounded),
// dtype, bias (0/1). Throws ConfigError (source "--shape") naming the part it cannot read.
nlohmann::json shape_option_document(std::string_view text);

// Reads and parses a file; an unreadable file is a ConfigError too.
Config load_config_file(const std::string& path, const std::vector<std::string>& known_backends);

// Levenshtein-closest candidate within a small distance, for "did you mean" hints.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace attnprof
