// Inputs drawn on the GPU: bit for bit what the CPU generator gives, for every dtype, odd
// counts, unaligned destinations and both ranges; a fill of 1 G elements (its bandwidth printed,
// not asserted); DeviceCase's inputs; read_rows' gather and whole-output NaN/inf scan.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/counter_random.hpp"
#include "core/layout.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "inputs/inputs.hpp"
#include "reference/inputs.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

// The storage bits the CPU generator gives element i: 2 or 4 bytes, little endian.
std::uint32_t cpu_bits(std::uint64_t seed, InputTensor tensor, DType dtype, std::uint64_t i) {
  const InputRange range = input_range(tensor);
  const float value = uniform_input(input_stream(seed, tensor), i, range.low, range.high);
  return dtype == DType::fp32 ? counter_random::float_bits(value) : round_to_half_bits(dtype, value);
}

std::uint32_t element_at(const std::vector<std::uint8_t>& bytes, DType dtype, std::int64_t i) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, bytes.data() + i * dtype_bytes(dtype), static_cast<std::size_t>(dtype_bytes(dtype)));
  return bits;
}

std::vector<std::uint8_t> fill_and_read(DType dtype, std::int64_t count, std::uint64_t seed, InputTensor tensor,
                                        std::size_t byte_offset, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_bytes(dtype);
  DeviceBuffer buffer(bytes + byte_offset + 16);
  // Guard bytes around the tensor: the fill must write exactly [0, count).
  CUDA_CHECK(cudaMemsetAsync(buffer.get(), 0xa5, buffer.bytes(), stream));
  auto* dst = static_cast<std::uint8_t*>(buffer.get()) + byte_offset;
  const InputRange range = input_range(tensor);
  CUDA_CHECK(kernels::fill_uniform(dst, dtype, count, seed, tensor, range.low, range.high, stream));
  std::vector<std::uint8_t> all(buffer.bytes());
  CUDA_CHECK(cudaMemcpyAsync(all.data(), buffer.get(), all.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::size_t b = 0; b < byte_offset; ++b) EXPECT_EQ(all[b], 0xa5) << "written before the tensor";
  for (std::size_t b = byte_offset + bytes; b < all.size(); ++b) EXPECT_EQ(all[b], 0xa5) << "written past the tensor";
  return {all.begin() + static_cast<std::ptrdiff_t>(byte_offset),
          all.begin() + static_cast<std::ptrdiff_t>(byte_offset + bytes)};
}

TEST(Inputs, GpuFillEqualsTheCpuGeneratorBitForBit) {
  CudaStream stream;
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
    for (InputTensor tensor : {InputTensor::q, InputTensor::k, InputTensor::v, InputTensor::bias})
      for (std::int64_t count : {1, 2, 7, 8, 9, 17, 33, 1000, 4097, 1000003})
        for (std::size_t offset : {std::size_t{0}, std::size_t{4}}) {  // 16-byte packs, and the scalar path
          const std::uint64_t seed = 0x5eed0000u + static_cast<std::uint64_t>(count);
          const std::vector<std::uint8_t> got = fill_and_read(dtype, count, seed, tensor, offset, stream.get());
          std::int64_t mismatches = 0, first = -1;
          for (std::int64_t i = 0; i < count; ++i)
            if (element_at(got, dtype, i) != cpu_bits(seed, tensor, dtype, static_cast<std::uint64_t>(i))) {
              if (first < 0) first = i;
              ++mismatches;
            }
          EXPECT_EQ(mismatches, 0) << to_string(dtype) << " tensor " << static_cast<int>(tensor) << " count " << count
                                   << " offset " << offset << ": first mismatch at " << first;
        }
}

TEST(Inputs, FillsOneGigaElementAndSaysHowFast) {
  CudaStream stream;
  const std::int64_t count = 1LL << 30;
  for (DType dtype : {DType::bf16, DType::fp32}) {
    const std::size_t bytes = static_cast<std::size_t>(count) * dtype_bytes(dtype);
    DeviceBuffer buffer(bytes);
    CudaEvent start, stop;
    CUDA_CHECK(kernels::fill_uniform(buffer.get(), dtype, count, 1, InputTensor::k, -1.f, 1.f, stream.get()));  // warm
    CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
    CUDA_CHECK(kernels::fill_uniform(buffer.get(), dtype, count, 2, InputTensor::k, -1.f, 1.f, stream.get()));
    CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const double ms = elapsed_ms(start, stop);
    std::printf("  fill_uniform %s: %lld elements, %.2f GB in %.3f ms = %.0f GB/s\n", std::string(to_string(dtype)).c_str(),
                static_cast<long long>(count), bytes / 1e9, ms, bytes / 1e6 / ms);
    RecordProperty(std::string("fill_GBps_") + std::string(to_string(dtype)), static_cast<int>(bytes / 1e6 / ms));
    // Spot checks across the whole range, the last element included.
    std::mt19937_64 pick(7);
    std::vector<std::int64_t> indices = {0, 1, count / 2, count - 2, count - 1};
    for (int n = 0; n < 1000; ++n) indices.push_back(static_cast<std::int64_t>(pick() % static_cast<std::uint64_t>(count)));
    for (std::int64_t i : indices) {
      std::uint32_t bits = 0;
      CUDA_CHECK(cudaMemcpy(&bits, static_cast<std::uint8_t*>(buffer.get()) + i * dtype_bytes(dtype),
                            static_cast<std::size_t>(dtype_bytes(dtype)), cudaMemcpyDeviceToHost));
      ASSERT_EQ(bits, cpu_bits(2, InputTensor::k, dtype, static_cast<std::uint64_t>(i))) << "element " << i;
    }
  }
}

AttentionProblem gqa_problem(DType dtype) {
  AttentionProblem p;
  p.shape = {2, 8, 33, 17, 40, 2};
  p.dtype = dtype;
  p.has_bias = true;
  return p;
}

TEST(Inputs, DeviceCaseHoldsTheGeneratedTensors) {
  CudaStream stream;
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32}) {
    const AttentionProblem p = gqa_problem(dtype);
    DeviceCase device(p, 77, stream.get());
    const AttentionBuffers buffers = device.buffers();
    const std::pair<InputTensor, const void*> tensors[] = {
        {InputTensor::q, buffers.q}, {InputTensor::k, buffers.k}, {InputTensor::v, buffers.v}, {InputTensor::bias, buffers.bias}};
    for (const auto& [tensor, pointer] : tensors) {
      const DType stored = input_dtype(p, tensor);
      const std::int64_t count = input_element_count(p, tensor);
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count) * dtype_bytes(stored));
      CUDA_CHECK(cudaMemcpy(bytes.data(), pointer, bytes.size(), cudaMemcpyDeviceToHost));
      const std::vector<float> got = decode_elements(bytes, stored);
      std::vector<float> expected(static_cast<std::size_t>(count));
      generate_input(p, 77, tensor, 0, count, expected.data());
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << to_string(dtype) << " tensor " << static_cast<int>(tensor);
    }
  }
}

std::vector<int> read_ints(const int* device, std::size_t count) {
  std::vector<int> values(count);
  CUDA_CHECK(cudaMemcpy(values.data(), device, count * sizeof(int), cudaMemcpyDeviceToHost));
  return values;
}

// A ragged, paged case holds the same values as its dense twin, each row where the layout puts
// it: packed q through the cumulative offsets, paged k/v through the block table read back from
// the device; the sequence arrays are the shape's.
TEST(Inputs, RaggedAndPagedCasesHoldEachLogicalRowWhereTheLayoutSays) {
  CudaStream stream;
  for (int page_size : {0, 16}) {
    AttentionProblem p;
    p.shape = {3, 8, 33, 40, 64, 2};
    p.shape.seq_lens_q = {1, 17, 33};
    p.shape.seq_lens_kv = {40, 1, 17};
    p.shape.page_size = page_size;
    p.dtype = DType::bf16;
    DeviceCase device(p, 91, stream.get());
    const AttentionBuffers b = device.buffers();
    const AttentionShape& s = p.shape;
    ASSERT_NE(b.seq_lens_q, nullptr);
    ASSERT_NE(b.cu_seqlens_q, nullptr);
    EXPECT_EQ(read_ints(b.seq_lens_q, 3), (std::vector<int>{1, 17, 33}));
    EXPECT_EQ(read_ints(b.seq_lens_kv, 3), (std::vector<int>{40, 1, 17}));
    EXPECT_EQ(read_ints(b.cu_seqlens_q, 4), (std::vector<int>{0, 1, 18, 51}));
    std::vector<int> table;
    if (page_size > 0) {
      ASSERT_EQ(b.cu_seqlens_kv, nullptr);
      ASSERT_NE(b.block_table, nullptr);
      table = read_ints(b.block_table, static_cast<std::size_t>(3 * s.pages_per_sequence()));
      EXPECT_EQ(table, shuffled_block_table(s, 91));
    } else {
      ASSERT_NE(b.cu_seqlens_kv, nullptr);
      EXPECT_EQ(read_ints(b.cu_seqlens_kv, 4), (std::vector<int>{0, 40, 41, 58}));
      EXPECT_EQ(b.block_table, nullptr);
    }
    const int d = s.head_dim;
    auto check = [&](InputTensor tensor, const void* pointer, std::int64_t stored_elements,
                     const std::vector<std::int64_t>& targets) {
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(stored_elements) * 2);
      CUDA_CHECK(cudaMemcpy(bytes.data(), pointer, bytes.size(), cudaMemcpyDeviceToHost));
      const std::vector<float> got = decode_elements(bytes, p.dtype);
      std::vector<float> row(static_cast<std::size_t>(d));
      int checked = 0;
      for (std::size_t logical = 0; logical < targets.size(); ++logical) {
        if (targets[logical] < 0) continue;
        generate_input(p, 91, tensor, static_cast<std::int64_t>(logical) * d, d, row.data());
        ASSERT_EQ(std::memcmp(got.data() + targets[logical] * d, row.data(), row.size() * sizeof(float)), 0)
            << "tensor " << static_cast<int>(tensor) << " logical row " << logical << " page size " << page_size;
        ++checked;
      }
      EXPECT_GT(checked, 0);
    };
    check(InputTensor::q, b.q, stored_elements_q(s), stored_rows_q(s));
    const std::vector<std::int64_t> kv_rows = stored_rows_kv(s, table);
    check(InputTensor::k, b.k, stored_elements_kv(s), kv_rows);
    check(InputTensor::v, b.v, stored_elements_kv(s), kv_rows);
    // read_rows finds a ragged row in the packed output, and refuses padding.
    EXPECT_THROW(device.read_rows({1}, stream.get()), std::invalid_argument);
    const OutputRows rows = device.read_rows({0, (1 * 8 + 3) * 33 + 16}, stream.get());
    EXPECT_EQ(rows.output.size(), static_cast<std::size_t>(2 * d));
  }
}

TEST(Inputs, ReadRowsGathersTheRowsAndScansTheWholeOutput) {
  CudaStream stream;
  for (DType dtype : {DType::bf16, DType::fp32}) {
    const AttentionProblem p = gqa_problem(dtype);
    DeviceCase device(p, 5, stream.get());
    const AttentionBuffers buffers = device.buffers();
    const std::int64_t elements = element_count_q(p.shape);
    const std::int64_t rows_total = elements / p.shape.head_dim;
    // Output element i holds i (exact in bf16 below 256; the pattern repeats), lse[r] = r + 0.5.
    std::vector<float> values(static_cast<std::size_t>(elements));
    for (std::int64_t i = 0; i < elements; ++i) values[i] = static_cast<float>(i % 256);
    std::vector<std::uint8_t> stored(values.size() * dtype_bytes(dtype));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t bits = dtype == DType::fp32 ? counter_random::float_bits(values[i])
                                                      : round_to_half_bits(dtype, values[i]);
      std::memcpy(stored.data() + i * dtype_bytes(dtype), &bits, static_cast<std::size_t>(dtype_bytes(dtype)));
    }
    std::vector<float> lse(static_cast<std::size_t>(rows_total));
    for (std::int64_t r = 0; r < rows_total; ++r) lse[r] = static_cast<float>(r) + 0.5f;
    CUDA_CHECK(cudaMemcpy(buffers.o, stored.data(), stored.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(buffers.lse, lse.data(), lse.size() * sizeof(float), cudaMemcpyHostToDevice));

    const std::vector<std::int64_t> rows = rows_to_check(p.shape, 50);
    OutputRows got = device.read_rows(rows, stream.get());
    ASSERT_EQ(got.rows, rows);
    ASSERT_EQ(got.output.size(), rows.size() * 40);
    ASSERT_EQ(got.lse.size(), rows.size());
    for (std::size_t n = 0; n < rows.size(); ++n) {
      EXPECT_EQ(got.lse[n], lse[rows[n]]);
      for (int c = 0; c < 40; ++c) ASSERT_EQ(got.output[n * 40 + c], values[rows[n] * 40 + c]) << rows[n] << "," << c;
    }
    EXPECT_EQ(got.non_finite, 0);
    EXPECT_EQ(got.first_non_finite, -1);

    // Two NaNs and an infinity outside every checked row still show up; poison everywhere is all of it.
    const std::int64_t unchecked = [&] {
      for (std::int64_t r = 0;; ++r)
        if (!std::binary_search(rows.begin(), rows.end(), r)) return r;
    }();
    const std::int64_t bad[] = {unchecked * 40 + 7, unchecked * 40 + 8, elements - 1};
    const std::uint32_t bad_bits[] = {dtype == DType::fp32 ? 0x7fc00000u : 0x7fc0u,
                                      dtype == DType::fp32 ? 0xff800000u : 0xff80u,
                                      dtype == DType::fp32 ? 0x7f800000u : 0x7f80u};
    for (int n = 0; n < 3; ++n)
      CUDA_CHECK(cudaMemcpy(static_cast<std::uint8_t*>(buffers.o) + bad[n] * dtype_bytes(dtype), &bad_bits[n],
                            static_cast<std::size_t>(dtype_bytes(dtype)), cudaMemcpyHostToDevice));
    got = device.read_rows(rows, stream.get());
    EXPECT_EQ(got.non_finite, 3);
    EXPECT_EQ(got.first_non_finite, bad[0]);
    device.poison_outputs(stream.get());
    got = device.read_rows(rows, stream.get());
    EXPECT_EQ(got.non_finite, elements);
    EXPECT_EQ(got.first_non_finite, 0);
    EXPECT_THROW(device.read_rows({3, 2}, stream.get()), std::invalid_argument);
    EXPECT_TRUE(device.read_rows({}, stream.get()).output.empty());
  }
}

}  // namespace
}  // namespace attnprof
