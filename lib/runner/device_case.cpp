#include "runner/device_case.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "core/layout.hpp"
#include "inputs/inputs.hpp"

namespace attnprof {
namespace {

// What the memory records call an input's buffer (sweep/buffer_roles.hpp).
const char* role_of(InputTensor tensor) {
  switch (tensor) {
    case InputTensor::q: return "q";
    case InputTensor::k: return "k";
    case InputTensor::v: return "v";
    case InputTensor::bias: return "bias";
    case InputTensor::grad_o: return "do";
  }
  return "input";
}

DeviceBuffer draw(const AttentionProblem& p, std::uint64_t seed, InputTensor tensor, cudaStream_t stream,
                  const char* role = nullptr) {
  const DType dtype = input_dtype(p, tensor);
  const std::int64_t count = input_element_count(p, tensor);
  DeviceBuffer buffer(static_cast<std::size_t>(count) * dtype_bytes(dtype), role != nullptr ? role : role_of(tensor));
  const InputRange range = input_range(tensor, p.pass);
  CUDA_CHECK(kernels::fill_uniform(buffer.get(), dtype, count, seed, tensor, range.low, range.high, stream));
  return buffer;
}

// Draws `tensor` in its logical order and moves each row to where `targets` says (a packed or
// paged layout), in a buffer of `stored_elements` elements; -1 rows are padding and stay behind.
// A paged pool's slots no row lands in (the tail of a last page, the spare page) hold a finite
// filler, never data a correct kernel reads: keys of 0 (a score as large as the real ones) and
// values far larger than any real one, so a kernel that reads past a sequence's last key is off
// by far more than the bound. Synchronizes `stream` before the scratch goes.
DeviceBuffer draw_stored(const AttentionProblem& p, std::uint64_t seed, InputTensor tensor,
                         const std::vector<std::int64_t>& targets, std::int64_t stored_elements, cudaStream_t stream) {
  const DeviceBuffer logical = draw(p, seed, tensor, stream, "input_scratch");
  const std::int64_t row_bytes = static_cast<std::int64_t>(p.shape.head_dim) * dtype_bytes(p.dtype);
  DeviceBuffer stored(static_cast<std::size_t>(stored_elements) * dtype_bytes(p.dtype), role_of(tensor));
  // Bytes: 0x4747 is bf16 51,000, fp16 7.3, fp32 (0x47474747) 51,015; 0x3c3c bf16 0.0115, fp16 1.06.
  const int filler = tensor == InputTensor::k ? 0x00 : tensor == InputTensor::v ? 0x47 : 0x3c;
  CUDA_CHECK(cudaMemsetAsync(stored.get(), filler, stored.bytes(), stream));
  DeviceBuffer device_targets(targets.size() * sizeof(std::int64_t));
  CUDA_CHECK(cudaMemcpyAsync(device_targets.get(), targets.data(), device_targets.bytes(), cudaMemcpyHostToDevice,
                             stream));
  CUDA_CHECK(kernels::scatter_rows(logical.get(), row_bytes, device_targets.as<std::int64_t>(),
                                   static_cast<std::int64_t>(targets.size()), stored.get(), stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return stored;
}

std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

DeviceCase::DeviceCase(const AttentionProblem& problem, std::uint64_t seed, cudaStream_t stream)
    : problem_(problem), seed_(seed) {
  const AttentionShape& s = problem.shape;
  const int width = dtype_bytes(problem.dtype);
  if (s.packed_q()) {
    cu_q_ = cumulative_offsets(s.seq_lens_q);
    q_ = draw_stored(problem, seed, InputTensor::q, stored_rows_q(s), stored_elements_q(s), stream);
  } else {
    q_ = draw(problem, seed, InputTensor::q, stream);
  }
  if (s.paged() || s.packed_kv()) {
    block_table_ = shuffled_block_table(s, seed);
    const std::vector<std::int64_t> targets = stored_rows_kv(s, block_table_);
    k_ = draw_stored(problem, seed, InputTensor::k, targets, stored_elements_kv(s), stream);
    v_ = draw_stored(problem, seed, InputTensor::v, targets, stored_elements_kv(s), stream);
  } else {
    k_ = draw(problem, seed, InputTensor::k, stream);
    v_ = draw(problem, seed, InputTensor::v, stream);
  }
  o_ = DeviceBuffer(static_cast<std::size_t>(stored_elements_q(s)) * width, "o");
  lse_ = DeviceBuffer(static_cast<std::size_t>(s.batch) * s.heads * s.seq_q * sizeof(float), "lse");
  bias_ = draw(problem, seed, InputTensor::bias, stream);
  if (problem.is_backward()) {
    d_o_ = draw(problem, seed, InputTensor::grad_o, stream);
    dq_ = DeviceBuffer(static_cast<std::size_t>(stored_elements_q(s)) * width, "dq");
    dk_ = DeviceBuffer(static_cast<std::size_t>(stored_elements_kv(s)) * width, "dk");
    dv_ = DeviceBuffer(static_cast<std::size_t>(stored_elements_kv(s)) * width, "dv");
  }

  // The sequence arrays, one int32 buffer: lengths, cumulative offsets, block table.
  std::vector<int> ints;
  auto append = [&](const std::vector<int>& values) {
    const auto offset = static_cast<std::ptrdiff_t>(ints.size());
    ints.insert(ints.end(), values.begin(), values.end());
    return values.empty() ? std::ptrdiff_t{-1} : offset;
  };
  if (s.ragged()) {
    std::vector<int> lens_q(static_cast<std::size_t>(s.batch)), lens_kv(lens_q.size());
    for (int b = 0; b < s.batch; ++b) {
      lens_q[static_cast<std::size_t>(b)] = s.q_len(b);
      lens_kv[static_cast<std::size_t>(b)] = s.kv_len(b);
    }
    lens_q_at_ = append(lens_q);
    lens_kv_at_ = append(lens_kv);
  }
  if (s.packed_q()) cu_q_at_ = append(cu_q_);
  if (s.packed_kv()) cu_kv_at_ = append(cumulative_offsets(s.seq_lens_kv));
  if (s.paged()) table_at_ = append(block_table_);
  if (!ints.empty()) {
    sequences_ = DeviceBuffer(ints.size() * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(sequences_.get(), ints.data(), sequences_.bytes(), cudaMemcpyHostToDevice, stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

double DeviceCase::device_bytes(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  const double width = dtype_bytes(p.dtype);
  const double stored = 2.0 * width * (static_cast<double>(stored_elements_q(s)) + stored_elements_kv(s));
  const double scratch = s.ragged() || s.paged() ? static_cast<double>(std::max(element_count_q(s), element_count_kv(s))) *
                                                       (width + static_cast<double>(sizeof(std::int64_t)) / s.head_dim)
                                                 : 0.0;
  // A backward's dO and dQ like q, dK and dV like k and v.
  const double gradients =
      p.is_backward() ? 2.0 * width * (static_cast<double>(stored_elements_q(s)) + stored_elements_kv(s)) : 0.0;
  return stored + gradients + scratch + 4.0 * s.batch * s.heads * s.seq_q +
         (p.has_bias ? 4.0 * s.seq_q * s.seq_kv : 0.0);
}

AttentionBuffers DeviceCase::buffers() const {
  AttentionBuffers b;
  b.q = q_.get();
  b.k = k_.get();
  b.v = v_.get();
  b.o = o_.get();
  b.lse = lse_.as<float>();
  b.bias = problem_.has_bias ? bias_.as<float>() : nullptr;
  auto at = [&](std::ptrdiff_t offset) -> const int* {
    return offset < 0 ? nullptr : sequences_.as<const int>() + offset;
  };
  b.seq_lens_q = at(lens_q_at_);
  b.seq_lens_kv = at(lens_kv_at_);
  b.cu_seqlens_q = at(cu_q_at_);
  b.cu_seqlens_kv = at(cu_kv_at_);
  b.block_table = at(table_at_);
  return b;
}

BackwardBuffers DeviceCase::backward_buffers() const {
  if (!problem_.is_backward()) throw std::logic_error("backward_buffers: the case is a forward");
  BackwardBuffers b;
  b.q = q_.get();
  b.k = k_.get();
  b.v = v_.get();
  b.o = o_.get();
  b.lse = lse_.as<float>();
  b.d_o = d_o_.get();
  b.dq = dq_.get();
  b.dk = dk_.get();
  b.dv = dv_.get();
  return b;
}

void DeviceCase::poison_gradients(cudaStream_t stream) {
  if (!problem_.is_backward()) throw std::logic_error("poison_gradients: the case is a forward");
  for (DeviceBuffer* gradient : {&dq_, &dk_, &dv_})
    CUDA_CHECK(cudaMemsetAsync(gradient->get(), kPoisonByte, gradient->bytes(), stream));
}

GradientOutputs DeviceCase::read_gradient_rows(const GradientRows& rows, cudaStream_t stream) {
  if (!problem_.is_backward()) throw std::logic_error("read_gradient_rows: the case is a forward");
  const AttentionShape& s = problem_.shape;
  const std::int64_t q_total = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  const std::int64_t kv_total = static_cast<std::int64_t>(s.batch) * s.kv_heads() * s.seq_kv;
  for (std::int64_t r : rows.q_rows)
    if (r < 0 || r >= q_total) throw std::invalid_argument(fmt::format("read_gradient_rows: dQ row {} is outside", r));
  for (std::int64_t r : rows.kv_rows)
    if (r < 0 || r >= kv_total) throw std::invalid_argument(fmt::format("read_gradient_rows: dK/dV row {} is outside", r));
  // One device buffer, one copy back: [dQ rows | dK rows | dV rows | three NaN/inf scans].
  const std::size_t row_bytes = static_cast<std::size_t>(s.head_dim) * dtype_bytes(problem_.dtype);
  const std::size_t q_bytes = rows.q_rows.size() * row_bytes, kv_bytes = rows.kv_rows.size() * row_bytes;
  const std::size_t dk_at = align16(q_bytes), dv_at = align16(dk_at + kv_bytes), scan_at = align16(dv_at + kv_bytes);
  const std::size_t total_bytes = scan_at + 3 * sizeof(kernels::NonFiniteElements);
  std::vector<std::int64_t> index(rows.q_rows);
  index.insert(index.end(), rows.kv_rows.begin(), rows.kv_rows.end());
  gathered_.reserve(total_bytes);
  row_index_.reserve(std::max<std::size_t>(index.size(), 1) * sizeof(std::int64_t));
  auto* gathered = static_cast<std::uint8_t*>(gathered_.get());
  auto* scans = reinterpret_cast<kernels::NonFiniteElements*>(gathered + scan_at);
  if (!index.empty())
    CUDA_CHECK(cudaMemcpyAsync(row_index_.get(), index.data(), index.size() * sizeof(std::int64_t),
                               cudaMemcpyHostToDevice, stream));
  const auto q_count = static_cast<std::int64_t>(rows.q_rows.size());
  const auto kv_count = static_cast<std::int64_t>(rows.kv_rows.size());
  const std::int64_t* kv_index = row_index_.as<std::int64_t>() + q_count;
  if (q_count > 0)
    CUDA_CHECK(kernels::gather_rows(dq_.get(), static_cast<std::int64_t>(row_bytes), row_index_.as<std::int64_t>(),
                                    q_count, gathered, stream));
  if (kv_count > 0) {
    CUDA_CHECK(kernels::gather_rows(dk_.get(), static_cast<std::int64_t>(row_bytes), kv_index, kv_count,
                                    gathered + dk_at, stream));
    CUDA_CHECK(kernels::gather_rows(dv_.get(), static_cast<std::int64_t>(row_bytes), kv_index, kv_count,
                                    gathered + dv_at, stream));
  }
  CUDA_CHECK(kernels::count_non_finite(dq_.get(), problem_.dtype, stored_elements_q(s), scans + 0, stream));
  CUDA_CHECK(kernels::count_non_finite(dk_.get(), problem_.dtype, stored_elements_kv(s), scans + 1, stream));
  CUDA_CHECK(kernels::count_non_finite(dv_.get(), problem_.dtype, stored_elements_kv(s), scans + 2, stream));
  std::vector<std::uint8_t> bytes(total_bytes);
  CUDA_CHECK(cudaMemcpyAsync(bytes.data(), gathered, total_bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  GradientOutputs got;
  got.rows = rows;
  auto decode = [&](std::size_t at, std::size_t count) {
    return decode_elements(std::vector<std::uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                                     bytes.begin() + static_cast<std::ptrdiff_t>(at + count)),
                           problem_.dtype);
  };
  got.dq = decode(0, q_bytes);
  got.dk = decode(dk_at, kv_bytes);
  got.dv = decode(dv_at, kv_bytes);
  kernels::NonFiniteElements found[3];
  std::memcpy(found, bytes.data() + scan_at, sizeof(found));
  const char* names[3] = {"dQ", "dK", "dV"};
  for (int t = 0; t < 3; ++t) {
    got.non_finite += static_cast<std::int64_t>(found[t].count);
    if (found[t].count > 0 && got.first_non_finite.empty())
      got.first_non_finite = fmt::format("{} element {}", names[t], found[t].first);
  }
  return got;
}

std::vector<float> DeviceCase::read_gradients(cudaStream_t stream) const {
  if (!problem_.is_backward()) throw std::logic_error("read_gradients: the case is a forward");
  std::vector<float> all;
  for (const DeviceBuffer* gradient : {&dq_, &dk_, &dv_}) {
    std::vector<std::uint8_t> bytes(gradient->bytes());
    CUDA_CHECK(cudaMemcpyAsync(bytes.data(), gradient->get(), bytes.size(), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> values = decode_elements(bytes, problem_.dtype);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

bool DeviceCase::keep_gradients(cudaStream_t stream) {
  if (!problem_.is_backward()) throw std::logic_error("keep_gradients: the case is a forward");
  // The backend's workspace exists by now (the verified backward ran); the margin leaves room for
  // one it allocates per call.
  constexpr std::size_t kMarginBytes = std::size_t{512} << 20;
  const std::size_t bytes = dq_.bytes() + dk_.bytes() + dv_.bytes();
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes + kMarginBytes > free_bytes) return false;
  kept_gradients_ = DeviceBuffer(bytes);
  auto* kept = kept_gradients_.as<std::uint8_t>();
  for (const DeviceBuffer* gradient : {&dq_, &dk_, &dv_}) {
    CUDA_CHECK(cudaMemcpyAsync(kept, gradient->get(), gradient->bytes(), cudaMemcpyDeviceToDevice, stream));
    kept += gradient->bytes();
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return true;
}

GradientRepeatability DeviceCase::compare_with_kept(cudaStream_t stream) {
  if (kept_gradients_.get() == nullptr) throw std::logic_error("compare_with_kept: no gradients were kept");
  // Chunks of 32 MiB each way: host memory stays small whatever the problem's size.
  constexpr std::size_t kChunkBytes = std::size_t{32} << 20;
  const int width = dtype_bytes(problem_.dtype);
  const std::size_t chunk_bytes = kChunkBytes / static_cast<std::size_t>(width) * static_cast<std::size_t>(width);
  std::vector<std::uint8_t> now(chunk_bytes), before(chunk_bytes);
  GradientRepeatability result;
  result.checked = true;
  const auto* kept = kept_gradients_.as<const std::uint8_t>();
  const DeviceBuffer* gradients[3] = {&dq_, &dk_, &dv_};
  for (std::size_t t = 0; t < 3; ++t) {
    const auto* current = static_cast<const std::uint8_t*>(gradients[t]->get());
    const std::size_t bytes = gradients[t]->bytes();
    result.elements[t] = static_cast<std::int64_t>(bytes / static_cast<std::size_t>(width));
    for (std::size_t at = 0; at < bytes; at += chunk_bytes) {
      const std::size_t n = std::min(chunk_bytes, bytes - at);
      CUDA_CHECK(cudaMemcpyAsync(now.data(), current + at, n, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaMemcpyAsync(before.data(), kept + at, n, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      result.differing[t] +=
          count_bitwise_differences(now.data(), before.data(), static_cast<std::int64_t>(n) / width, width);
    }
    kept += bytes;
  }
  kept_gradients_ = DeviceBuffer();
  return result;
}

void DeviceCase::poison_outputs(cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(o_.get(), kPoisonByte, o_.bytes(), stream));
  CUDA_CHECK(cudaMemsetAsync(lse_.get(), kPoisonByte, lse_.bytes(), stream));
}

OutputRows DeviceCase::read_rows(const std::vector<std::int64_t>& rows, cudaStream_t stream) {
  const AttentionShape& s = problem_.shape;
  const std::int64_t total_rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  // [where each row is stored in o | the logical rows, for the padded lse]
  std::vector<std::int64_t> index(2 * rows.size());
  for (std::size_t n = 0; n < rows.size(); ++n) {
    if (rows[n] < 0 || rows[n] >= total_rows)
      throw std::invalid_argument(fmt::format("read_rows: row {} is outside [0, {})", rows[n], total_rows));
    if (n > 0 && rows[n] <= rows[n - 1]) throw std::invalid_argument("read_rows: rows must be ascending and distinct");
    index[n] = stored_row_q(s, cu_q_, rows[n]);
    if (index[n] < 0)
      throw std::invalid_argument(fmt::format("read_rows: row {} is padding of a ragged sequence", rows[n]));
    index[rows.size() + n] = rows[n];
  }
  // One device buffer, one copy back: [gathered rows | their lse | the NaN/inf scan].
  const auto count = static_cast<std::int64_t>(rows.size());
  const std::size_t row_bytes = static_cast<std::size_t>(s.head_dim) * dtype_bytes(problem_.dtype);
  const std::size_t out_bytes = rows.size() * row_bytes;
  const std::size_t lse_offset = align16(out_bytes);
  const std::size_t scan_offset = align16(lse_offset + rows.size() * sizeof(float));
  const std::size_t total_bytes = scan_offset + sizeof(kernels::NonFiniteElements);
  gathered_.reserve(total_bytes);
  row_index_.reserve(index.size() * sizeof(std::int64_t));
  auto* gathered = static_cast<std::uint8_t*>(gathered_.get());
  auto* scan = reinterpret_cast<kernels::NonFiniteElements*>(gathered + scan_offset);
  if (count > 0) {
    CUDA_CHECK(cudaMemcpyAsync(row_index_.get(), index.data(), index.size() * sizeof(std::int64_t),
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(kernels::gather_rows(o_.get(), static_cast<std::int64_t>(row_bytes), row_index_.as<std::int64_t>(), count,
                                    gathered, stream));
    CUDA_CHECK(kernels::gather_rows(lse_.get(), sizeof(float), row_index_.as<std::int64_t>() + count, count,
                                    gathered + lse_offset, stream));
  }
  CUDA_CHECK(kernels::count_non_finite(o_.get(), problem_.dtype, stored_elements_q(s), scan, stream));
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

void run_forward_for_backward(AttentionBackend& backend, DeviceCase& device, cudaStream_t stream) {
  device.poison_outputs(stream);
  backend.run(device.problem(), device.buffers(), stream);
}

Verification run_and_verify(AttentionBackend& backend, DeviceCase& device, cudaStream_t stream,
                            const VerifyOptions& options, std::int64_t max_rows) {
  const AttentionProblem& problem = device.problem();
  backend.prepare(problem, stream);
  if (problem.is_backward()) {
    run_forward_for_backward(backend, device, stream);
    device.poison_gradients(stream);
    backend.run_backward(problem, device.backward_buffers(), stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const GradientOutputs got = device.read_gradient_rows(gradient_rows_to_check(problem.shape, max_rows), stream);
    return verify_gradients(problem, device.seed(), got, options);
  }
  device.poison_outputs(stream);
  backend.run(problem, device.buffers(), stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const OutputRows got = device.read_rows(rows_to_check(problem.shape, max_rows), stream);
  return verify_attention(problem, device.seed(), got, options);
}

}  // namespace attnprof
