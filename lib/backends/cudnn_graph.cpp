#include "backends/cudnn_graph.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

namespace attnprof {

std::string cudnn_last_error_detail() {
  std::array<char, 4096> buffer{};
  cudnnGetLastErrorString(buffer.data(), buffer.size());
  buffer.back() = '\0';
  std::string detail(buffer.data());
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  return detail;
}

std::string describe_cudnn_status(cudnnStatus_t status) {
  std::string text = fmt::format("{} ({})", cudnnGetErrorString(status), static_cast<int>(status));
  const std::string detail = cudnn_last_error_detail();
  if (!detail.empty()) text += ": " + detail;
  return text;
}

void throw_cudnn_error(cudnnStatus_t status, std::string_view what, const char* file, int line) {
  throw CudnnCallError(status, fmt::format("{} failed at {}:{}: {}", what, file, line, describe_cudnn_status(status)));
}

std::string_view attribute_name(cudnnBackendAttributeName_t name) {
  switch (static_cast<int>(name)) {
    case CUDNN_ATTR_POINTWISE_MODE: return "CUDNN_ATTR_POINTWISE_MODE";
    case CUDNN_ATTR_POINTWISE_MATH_PREC: return "CUDNN_ATTR_POINTWISE_MATH_PREC";
    case CUDNN_ATTR_POINTWISE_AXIS: return "CUDNN_ATTR_POINTWISE_AXIS";
    case CUDNN_ATTR_ENGINEHEUR_MODE: return "CUDNN_ATTR_ENGINEHEUR_MODE";
    case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: return "CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH";
    case CUDNN_ATTR_ENGINEHEUR_RESULTS: return "CUDNN_ATTR_ENGINEHEUR_RESULTS";
    case CUDNN_ATTR_ENGINECFG_ENGINE: return "CUDNN_ATTR_ENGINECFG_ENGINE";
    case CUDNN_ATTR_EXECUTION_PLAN_HANDLE: return "CUDNN_ATTR_EXECUTION_PLAN_HANDLE";
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: return "CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG";
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE: return "CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE";
    case CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION: return "CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION";
    case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: return "CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR";
    case CUDNN_ATTR_OPERATION_POINTWISE_XDESC: return "CUDNN_ATTR_OPERATION_POINTWISE_XDESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: return "CUDNN_ATTR_OPERATION_POINTWISE_BDESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_YDESC: return "CUDNN_ATTR_OPERATION_POINTWISE_YDESC";
    case CUDNN_ATTR_OPERATION_POINTWISE_TDESC: return "CUDNN_ATTR_OPERATION_POINTWISE_TDESC";
    case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: return "CUDNN_ATTR_OPERATIONGRAPH_HANDLE";
    case CUDNN_ATTR_OPERATIONGRAPH_OPS: return "CUDNN_ATTR_OPERATIONGRAPH_OPS";
    case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: return "CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT";
    case CUDNN_ATTR_TENSOR_DATA_TYPE: return "CUDNN_ATTR_TENSOR_DATA_TYPE";
    case CUDNN_ATTR_TENSOR_DIMENSIONS: return "CUDNN_ATTR_TENSOR_DIMENSIONS";
    case CUDNN_ATTR_TENSOR_STRIDES: return "CUDNN_ATTR_TENSOR_STRIDES";
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: return "CUDNN_ATTR_TENSOR_UNIQUE_ID";
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL: return "CUDNN_ATTR_TENSOR_IS_VIRTUAL";
    case CUDNN_ATTR_TENSOR_IS_BY_VALUE: return "CUDNN_ATTR_TENSOR_IS_BY_VALUE";
    case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: return "CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS";
    case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS";
    case CUDNN_ATTR_VARIANT_PACK_WORKSPACE: return "CUDNN_ATTR_VARIANT_PACK_WORKSPACE";
    case CUDNN_ATTR_ENGINE_GLOBAL_INDEX: return "CUDNN_ATTR_ENGINE_GLOBAL_INDEX";
    case CUDNN_ATTR_MATMUL_COMP_TYPE: return "CUDNN_ATTR_MATMUL_COMP_TYPE";
    case CUDNN_ATTR_OPERATION_MATMUL_ADESC: return "CUDNN_ATTR_OPERATION_MATMUL_ADESC";
    case CUDNN_ATTR_OPERATION_MATMUL_BDESC: return "CUDNN_ATTR_OPERATION_MATMUL_BDESC";
    case CUDNN_ATTR_OPERATION_MATMUL_CDESC: return "CUDNN_ATTR_OPERATION_MATMUL_CDESC";
    case CUDNN_ATTR_OPERATION_MATMUL_DESC: return "CUDNN_ATTR_OPERATION_MATMUL_DESC";
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC: return "CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC";
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC: return "CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC";
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC: return "CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC";
    case CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC: return "CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC";
    case CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC: return "CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC";
    case CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC: return "CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC";
    case CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC: return "CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC";
    case CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC: return "CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC";
    case CUDNN_ATTR_REDUCTION_OPERATOR: return "CUDNN_ATTR_REDUCTION_OPERATOR";
    case CUDNN_ATTR_REDUCTION_COMP_TYPE: return "CUDNN_ATTR_REDUCTION_COMP_TYPE";
    case CUDNN_ATTR_OPERATION_REDUCTION_XDESC: return "CUDNN_ATTR_OPERATION_REDUCTION_XDESC";
    case CUDNN_ATTR_OPERATION_REDUCTION_YDESC: return "CUDNN_ATTR_OPERATION_REDUCTION_YDESC";
    case CUDNN_ATTR_OPERATION_REDUCTION_DESC: return "CUDNN_ATTR_OPERATION_REDUCTION_DESC";
    case CUDNN_ATTR_OPERATION_RESHAPE_XDESC: return "CUDNN_ATTR_OPERATION_RESHAPE_XDESC";
    case CUDNN_ATTR_OPERATION_RESHAPE_YDESC: return "CUDNN_ATTR_OPERATION_RESHAPE_YDESC";
    case CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC: return "CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC";
    case CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC: return "CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC";
    case CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC: return "CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC";
    case CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC: return "CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC";
    case CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC: return "CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC";
    case CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC: return "CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC";
    default: return "cudnnBackendAttributeName_t (see cudnn_graph.h)";
  }
}

std::string_view descriptor_type_name(cudnnBackendDescriptorType_t type) {
  switch (type) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return "POINTWISE";
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: return "ENGINE";
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return "ENGINECFG";
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return "ENGINEHEUR";
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return "EXECUTION_PLAN";
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return "OPERATION_POINTWISE";
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return "OPERATIONGRAPH";
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return "VARIANT_PACK";
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return "TENSOR";
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return "MATMUL";
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return "OPERATION_MATMUL";
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return "REDUCTION";
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return "OPERATION_REDUCTION";
    case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: return "OPERATION_SDPA_FWD";
    case CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR: return "OPERATION_PAGED_CACHE_LOAD";
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: return "OPERATION_RESHAPE";
    default: return "descriptor";
  }
}

// ---------------------------------------------------------------------------------------------

CudnnHandle::CudnnHandle() { CUDNN_CHECK(cudnnCreate(&handle_)); }

CudnnHandle::~CudnnHandle() {
  if (handle_ != nullptr) cudnnDestroy(handle_);  // errors at teardown have nowhere to go
}

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type, std::string label)
    : label_(std::move(label)) {
  const cudnnStatus_t status = cudnnBackendCreateDescriptor(type, &desc_);
  if (status != CUDNN_STATUS_SUCCESS) {
    desc_ = nullptr;
    throw CudnnCallError(status, fmt::format("cudnnBackendCreateDescriptor(CUDNN_BACKEND_{}_DESCRIPTOR) for {}: {}",
                                             descriptor_type_name(type), label_, describe_cudnn_status(status)));
  }
}

BackendDescriptor::~BackendDescriptor() {
  if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
}

BackendDescriptor::BackendDescriptor(BackendDescriptor&& other) noexcept
    : desc_(std::exchange(other.desc_, nullptr)), label_(std::move(other.label_)) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  if (this != &other) {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
    desc_ = std::exchange(other.desc_, nullptr);
    label_ = std::move(other.label_);
  }
  return *this;
}

void BackendDescriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
                            const void* values) {
  const cudnnStatus_t status = cudnnBackendSetAttribute(desc_, name, type, count, values);
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnCallError(status, fmt::format("setting {} ({}, {} element(s), type {}) on {}: {}", attribute_name(name),
                                             static_cast<int>(name), count, static_cast<int>(type), label_,
                                             describe_cudnn_status(status)));
}

void BackendDescriptor::set_int64(cudnnBackendAttributeName_t name, std::int64_t value) {
  set(name, CUDNN_TYPE_INT64, 1, &value);
}

void BackendDescriptor::set_int64s(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& values) {
  set(name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(values.size()), values.data());
}

void BackendDescriptor::set_bool(cudnnBackendAttributeName_t name, bool value) {
  set(name, CUDNN_TYPE_BOOLEAN, 1, &value);
}

void BackendDescriptor::set_data_type(cudnnBackendAttributeName_t name, cudnnDataType_t value) {
  set(name, CUDNN_TYPE_DATA_TYPE, 1, &value);
}

void BackendDescriptor::set_descriptor(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value) {
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

void BackendDescriptor::set_descriptors(cudnnBackendAttributeName_t name,
                                        const std::vector<cudnnBackendDescriptor_t>& values) {
  set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(values.size()), values.data());
}

void BackendDescriptor::set_handle(cudnnBackendAttributeName_t name, cudnnHandle_t handle) {
  set(name, CUDNN_TYPE_HANDLE, 1, &handle);
}

void BackendDescriptor::finalize() {
  const cudnnStatus_t status = cudnnBackendFinalize(desc_);
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudnnCallError(status, fmt::format("cudnnBackendFinalize({}): {}", label_, describe_cudnn_status(status)));
}

// ---------------------------------------------------------------------------------------------

BackendDescriptor& OperationGraphBuilder::own(BackendDescriptor descriptor) {
  owned_.push_back(std::move(descriptor));
  return owned_.back();
}

cudnnBackendDescriptor_t OperationGraphBuilder::tensor(const TensorSpec& spec) {
  BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR,
                      fmt::format("tensor {} (uid {}, dims [{}], strides [{}]{}{})", spec.name, spec.uid,
                                  fmt::join(spec.dims, ","), fmt::join(spec.strides, ","),
                                  spec.is_virtual ? ", virtual" : "", spec.by_value ? ", by value" : ""));
  t.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, spec.uid);
  t.set_data_type(CUDNN_ATTR_TENSOR_DATA_TYPE, spec.data_type);
  t.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, spec.dims);
  t.set_int64s(CUDNN_ATTR_TENSOR_STRIDES, spec.strides);
  t.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16);
  t.set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, spec.is_virtual);
  if (spec.by_value) t.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
  if (spec.ragged_offset != nullptr) t.set_descriptor(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, spec.ragged_offset);
  t.finalize();
  return own(std::move(t)).get();
}

void OperationGraphBuilder::matmul(std::string_view name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                                   cudnnBackendDescriptor_t c, const MatmulOverrides& overrides) {
  BackendDescriptor desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR, fmt::format("matmul descriptor of {}", name));
  desc.set_data_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
  desc.finalize();
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, fmt::format("matmul op {}", name));
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc.get());
  if (overrides.m != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, overrides.m);
  if (overrides.n != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, overrides.n);
  if (overrides.k != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, overrides.k);
  op.finalize();
  own(std::move(desc));
  operations_.push_back(own(std::move(op)).get());
}

void OperationGraphBuilder::paged_cache_load(std::string_view name, cudnnBackendDescriptor_t container,
                                             cudnnBackendDescriptor_t page_table, cudnnBackendDescriptor_t seq_len,
                                             cudnnBackendDescriptor_t y) {
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR, fmt::format("paged cache load op {}", name));
  op.set_descriptor(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, container);
  op.set_descriptor(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, page_table);
  op.set_descriptor(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, seq_len);
  op.set_descriptor(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, y);
  op.finalize();
  operations_.push_back(own(std::move(op)).get());
}

void OperationGraphBuilder::pointwise(std::string_view name, cudnnPointwiseMode_t mode, cudnnDataType_t compute_type,
                                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                      cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                                      std::optional<std::int64_t> axis) {
  BackendDescriptor desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                         fmt::format("pointwise descriptor of {} (mode {})", name, static_cast<int>(mode)));
  desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  desc.set_data_type(CUDNN_ATTR_POINTWISE_MATH_PREC, compute_type);
  if (axis) desc.set_int64(CUDNN_ATTR_POINTWISE_AXIS, *axis);
  desc.finalize();
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, fmt::format("pointwise op {}", name));
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc.get());
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
  if (t != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  op.finalize();
  own(std::move(desc));
  operations_.push_back(own(std::move(op)).get());
}

void OperationGraphBuilder::reduction(std::string_view name, cudnnReduceTensorOp_t reduce_op,
                                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  BackendDescriptor desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, fmt::format("reduction descriptor of {}", name));
  desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce_op);
  desc.set_data_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
  desc.finalize();
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, fmt::format("reduction op {}", name));
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc.get());
  op.finalize();
  own(std::move(desc));
  operations_.push_back(own(std::move(op)).get());
}

void OperationGraphBuilder::reshape(std::string_view name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, fmt::format("reshape op {}", name));
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  op.finalize();
  operations_.push_back(own(std::move(op)).get());
}

void OperationGraphBuilder::sdpa_forward(std::string_view name, cudnnBackendDescriptor_t q,
                                         cudnnBackendDescriptor_t k, cudnnBackendDescriptor_t v,
                                         cudnnBackendDescriptor_t o, cudnnBackendDescriptor_t scale) {
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, fmt::format("SDPA_FWD op {}", name));
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale);
  op.finalize();
  operations_.push_back(own(std::move(op)).get());
}

void OperationGraphBuilder::build(cudnnHandle_t handle) {
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                          fmt::format("operation graph of {} operation(s)", operations_.size()));
  // Deprecated in 9.19 in favour of device properties, still accepted, and what 9.14 expects.
  if (handle != nullptr) graph.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle);
  graph.set_descriptors(CUDNN_ATTR_OPERATIONGRAPH_OPS, operations_);
  graph.finalize();
  graph_ = std::move(graph);
}

void OperationGraphBuilder::abandon() {
  for (BackendDescriptor& d : owned_) d.abandon();
  graph_.abandon();
}

void ExecutionPlan::abandon() {
  for (BackendDescriptor& d : engine_configs) d.abandon();
  plan.abandon();
}

// ---------------------------------------------------------------------------------------------

namespace {

std::string_view knob_name(cudnnBackendKnobType_t type) {
  switch (type) {
    case CUDNN_KNOB_TYPE_SWIZZLE: return "SWIZZLE";
    case CUDNN_KNOB_TYPE_TILE_SIZE: return "TILE_SIZE";
    case CUDNN_KNOB_TYPE_EDGE: return "EDGE";
    case CUDNN_KNOB_TYPE_MULTIPLY: return "MULTIPLY";
    case CUDNN_KNOB_TYPE_SPLIT_K_BUF: return "SPLIT_K_BUF";
    case CUDNN_KNOB_TYPE_TILEK: return "TILEK";
    case CUDNN_KNOB_TYPE_STAGES: return "STAGES";
    case CUDNN_KNOB_TYPE_REDUCTION_MODE: return "REDUCTION_MODE";
    case CUDNN_KNOB_TYPE_SPLIT_K_SLC: return "SPLIT_K_SLC";
    case CUDNN_KNOB_TYPE_IDX_MODE: return "IDX_MODE";
    case CUDNN_KNOB_TYPE_SPECFILT: return "SPECFILT";
    case CUDNN_KNOB_TYPE_KERNEL_CFG: return "KERNEL_CFG";
    case CUDNN_KNOB_TYPE_WORKSPACE: return "WORKSPACE";
    case CUDNN_KNOB_TYPE_TILE_CGA_M: return "TILE_CGA_M";
    case CUDNN_KNOB_TYPE_TILE_CGA_N: return "TILE_CGA_N";
    case CUDNN_KNOB_TYPE_BLOCK_SIZE: return "BLOCK_SIZE";
    case CUDNN_KNOB_TYPE_OCCUPANCY: return "OCCUPANCY";
    case CUDNN_KNOB_TYPE_ARRAY_SIZE_PER_THREAD: return "ARRAY_SIZE_PER_THREAD";
    case CUDNN_KNOB_TYPE_SPLIT_COLS: return "SPLIT_COLS";
    case CUDNN_KNOB_TYPE_TILE_ROWS: return "TILE_ROWS";
    case CUDNN_KNOB_TYPE_TILE_COLS: return "TILE_COLS";
    case CUDNN_KNOB_TYPE_LOAD_SIZE: return "LOAD_SIZE";
    case CUDNN_KNOB_TYPE_CTA_COUNT: return "CTA_COUNT";
    case CUDNN_KNOB_TYPE_STREAM_K: return "STREAM_K";
    case CUDNN_KNOB_TYPE_SPLIT_P_SLC: return "SPLIT_P_SLC";
    case CUDNN_KNOB_TYPE_TILE_M: return "TILE_M";
    case CUDNN_KNOB_TYPE_TILE_N: return "TILE_N";
    case CUDNN_KNOB_TYPE_WARP_SPEC_CFG: return "WARP_SPEC_CFG";
    case CUDNN_KNOB_TYPE_SWAP_AB: return "SWAP_AB";
    default: return {};
  }
}

// The global index of the engine behind a config, -1 if the library will not say (diagnostics only).
std::int64_t engine_global_index(cudnnBackendDescriptor_t config) {
  cudnnBackendDescriptor_t engine = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return -1;
  std::int64_t index = -1;
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &engine) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index) !=
          CUDNN_STATUS_SUCCESS)
    index = -1;
  cudnnBackendDestroyDescriptor(engine);
  cudnn_last_error_detail();  // a failed query here must not leak into the next real error message
  return index;
}

// "KERNEL_CFG=7": the knob choices of a config, "" if the library will not say (diagnostics only).
std::string knob_choices(cudnnBackendDescriptor_t config) {
  std::vector<cudnnBackendDescriptor_t> choices(CUDNN_KNOB_TYPE_COUNTS, nullptr);
  std::int64_t created = 0;
  for (; created < static_cast<std::int64_t>(choices.size()); ++created)
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &choices[created]) != CUDNN_STATUS_SUCCESS)
      break;
  std::string text;
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, created,
                               &count, choices.data()) == CUDNN_STATUS_SUCCESS) {
    for (std::int64_t i = 0; i < std::min(count, created); ++i) {
      cudnnBackendKnobType_t type{};
      std::int64_t value = 0;
      std::int64_t n = 0;
      if (cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type) !=
              CUDNN_STATUS_SUCCESS ||
          cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &value) !=
              CUDNN_STATUS_SUCCESS)
        continue;
      const std::string_view name = knob_name(type);
      text += fmt::format("{}{}={}", text.empty() ? "" : " ",
                          name.empty() ? fmt::format("knob{}", static_cast<int>(type)) : std::string(name), value);
    }
  }
  for (std::int64_t i = 0; i < created; ++i) cudnnBackendDestroyDescriptor(choices[i]);
  cudnn_last_error_detail();
  return text;
}

}  // namespace

std::string describe_engine_config(cudnnBackendDescriptor_t config) {
  const std::string knobs = knob_choices(config);
  return fmt::format("engine {}{}{}{}", engine_global_index(config), knobs.empty() ? "" : " {", knobs,
                     knobs.empty() ? "" : "}");
}

ExecutionPlan find_execution_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                                  const PlanSearchOptions& options) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics (mode A)");
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (options.device_properties != nullptr)
    heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, options.device_properties);
  heuristics.finalize();

  std::int64_t available = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
  ExecutionPlan result;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < available; ++i) {
    result.engine_configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, fmt::format("engine config #{}", i));
    raw.push_back(result.engine_configs.back().get());
  }
  std::int64_t returned = 0;
  if (available > 0)
    CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned, raw.data()));
  result.configs_offered = static_cast<int>(returned);
  if (returned == 0) {
    const std::string detail = cudnn_last_error_detail();
    result.rejections = fmt::format("  heuristics mode A offered no engine config{}{}\n", detail.empty() ? "" : ": ",
                                    detail);
    return result;
  }

  for (std::int64_t i = 0; i < returned; ++i) {
    const std::string config = describe_engine_config(raw[i]);
    result.offered += fmt::format("{}#{} {}", i == 0 ? "" : "; ", i, config);
    if (result.plan.get() != nullptr) continue;  // only listing the rest
    if (i < options.first_config) {
      result.rejections += fmt::format("  config #{} ({}): skipped (first config asked for: #{})\n", i, config,
                                       options.first_config);
      continue;
    }
    BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                           fmt::format("execution plan for engine config #{} ({})", i, config));
    // Deprecated in 9.19 like the graph's handle, still accepted, and needed by 9.14.
    if (handle != nullptr) plan.set_handle(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle);
    if (options.device_properties != nullptr)
      plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, options.device_properties);
    plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[i]);
    const cudnnStatus_t status = cudnnBackendFinalize(plan.get());
    if (status != CUDNN_STATUS_SUCCESS) {
      ++result.configs_rejected;
      result.rejections += fmt::format("  config #{} ({}): {}\n", i, config, describe_cudnn_status(status));
      continue;
    }
    std::int64_t count = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         &count, &result.workspace_bytes));
    result.engine_global_index = engine_global_index(raw[i]);
    result.engine_config = config;
    result.config_position = static_cast<int>(i);
    result.plan = std::move(plan);
  }
  return result;
}

std::string execution_plan_json(cudnnBackendDescriptor_t plan) {
  std::int64_t size = 0;
  if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &size,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      size <= 0) {
    cudnn_last_error_detail();
    return {};
  }
  std::string json(static_cast<std::size_t>(size), '\0');
  std::int64_t written = 0;
  if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, size, &written,
                               json.data()) != CUDNN_STATUS_SUCCESS) {
    cudnn_last_error_detail();
    return {};
  }
  json.resize(std::min<std::size_t>(json.size(), static_cast<std::size_t>(std::max<std::int64_t>(written, 0))));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

BackendDescriptor make_variant_pack(const std::vector<std::int64_t>& uids, const std::vector<void*>& pointers,
                                    void* workspace) {
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(pointers.size()),
           pointers.data());
  pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids);
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  return pack;
}

}  // namespace attnprof
