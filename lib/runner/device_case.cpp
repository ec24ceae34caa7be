#include "runner/device_case.hpp"

#include <cmath>

namespace attnprof {
namespace {

DeviceBuffer upload(const void* data, std::size_t bytes) {
  DeviceBuffer buffer(bytes);
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(buffer.get(), data, bytes, cudaMemcpyHostToDevice));
  return buffer;
}

}  // namespace

DeviceCase::DeviceCase(const HostInputs& inputs)
    : problem_(inputs.problem),
      q_(upload(inputs.q_bytes.data(), inputs.q_bytes.size())),
      k_(upload(inputs.k_bytes.data(), inputs.k_bytes.size())),
      v_(upload(inputs.v_bytes.data(), inputs.v_bytes.size())),
      o_(static_cast<std::size_t>(element_count_q(inputs.problem.shape)) * dtype_bytes(inputs.problem.dtype)),
      lse_(static_cast<std::size_t>(inputs.problem.shape.batch) * inputs.problem.shape.heads *
           inputs.problem.shape.seq_q * sizeof(float)),
      bias_(upload(inputs.bias.data(), inputs.bias.size() * sizeof(float))) {}

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

Verification run_and_verify(AttentionBackend& backend, const HostInputs& inputs, DeviceCase& device,
                            cudaStream_t stream, bool check_lse) {
  backend.prepare(inputs.problem, stream);
  device.poison_outputs(stream);
  backend.run(inputs.problem, device.buffers(), stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> output = device.read_output(stream);
  if (!check_lse) return verify_attention(inputs, output);
  const std::vector<float> lse = device.read_lse(stream);
  return verify_attention(inputs, output, &lse);
}

}  // namespace attnprof
