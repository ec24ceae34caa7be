#include "metrics/range_profiler.hpp"

#include <cuda.h>  // CUcontext, CUresult: types only; the driver is reached through the runtime
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/cuda_check.hpp"

namespace attnprof {
namespace {

std::string result_text(CUptiResult status) {
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr) return "unknown CUPTI result";
  return text;
}

// What the user can do about a result, for the ones that mean "not here" rather than "a bug".
std::string advice(CUptiResult status) {
  switch (status) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "GPU performance counters are restricted to administrators: run as root (or with CAP_SYS_ADMIN), or "
             "load the NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0 (/proc/driver/nvidia/params shows "
             "RmProfilingAdminOnly)";
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
      return "this device or configuration does not support CUPTI's profiling API";
    case CUPTI_ERROR_INVALID_METRIC_NAME:
      return "a metric is not known on this chip";
    case CUPTI_ERROR_INVALID_CHIP_NAME:
      return "this CUPTI does not know the chip; a newer CUDA toolkit may";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
      return "another profiler (Nsight Compute or Systems, DCGM, a second CUPTI session) holds the counters, or "
             "the range profiler cannot run beside this process's own activity tracing";
    default:
      return "";
  }
}

[[noreturn]] void throw_unavailable(CUptiResult status, const char* call, const char* file, int line) {
  const std::string why = advice(status);
  throw MetricsUnavailableError(fmt::format("{} failed at {}:{}: {} (CUptiResult {}){}{}", call, file, line,
                                            result_text(status), static_cast<int>(status), why.empty() ? "" : ": ",
                                            why));
}

}  // namespace
}  // namespace attnprof

// Every profiler call goes through this: a failure names the call, file, line and CUPTI's result.
#define PROFILER_CHECK(call)                                                        \
  do {                                                                              \
    const CUptiResult attnprof_status_ = (call);                                    \
    if (attnprof_status_ != CUPTI_SUCCESS)                                          \
      ::attnprof::throw_unavailable(attnprof_status_, #call, __FILE__, __LINE__);   \
  } while (0)

namespace attnprof {
namespace {

// A CUPTI parameter struct, zeroed, with the size this header knows (CUPTI reads the fields up to it).
template <typename Params>
Params sized(std::size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}
#define CUPTI_PARAMS(Type) sized<Type>(Type##_STRUCT_SIZE)

// The profiler host object: metric names -> config image; counter data -> values.
class ProfilerHost {
 public:
  ProfilerHost(const std::string& chip, const std::uint8_t* counter_availability) {
    auto p = CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = counter_availability;
    PROFILER_CHECK(cuptiProfilerHostInitialize(&p));
    host_ = p.pHostObject;
  }
  ~ProfilerHost() {
    auto p = CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    p.pHostObject = host_;
    cuptiProfilerHostDeinitialize(&p);  // nothing useful to do about a failure while tearing down
  }
  ProfilerHost(const ProfilerHost&) = delete;
  ProfilerHost& operator=(const ProfilerHost&) = delete;

  // CUPTI_SUCCESS, or why the name is not a metric of this chip.
  CUptiResult describe(const std::string& name, std::string& description) const {
    auto p = CUPTI_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
    p.pHostObject = host_;
    p.pMetricName = name.c_str();
    const CUptiResult status = cuptiProfilerHostGetMetricProperties(&p);
    if (status == CUPTI_SUCCESS)
      description = fmt::format("{}: {} [{}]", name, p.pDescription ? p.pDescription : "",
                                p.pDimUnit ? p.pDimUnit : "");
    return status;
  }

  std::vector<std::uint8_t> config_image(const std::vector<const char*>& names) const {
    auto add = CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_;
    add.ppMetricNames = const_cast<const char**>(names.data());
    add.numMetrics = names.size();
    PROFILER_CHECK(cuptiProfilerHostConfigAddMetrics(&add));
    auto size = CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    PROFILER_CHECK(cuptiProfilerHostGetConfigImageSize(&size));
    std::vector<std::uint8_t> image(size.configImageSize);
    if (image.empty()) return image;
    auto get = CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    get.pHostObject = host_;
    get.configImageSize = image.size();
    get.pConfigImage = image.data();
    PROFILER_CHECK(cuptiProfilerHostGetConfigImage(&get));
    return image;
  }

  std::vector<double> evaluate(std::vector<std::uint8_t>& counter_data, std::size_t range,
                               const std::vector<const char*>& names) const {
    std::vector<double> values(names.size(), std::numeric_limits<double>::quiet_NaN());
    auto p = CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    p.pHostObject = host_;
    p.pCounterDataImage = counter_data.data();
    p.counterDataImageSize = counter_data.size();
    p.rangeIndex = range;
    p.ppMetricNames = const_cast<const char**>(names.data());
    p.numMetrics = names.size();
    p.pMetricValues = values.data();
    PROFILER_CHECK(cuptiProfilerHostEvaluateToGpuValues(&p));
    return values;
  }

 private:
  CUpti_Profiler_Host_Object* host_ = nullptr;
};

std::size_t passes_of(std::vector<std::uint8_t>& config) {
  if (config.empty()) return 0;
  auto p = CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
  p.configImageSize = config.size();
  p.pConfigImage = config.data();
  PROFILER_CHECK(cuptiProfilerHostGetNumOfPasses(&p));
  return p.numOfPasses;
}

std::vector<const char*> c_strings(const std::vector<std::string>& names) {
  std::vector<const char*> out;
  for (const std::string& n : names) out.push_back(n.c_str());
  return out;
}

// cuptiProfilerInitialize/DeInitialize for the lifetime of the profiler.
class ProfilerInterface {
 public:
  ProfilerInterface() {
    auto p = CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
    PROFILER_CHECK(cuptiProfilerInitialize(&p));
  }
  ~ProfilerInterface() {
    auto p = CUPTI_PARAMS(CUpti_Profiler_DeInitialize_Params);
    cuptiProfilerDeInitialize(&p);
  }
  ProfilerInterface(const ProfilerInterface&) = delete;
  ProfilerInterface& operator=(const ProfilerInterface&) = delete;
};

// The range profiler enabled on a context, for one measure() call.
class EnabledRangeProfiler {
 public:
  explicit EnabledRangeProfiler(CUcontext context) {
    auto p = CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
    p.ctx = context;
    PROFILER_CHECK(cuptiRangeProfilerEnable(&p));
    object_ = p.pRangeProfilerObject;
  }
  ~EnabledRangeProfiler() {
    auto p = CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
    p.pRangeProfilerObject = object_;
    cuptiRangeProfilerDisable(&p);
  }
  EnabledRangeProfiler(const EnabledRangeProfiler&) = delete;
  EnabledRangeProfiler& operator=(const EnabledRangeProfiler&) = delete;
  CUpti_RangeProfiler_Object* get() const { return object_; }

 private:
  CUpti_RangeProfiler_Object* object_ = nullptr;
};

// The primary context of the current device, without linking the driver library (the
// executable must start on machines without one: `run --dry-run`, CPU tests).
CUcontext current_context() {
  CUDA_CHECK(cudaFree(nullptr));  // creates the primary context and makes it current
  using GetCurrent = CUresult (*)(CUcontext*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr)
    throw MetricsUnavailableError("the CUDA driver did not provide cuCtxGetCurrent");
  CUcontext context = nullptr;
  const CUresult status = reinterpret_cast<GetCurrent>(entry)(&context);
  if (status != CUDA_SUCCESS || context == nullptr)
    throw MetricsUnavailableError(fmt::format("cuCtxGetCurrent returned {} and no context", static_cast<int>(status)));
  return context;
}

const char* support_text(CUpti_Profiler_Support_Level level) {
  switch (level) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED: return "supported";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED: return "unsupported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED: return "disabled";
    default: return "unknown";
  }
}

// CUPTI's own verdict on range profiling here; "" when supported. Only advice: a verdict that is
// wrong (seen with virtual machines) must not stop calls that would work, so the caller keeps it
// for the message of a call that then fails.
std::string profiling_support_problem(int device) {
  auto p = CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params);
  p.cuDevice = static_cast<CUdevice>(device);
  p.api = CUPTI_PROFILER_RANGE_PROFILING;
  if (const CUptiResult status = cuptiProfilerDeviceSupported(&p); status != CUPTI_SUCCESS)
    return fmt::format("cuptiProfilerDeviceSupported failed: {}", result_text(status));
  if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return "";
  std::string why;
  const std::pair<const char*, CUpti_Profiler_Support_Level> parts[] = {
      {"architecture", p.architecture}, {"SLI", p.sli},  {"vGPU", p.vGpu},
      {"confidential compute", p.confidentialCompute}, {"CMP", p.cmp}, {"WSL", p.wsl}};
  for (const auto& [what, level] : parts)
    if (level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
      why += fmt::format("{}{}: {}", why.empty() ? "" : ", ", what, support_text(level));
  return fmt::format("cuptiProfilerDeviceSupported says range profiling is {} on device {} ({})",
                     support_text(p.isSupported), device, why.empty() ? "no reason given" : why);
}

std::string chip_name(int device) {
  auto p = CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
  p.deviceIndex = static_cast<std::size_t>(device);
  PROFILER_CHECK(cuptiDeviceGetChipName(&p));
  return p.pChipName != nullptr ? p.pChipName : "";
}

std::vector<std::uint8_t> counter_availability(CUcontext context) {
  auto p = CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  p.ctx = context;
  PROFILER_CHECK(cuptiProfilerGetCounterAvailability(&p));
  std::vector<std::uint8_t> image(p.counterAvailabilityImageSize);
  p.pCounterAvailabilityImage = image.data();
  PROFILER_CHECK(cuptiProfilerGetCounterAvailability(&p));
  image.resize(p.counterAvailabilityImageSize);
  return image;
}

}  // namespace

HostMetricCheck check_metrics_on_host(const std::string& chip, const std::vector<std::string>& metric_names) {
  HostMetricCheck check;
  ProfilerHost host(chip, nullptr);
  std::vector<std::string> valid;
  for (const std::string& name : metric_names) {
    std::string description;
    const CUptiResult status = host.describe(name, description);
    if (status == CUPTI_SUCCESS) {
      valid.push_back(name);
      check.descriptions.push_back(description);
    } else {
      check.invalid.push_back(fmt::format("{}: {}", name, result_text(status)));
    }
  }
  if (!valid.empty()) {
    ProfilerHost config_host(chip, nullptr);
    std::vector<std::uint8_t> config = config_host.config_image(c_strings(valid));
    check.config_image_bytes = config.size();
    check.passes = passes_of(config);
  }
  return check;
}

struct KernelMetricsProfiler::State {
  RangeProfilerOptions options;
  int device = 0;
  std::string chip;
  std::vector<std::string> metric_names;
  std::vector<const char*> metric_cstrs;  // point into metric_names
  CUcontext context = nullptr;
  std::unique_ptr<ProfilerInterface> profiler;
  std::vector<std::uint8_t> availability;
  std::unique_ptr<ProfilerHost> host;
  std::vector<std::uint8_t> config;
  std::size_t passes = 0;
  std::string support_problem;  // cuptiProfilerDeviceSupported's doubts, added to later errors
};

namespace {

// Adds what cuptiProfilerDeviceSupported said to a failure's message.
[[noreturn]] void rethrow_with(const MetricsUnavailableError& e, const std::string& support_problem) {
  if (support_problem.empty()) throw e;
  throw MetricsUnavailableError(fmt::format("{} (earlier: {})", e.what(), support_problem));
}

}  // namespace

KernelMetricsProfiler::KernelMetricsProfiler(int device, const std::vector<MetricGroup>& groups,
                                             RangeProfilerOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = options;
  s.device = device;
  s.metric_names = metric_names_for(groups);
  if (s.metric_names.empty()) throw std::invalid_argument("KernelMetricsProfiler needs at least one metric group");
  s.metric_cstrs = c_strings(s.metric_names);

  CUDA_CHECK(cudaSetDevice(device));
  s.context = current_context();
  try {
    s.profiler = std::make_unique<ProfilerInterface>();
    s.support_problem = profiling_support_problem(device);
    configure();
  } catch (const MetricsUnavailableError& e) {
    rethrow_with(e, s.support_problem);
  }
}

void KernelMetricsProfiler::configure() {
  State& s = *state_;
  s.chip = chip_name(s.device);
  s.availability = counter_availability(s.context);
  s.host = std::make_unique<ProfilerHost>(s.chip, s.availability.data());

  std::vector<std::string> unknown;
  for (const std::string& name : s.metric_names) {
    std::string description;
    if (const CUptiResult status = s.host->describe(name, description); status != CUPTI_SUCCESS)
      unknown.push_back(fmt::format("{} ({})", name, result_text(status)));
  }
  if (!unknown.empty())
    throw MetricsUnavailableError(
        fmt::format("metrics not available on chip {}: {}", s.chip, fmt::join(unknown, ", ")));

  s.config = s.host->config_image(s.metric_cstrs);
  if (s.config.empty())
    throw MetricsUnavailableError(fmt::format(
        "cuptiProfilerHostGetConfigImageSize gave an empty configuration for {} on chip {}: the counters are not "
        "available (counter availability image of {} bytes)",
        fmt::join(s.metric_names, ", "), s.chip, s.availability.size()));
  s.passes = passes_of(s.config);
}

KernelMetricsProfiler::~KernelMetricsProfiler() = default;

const std::string& KernelMetricsProfiler::chip() const { return state_->chip; }
const std::vector<std::string>& KernelMetricsProfiler::metric_names() const { return state_->metric_names; }
std::size_t KernelMetricsProfiler::passes() const { return state_->passes; }

MeasuredRanges KernelMetricsProfiler::measure(const std::function<void()>& work) {
  try {
    return measure_once(work);
  } catch (const MetricsUnavailableError& e) {
    rethrow_with(e, state_->support_problem);
  }
}

MeasuredRanges KernelMetricsProfiler::measure_once(const std::function<void()>& work) {
  State& s = *state_;
  MeasuredRanges out;
  out.metric_names = s.metric_names;
  out.passes = s.passes;

  // Work queued before the profiler starts must not land in a range.
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> counter_data;  // SetConfig keeps a pointer: must outlive `enabled`
  EnabledRangeProfiler enabled(s.context);

  auto size = CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  size.pRangeProfilerObject = enabled.get();
  size.pMetricNames = s.metric_cstrs.data();
  size.numMetrics = s.metric_cstrs.size();
  size.maxNumOfRanges = s.options.max_ranges;
  size.maxNumRangeTreeNodes = static_cast<std::uint32_t>(s.options.max_ranges);
  PROFILER_CHECK(cuptiRangeProfilerGetCounterDataSize(&size));
  counter_data.resize(size.counterDataSize);

  auto init = CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  init.pRangeProfilerObject = enabled.get();
  init.counterDataSize = counter_data.size();
  init.pCounterData = counter_data.data();
  PROFILER_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&init));

  auto config = CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  config.pRangeProfilerObject = enabled.get();
  config.configSize = s.config.size();
  config.pConfig = s.config.data();
  config.counterDataImageSize = counter_data.size();
  config.pCounterDataImage = counter_data.data();
  config.range = CUPTI_AutoRange;
  config.replayMode = CUPTI_KernelReplay;
  config.maxRangesPerPass = s.options.max_ranges;
  config.numNestingLevels = 1;  // auto range: one level
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  PROFILER_CHECK(cuptiRangeProfilerSetConfig(&config));

  // Kernel replay submits every pass of a kernel inside its launch, so one round is expected;
  // the loop covers a configuration that still asks for another round.
  bool all_submitted = false;
  for (int round = 0; round < s.options.max_passes && !all_submitted; ++round) {
    auto start = CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
    start.pRangeProfilerObject = enabled.get();
    PROFILER_CHECK(cuptiRangeProfilerStart(&start));
    auto stop = CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
    stop.pRangeProfilerObject = enabled.get();
    try {
      work();
      CUDA_CHECK(cudaDeviceSynchronize());
    } catch (...) {
      cuptiRangeProfilerStop(&stop);  // leave the profiler stopped; the work's error is the one to report
      throw;
    }
    PROFILER_CHECK(cuptiRangeProfilerStop(&stop));
    all_submitted = stop.isAllPassSubmitted != 0;
  }
  if (!all_submitted)
    throw MetricsUnavailableError(fmt::format("cuptiRangeProfilerStop still reported passes to submit after {} rounds "
                                              "of the work ({} passes configured)",
                                              s.options.max_passes, s.passes));

  auto decode = CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  decode.pRangeProfilerObject = enabled.get();
  PROFILER_CHECK(cuptiRangeProfilerDecodeData(&decode));
  out.dropped_ranges = decode.numOfRangeDropped;

  auto info = CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  PROFILER_CHECK(cuptiRangeProfilerGetCounterDataInfo(&info));

  for (std::size_t r = 0; r < info.numTotalRanges; ++r) {
    auto range = CUPTI_PARAMS(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params);
    range.pCounterDataImage = counter_data.data();
    range.counterDataImageSize = counter_data.size();
    range.rangeIndex = r;
    range.rangeDelimiter = "/";
    PROFILER_CHECK(cuptiRangeProfilerCounterDataGetRangeInfo(&range));
    RangeValues values;
    values.name = range.rangeName != nullptr ? range.rangeName : std::to_string(r);
    values.values = s.host->evaluate(counter_data, r, s.metric_cstrs);
    out.ranges.push_back(std::move(values));
  }
  return out;
}

}  // namespace attnprof
