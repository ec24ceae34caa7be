// cuDNN graph (backend) C API plumbing: the checking macro, RAII owners for the handle and every
// backend descriptor, and builders for the tensors and operations attention graphs are made of.
// Every failure names the descriptor, the attribute and cuDNN's own last-error detail, so that
// one run on the GPU is enough to see which call a library version rejected.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.hpp"

namespace attnprof {

// A failed cuDNN call. Keeps the status so callers can tell "this library cannot" (NOT_SUPPORTED,
// missing sub-library, compile failure) from "we built the descriptor wrongly" (BAD_PARAM).
class CudnnCallError : public GpuCallError {
 public:
  CudnnCallError(cudnnStatus_t status, const std::string& message) : GpuCallError(message), status_(status) {}
  cudnnStatus_t status() const { return status_; }
  bool is_bad_param() const { return CUDNN_STATUS_CATEGORY(status_) == CUDNN_STATUS_BAD_PARAM; }

 private:
  cudnnStatus_t status_;
};

// cuDNN's thread-local detail for the most recent failure, "" when it has none (reading clears it).
std::string cudnn_last_error_detail();

// "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN (3001): <cuDNN's detail>".
std::string describe_cudnn_status(cudnnStatus_t status);

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, std::string_view what, const char* file, int line);

// Names of the attributes and descriptor types these graphs use ("CUDNN_ATTR_TENSOR_STRIDES").
std::string_view attribute_name(cudnnBackendAttributeName_t name);
std::string_view descriptor_type_name(cudnnBackendDescriptorType_t type);

}  // namespace attnprof

#define CUDNN_CHECK(call)                                                          \
  do {                                                                             \
    const cudnnStatus_t attnprof_cudnn_status_ = (call);                           \
    if (attnprof_cudnn_status_ != CUDNN_STATUS_SUCCESS)                            \
      ::attnprof::throw_cudnn_error(attnprof_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace attnprof {

class CudnnHandle {
 public:
  CudnnHandle();  // on the current device
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return handle_; }
  // Leaves the handle to the process exit (used when the CUDA runtime is already unloading).
  void abandon() { handle_ = nullptr; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

// Owns one cudnnBackendDescriptor_t; `label` says what it is in error messages ("tensor S (uid 102)").
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  BackendDescriptor(cudnnBackendDescriptorType_t type, std::string label);
  ~BackendDescriptor();
  BackendDescriptor(BackendDescriptor&& other) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& label() const { return label_; }
  void abandon() { desc_ = nullptr; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
           const void* values);
  void set_int64(cudnnBackendAttributeName_t name, std::int64_t value);
  void set_int64s(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& values);
  void set_bool(cudnnBackendAttributeName_t name, bool value);
  void set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t value);
  void set_descriptor(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value);
  void set_descriptors(cudnnBackendAttributeName_t name, const std::vector<cudnnBackendDescriptor_t>& values);
  void set_handle(cudnnBackendAttributeName_t name, cudnnHandle_t handle);
  void finalize();

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string label_;
};

// One tensor of a graph. Strides are in elements; a by-value tensor is a host scalar bound through
// the variant pack at execution; a virtual one lives only between fused operations.
struct TensorSpec {
  std::string name;
  std::int64_t uid = 0;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;
  bool is_virtual = false;
  bool by_value = false;
  // A ragged tensor: an int32 [batch + 1, 1, 1, 1] tensor of element offsets where each batch
  // entry starts (overrides the batch stride; packed variable-length sequences).
  cudnnBackendDescriptor_t ragged_offset = nullptr;
};

// Per-batch GEMM extents of a matmul over padded sequences: int32 [batch, 1, 1, 1] tensors that
// cap M, N or K for each batch entry (the sequence lengths of a padding mask); null: no cap.
struct MatmulOverrides {
  cudnnBackendDescriptor_t m = nullptr;
  cudnnBackendDescriptor_t n = nullptr;
  cudnnBackendDescriptor_t k = nullptr;
};

// Collects the tensors and finalized operations of one operation graph and owns them all.
class OperationGraphBuilder {
 public:
  cudnnBackendDescriptor_t tensor(const TensorSpec& spec);

  // C[b,h,m,n] = A[b,h,m,k] x B[b,h,k,n], fp32 accumulation.
  void matmul(std::string_view name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c, const MatmulOverrides& overrides = {});
  // y[b, h, s, d] (or the transposed [b, h, d, s] view) = the tokens of sequence b gathered from a
  // paged cache container [pages, h, page_size, d] through page_table [b, 1, pages_per_seq, 1]
  // int32, up to seq_len [b, 1, 1, 1] tokens (cuDNN 9.5+).
  void paged_cache_load(std::string_view name, cudnnBackendDescriptor_t container, cudnnBackendDescriptor_t page_table,
                        cudnnBackendDescriptor_t seq_len, cudnnBackendDescriptor_t y);
  // y = mode(x[, b[, t]]); `axis` only for GEN_INDEX.
  void pointwise(std::string_view name, cudnnPointwiseMode_t mode, cudnnDataType_t compute_type,
                 cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                 cudnnBackendDescriptor_t y, std::optional<std::int64_t> axis = std::nullopt);
  // y = reduce(x) over the dimensions where y has extent 1.
  void reduction(std::string_view name, cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y);
  // y = x seen with y's dims and strides (no data moves: a transposed view between fused operations).
  void reshape(std::string_view name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // cuDNN 9.13.1+'s fused SDPA forward operation (no stats output).
  void sdpa_forward(std::string_view name, cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t k,
                    cudnnBackendDescriptor_t v, cudnnBackendDescriptor_t o, cudnnBackendDescriptor_t scale);

  // Finalizes the operation graph over every operation added so far. A null handle leaves the
  // device to the plan's DEVICEPROP (cuDNN 9.8+ device-less planning).
  void build(cudnnHandle_t handle);
  cudnnBackendDescriptor_t graph() const { return graph_.get(); }
  std::size_t operation_count() const { return operations_.size(); }

  // Releases nothing at destruction (the CUDA runtime is unloading).
  void abandon();

 private:
  BackendDescriptor& own(BackendDescriptor descriptor);

  std::vector<BackendDescriptor> owned_;  // tensors and operation sub-descriptors, kept alive with the plan
  std::vector<cudnnBackendDescriptor_t> operations_;
  BackendDescriptor graph_;
};

// The first engine configuration, in heuristics mode A's order, whose execution plan finalizes.
struct ExecutionPlan {
  std::vector<BackendDescriptor> engine_configs;  // kept alive: the plan refers to one of them
  BackendDescriptor plan;
  std::int64_t workspace_bytes = 0;
  std::int64_t engine_global_index = -1;
  std::string engine_config;  // "engine 9 {KERNEL_CFG=7}"
  int config_position = -1;   // index of the chosen config in heuristics' order
  int configs_offered = 0;
  int configs_rejected = 0;
  std::string offered;     // "#0 engine 8 {KERNEL_CFG=3}; #1 engine 9 {KERNEL_CFG=7}"
  std::string rejections;  // one "  config #i (engine ...): status: detail" line per config passed over

  void abandon();
};

// "engine 9 {KERNEL_CFG=7}": the engine's global index and knob choices (diagnostics only).
std::string describe_engine_config(cudnnBackendDescriptor_t config);

struct PlanSearchOptions {
  int first_config = 0;  // skip heuristics' first N configs (to compare plans by hand)
  // A finalized DEVICEPROP descriptor to plan for instead of the handle's device (cuDNN 9.8+).
  cudnnBackendDescriptor_t device_properties = nullptr;
};

// Runs heuristics (mode A) on a finalized graph and finalizes plans in order until one succeeds.
// Returns no plan (with `rejections` filled) when none does; throws only on unexpected API errors.
ExecutionPlan find_execution_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                                  const PlanSearchOptions& options = {});

// The plan's JSON (engine name and knobs) for diagnostics; "" if the library cannot say.
std::string execution_plan_json(cudnnBackendDescriptor_t plan);

// Variant pack: device (or host, for by-value tensors) pointers by unique id, plus the workspace.
BackendDescriptor make_variant_pack(const std::vector<std::int64_t>& uids, const std::vector<void*>& pointers,
                                    void* workspace);

}  // namespace attnprof
