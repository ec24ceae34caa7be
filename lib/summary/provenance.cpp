#include "summary/provenance.hpp"

#include <fmt/format.h>

namespace attnprof {
namespace {

template <typename T>
void put_if(nlohmann::json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

void put_if(nlohmann::json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}

void put_if(nlohmann::json& j, const char* key, const nlohmann::json& value) {
  if (!value.is_null()) j[key] = value;
}

// Metadata is read leniently: a field of the wrong type reads as absent (a summary does not).
template <typename T>
void get_if(const nlohmann::json& j, const char* key, std::optional<T>& into) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    into = it->get<T>();
  } catch (const nlohmann::json::exception&) {
  }
}

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  std::optional<T> value;
  get_if(j, key, value);
  return value ? *value : fallback;
}

nlohmann::json get_json(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? nlohmann::json() : *it;
}

}  // namespace

Provenance Provenance::of(const std::string& command, const RunSummary& summary) {
  Provenance p;
  p.version = summary.tool_version;
  p.command = command;
  p.capture = summary.capture;
  p.summary = summary;
  p.versions = {summary.driver_version, summary.cuda_runtime_version, summary.cupti_version, summary.cudnn_version};
  return p;
}

void to_json(nlohmann::json& j, const Provenance& p) {
  j = {{"tool", "attnprof"}, {"version", p.version}, {"command", p.command}, {"capture", p.capture}};
  nlohmann::json versions = nlohmann::json::object();
  put_if(versions, "driver", p.versions.driver);
  put_if(versions, "cuda_runtime", p.versions.cuda_runtime);
  put_if(versions, "cupti", p.versions.cupti);
  put_if(versions, "cudnn", p.versions.cudnn);
  j["versions"] = std::move(versions);
  if (p.summary) j["summary"] = *p.summary;
  if (!p.notes.empty()) j["notes"] = p.notes;
  put_if(j, "config_source", p.config_source);
  put_if(j, "config", p.config);
  put_if(j, "metrics", p.metrics);
  if (p.worker) j["worker"] = {{"device", p.worker->device}, {"cases", p.worker->cases}};
  if (!p.devices.empty()) j["devices"] = p.devices;
  put_if(j, "workers", p.workers);
  put_if(j, "program", p.program);
  put_if(j, "pid", p.pid);
  put_if(j, "rank", p.rank);
  put_if(j, "local_rank", p.local_rank);
  put_if(j, "world_size", p.world_size);
  put_if(j, "inputs", p.inputs);
  put_if(j, "clock", p.clock);
}

void from_json(const nlohmann::json& j, Provenance& p) {
  p = {};
  if (!j.is_object()) return;
  p.version = get_or<std::string>(j, "version", "");
  p.command = get_or<std::string>(j, "command", "");
  if (const nlohmann::json capture = get_json(j, "capture"); capture.is_object()) p.capture = capture.get<trace::CaptureHealth>();
  if (const nlohmann::json summary = get_json(j, "summary"); !summary.is_null()) p.summary = summary.get<RunSummary>();
  p.notes = get_or<std::vector<std::string>>(j, "notes", {});
  if (const nlohmann::json v = get_json(j, "versions"); v.is_object())
    p.versions = {get_or<std::string>(v, "driver", ""), get_or<std::string>(v, "cuda_runtime", ""),
                  get_or<std::string>(v, "cupti", ""), get_or<std::string>(v, "cudnn", "")};
  p.config_source = get_or<std::string>(j, "config_source", "");
  p.config = get_json(j, "config");
  p.metrics = get_json(j, "metrics");
  if (const nlohmann::json w = get_json(j, "worker"); w.is_object())
    p.worker = Provenance::WorkerShare{get_or<int>(w, "device", 0), get_or<std::vector<int>>(w, "cases", {})};
  p.devices = get_or<std::vector<int>>(j, "devices", {});
  p.workers = get_json(j, "workers");
  get_if(j, "program", p.program);
  get_if(j, "pid", p.pid);
  get_if(j, "rank", p.rank);
  get_if(j, "local_rank", p.local_rank);
  get_if(j, "world_size", p.world_size);
  p.inputs = get_json(j, "inputs");
  p.clock = get_or<std::string>(j, "clock", "");
}

Provenance read_provenance(const nlohmann::json& attnprof, std::vector<std::string>& notes) {
  try {
    return attnprof.get<Provenance>();
  } catch (const std::exception& e) {
    notes.push_back(fmt::format("the summary stored in the trace could not be read ({})", e.what()));
  }
  try {
    nlohmann::json without_summary = attnprof;
    without_summary.erase("summary");
    return without_summary.get<Provenance>();
  } catch (const std::exception& e) {
    notes.push_back(fmt::format("the trace's attnprof object could not be read ({})", e.what()));
    return {};
  }
}

}  // namespace attnprof
