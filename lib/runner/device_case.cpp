#include "runner/device_case.hpp"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "inputs/inputs.hpp"

namespace attnprof {
namespace {

DeviceBuffer draw(const AttentionProblem& p, std::uint64_t seed, InputTensor tensor, cudaStream_t stream) {
  const DType dtype = input_dtype(p, tensor);
  const std::int64_t count = input_element_count(p, tensor);
  DeviceBuffer buffer(static_cast<std::size_t>(count) * dtype_bytes(dtype));
  const InputRange range = input_range(tensor);
  CUDA_CHECK(kernels::fill_uniform(buffer.get(), dtype, count, seed, tensor, range.low, range.high, stream));
  return buffer;
}

std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

DeviceCase::DeviceCase(const AttentionProblem& problem, std::uint64_t seed, cudaStream_t stream)
    : problem_(problem),
      seed_(seed),
      q_(draw(problem, seed, InputTensor::q, stream)),
      k_(draw(problem, seed, InputTensor::k, stream)),
      v_(draw(problem, seed, InputTensor::v, stream)),
      o_(static_cast<std::size_t>(element_count_q(problem.shape)) * dtype_bytes(problem.dtype)),
      lse_(static_cast<std::size_t>(problem.shape.batch) * problem.shape.heads * problem.shape.seq_q * sizeof(float)),
      bias_(draw(problem, seed, InputTensor::bias, stream)) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

AttentionBuffers DeviceCase::buffers() const {
  AttentionBuffers b;
  b.q = q_.get();
  b.k = k_.get();
  b.v = v_.get();
  b.o = o_.get();
  b.lse = lse_.as<float>();
  b.bias = problem_.has_bias ? bias_.as<float>() : nullptr;
  return b;
}

void DeviceCase::poison_outputs(cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(o_.get(), kPoisonByte, o_.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(lse_.get(), kPoisonByte, lse_.bytes(), stream));
}

OutputRows DeviceCase::read_rows(const std::vector<std::int64_t>& rows, cudaStream_t stream) {
  const AttentionShape& s = problem_.shape;
  const std::int64_t total_rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  for (std::size_t n = 0; n < rows.size(); ++n) {
    if (rows[n] < 0 || rows[n] >= total_rows)
      throw std::invalid_argument(fmt::format("read_rows: row {} is outside [0, {})", rows[n], total_rows));
    if (n > 0 && rows[n] <= rows[n - 1]) throw std::invalid_argument("read_rows: rows must be ascending and distinct");
  }
  // One device buffer, one copy back: [gathered rows | their lse | the NaN/inf scan].
  const auto count = static_cast<std::int64_t>(rows.size());
  const std::size_t row_bytes = static_cast<std::size_t>(s.head_dim) * dtype_bytes(problem_.dtype);
  const std::size_t out_bytes = rows.size() * row_bytes;
  const std::size_t lse_offset = align16(out_bytes);
  const std::size_t scan_offset = align16(lse_offset + rows.size() * sizeof(float));
  const std::size_t total_bytes = scan_offset + sizeof(kernels::NonFiniteElements);
  gathered_.reserve(total_bytes);
  row_index_.reserve(rows.size() * sizeof(std::int64_t));
  auto* gathered = static_cast<std::uint8_t*>(gathered_.get());
  auto* scan = reinterpret_cast<kernels::NonFiniteElements*>(gathered + scan_offset);
  if (count > 0) {
    CUDA_CHECK(cudaMemcpyAsync(row_index_.get(), rows.data(), rows.size() * sizeof(std::int64_t),
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(kernels::gather_rows(o_.get(), static_cast<std::int64_t>(row_bytes), row_index_.as<std::int64_t>(), count,
                                    gathered, stream));
    CUDA_CHECK(kernels::gather_rows(lse_.get(), sizeof(float), row_index_.as<std::int64_t>(), count,
                                    gathered + lse_offset, stream));
  }
  CUDA_CHECK(kernels::count_non_finite(o_.get(), problem_.dtype, element_count_q(s), scan, stream));
  std::vector<std::uint8_t> bytes(total_bytes);
  CUDA_CHECK(cudaMemcpyAsync(bytes.data(), gathered, total_bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  OutputRows got;
  got.rows = rows;
  got.output = decode_elements(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + out_bytes), problem_.dtype);
  got.lse.resize(rows.size());
  if (!rows.empty()) std::memcpy(got.lse.data(), bytes.data() + lse_offset, rows.size() * sizeof(float));
  kernels::NonFiniteElements found;
  std::memcpy(&found, bytes.data() + scan_offset, sizeof(found));
  got.non_finite = static_cast<std::int64_t>(found.count);
  got.first_non_finite = found.count > 0 ? static_cast<std::int64_t>(found.first) : -1;
  return got;
}

std::vector<float> DeviceCase::read_output(cudaStream_t stream) const {
  std::vector<std::uint8_t> bytes(o_.bytes());
  CUDA_CHECK(cudaMemcpyAsync(bytes.data(), o_.get(), bytes.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return decode_elements(bytes, problem_.dtype);
}

std::vector<float> DeviceCase::read_lse(cudaStream_t stream) const {
  std::vector<float> values(lse_.bytes() / sizeof(float));
  CUDA_CHECK(cudaMemcpyAsync(values.data(), lse_.get(), lse_.bytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return values;
}

Verification run_and_verify(AttentionBackend& backend, DeviceCase& device, cudaStream_t stream,
                            const VerifyOptions& options, std::int64_t max_rows) {
  const AttentionProblem& problem = device.problem();
  backend.prepare(problem, stream);
  device.poison_outputs(stream);
  backend.run(problem, device.buffers(), stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const OutputRows got = device.read_rows(rows_to_check(problem.shape, max_rows), stream);
  return verify_attention(problem, device.seed(), got, options);
}

}  // namespace attnprof
