// The trace's `attnprof` object: which command of which attnprof wrote the trace, from what
// (config, program, input traces), with which libraries, how complete its capture is, and the
// run summary the trace stands for. Every writer builds one and every reader parses one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "summary/summary.hpp"
#include "trace/model.hpp"

namespace attnprof {

struct Provenance {
  std::string version;               // attnprof's
  std::string command;               // "run", "profile", "merge"
  trace::CaptureHealth capture;
  std::optional<RunSummary> summary;
  std::vector<std::string> notes;

  // run
  std::string config_source;
  nlohmann::json config;             // the config document as given (null when none)
  nlohmann::json metrics;            // --metrics: what the range profiler measured, or why not (null when not asked)
  struct WorkerShare {
    int device = 0;
    std::vector<int> cases;
  };
  std::optional<WorkerShare> worker;  // one GPU's worker of `run --devices`
  std::vector<int> devices;           // `run --devices`: the GPUs
  nlohmann::json workers;             // `run --devices`: how each worker ended (null when none)

  // profile
  std::optional<std::string> program;
  std::optional<std::uint32_t> pid;
  std::optional<int> rank, local_rank, world_size;

  // merge
  nlohmann::json inputs;              // each input trace (null when none)
  std::string clock;                  // how the inputs' clocks were aligned

  // The versions a summary names (driver, CUDA runtime, CUPTI, cuDNN) are the summary's; the
  // provenance repeats them for readers of the trace alone.
  struct Versions {
    std::string driver, cuda_runtime, cupti, cudnn;
  } versions;

  // A provenance of `command` for `summary`: its version, versions and capture are the summary's.
  static Provenance of(const std::string& command, const RunSummary& summary);
};

void to_json(nlohmann::json& j, const Provenance& p);
// Reads what is there; fields a writer did not write stay empty. Throws nlohmann::json::exception
// for a field of the wrong type, and what RunSummary's from_json throws for a bad summary.
void from_json(const nlohmann::json& j, Provenance& p);

// What a trace's `attnprof` object says (null for traces of other tools: an empty provenance).
// A stored summary that cannot be read is left out with a note, so the rest still counts.
Provenance read_provenance(const nlohmann::json& attnprof, std::vector<std::string>& notes);

}  // namespace attnprof
