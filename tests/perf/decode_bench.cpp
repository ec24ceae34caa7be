// attnprof_decode_bench: flash:fa2's forward on one decode or ragged/paged shape, timed
// with CUDA events around each of many calls (median), reported in GB/s counting Q, K and V read
// once and O written once (each sequence's own lengths). Inputs are uniform in [-1, 1) from the
// device generator (timing only; tests/gpu/decode_test.cpp checks the numbers), the block table a
// shuffled permutation.
//   attnprof_decode_bench BATCH HEADS HEADS_KV SEQ_Q SEQ_KV HEAD_DIM [PAGE_SIZE=0] [KV_LENS=uniform|ragged]
//                         [CAUSAL=none|bottom_right] [ITERATIONS=100] [DTYPE=bf16]
// ragged: sequence b has seq_kv * (b + 1) / batch keys (a spread of lengths, the longest seq_kv)
// and, for a prefill shape, seq_q / seq_kv as many query rows; uniform is the same batch padded.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/errors.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/device_memory.hpp"
#include "inputs/inputs.hpp"

namespace {

using namespace attnprof;

DeviceBuffer upload(const std::vector<int>& values) {
  DeviceBuffer buffer(std::max<std::size_t>(values.size(), 1) * sizeof(int));
  if (!values.empty())
    CUDA_CHECK(cudaMemcpy(buffer.get(), values.data(), values.size() * sizeof(int), cudaMemcpyHostToDevice));
  return buffer;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: %s BATCH HEADS HEADS_KV SEQ_Q SEQ_KV HEAD_DIM [PAGE_SIZE=0] [KV_LENS=uniform|ragged]\n"
                 "       [CAUSAL=none|bottom_right] [ITERATIONS=100] [DTYPE=bf16]\n",
                 argv[0]);
    return kExitUsage;
  }
  try {
    AttentionProblem problem;
    AttentionShape& s = problem.shape;
    s.batch = std::stoi(argv[1]);
    s.heads = std::stoi(argv[2]);
    s.seq_q = std::stoi(argv[4]);
    s.seq_kv = std::stoi(argv[5]);
    s.head_dim = std::stoi(argv[6]);
    s.heads_kv = std::stoi(argv[3]);
    s.page_size = argc > 7 ? std::stoi(argv[7]) : 0;
    const bool ragged = argc > 8 && std::string(argv[8]) == "ragged";
    if (ragged) {
      for (int b = 0; b < s.batch; ++b)
        s.seq_lens_kv.push_back(std::max(1, static_cast<int>(static_cast<long long>(s.seq_kv) * (b + 1) / s.batch)));
      // Decode: every sequence has seq_q query rows; prefill: as many as its keys, scaled.
      for (int b = 0; b < s.batch; ++b)
        s.seq_lens_q.push_back(s.seq_q * s.group_size() <= 16
                                   ? s.seq_q
                                   : std::max(1, static_cast<int>(static_cast<long long>(s.seq_lens_kv[b]) * s.seq_q / s.seq_kv)));
    }
    if (argc > 9 && std::string(argv[9]) == "bottom_right") set_causal_mode(problem, CausalMode::bottom_right);
    const int iterations = argc > 10 ? std::stoi(argv[10]) : 100;
    if (argc > 11) {
      const auto dtype = parse_dtype(argv[11]);
      if (!dtype) throw UsageError(std::string("unknown dtype ") + argv[11]);
      problem.dtype = *dtype;
    }

    require_devices();
    CUDA_CHECK(cudaSetDevice(0));
    const std::unique_ptr<AttentionBackend> backend = find_backend("flash:fa2")->make();
    if (auto why = backend->check_device(query_device_properties(0))) throw UsageError("cannot run here: " + *why);
    if (auto why = backend->check_problem(problem)) throw UsageError("cannot run this problem: " + *why);

    const int bytes_per = dtype_bytes(problem.dtype);
    const std::size_t q_bytes = static_cast<std::size_t>(s.total_q()) * s.heads * s.head_dim * bytes_per;
    const std::size_t kv_tokens = s.paged() ? static_cast<std::size_t>(s.batch) * s.pages_per_sequence() * s.page_size
                                            : static_cast<std::size_t>(s.total_kv());
    const std::size_t kv_bytes = kv_tokens * s.kv_heads() * s.head_dim * bytes_per;
    DeviceBuffer q(q_bytes), k(kv_bytes), v(kv_bytes), o(q_bytes);
    DeviceBuffer lse(static_cast<std::size_t>(s.batch) * s.heads * s.seq_q * sizeof(float));
    // Drawn on the device in each tensor's range, as `attnprof run` draws its inputs (K and V over the
    // whole pool: a paged cache's spare slots too).
    CudaStream stream;
    const auto fill = [&](DeviceBuffer& buffer, std::size_t bytes, InputTensor tensor) {
      const InputRange range = input_range(tensor);
      CUDA_CHECK(kernels::fill_uniform(buffer.get(), problem.dtype, static_cast<std::int64_t>(bytes / bytes_per), 1,
                                       tensor, range.low, range.high, stream.get()));
    };
    fill(q, q_bytes, InputTensor::q);
    fill(k, kv_bytes, InputTensor::k);
    fill(v, kv_bytes, InputTensor::v);

    std::vector<int> lens_q, lens_kv;
    for (int b = 0; b < s.batch; ++b) {
      lens_q.push_back(s.q_len(b));
      lens_kv.push_back(s.kv_len(b));
    }
    std::vector<int> table(static_cast<std::size_t>(s.batch) * s.pages_per_sequence());
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    DeviceBuffer d_lens_q = upload(lens_q), d_lens_kv = upload(lens_kv);
    DeviceBuffer d_cu_q = upload(cumulative_offsets(lens_q)), d_cu_kv = upload(cumulative_offsets(lens_kv));
    DeviceBuffer d_table = upload(table);

    AttentionBuffers buffers;
    buffers.q = q.get();
    buffers.k = k.get();
    buffers.v = v.get();
    buffers.o = o.get();
    buffers.lse = lse.as<float>();
    if (s.ragged()) {
      buffers.seq_lens_q = d_lens_q.as<int>();
      buffers.seq_lens_kv = d_lens_kv.as<int>();
    }
    if (s.packed_q()) buffers.cu_seqlens_q = d_cu_q.as<int>();
    if (s.packed_kv()) buffers.cu_seqlens_kv = d_cu_kv.as<int>();
    if (s.paged()) buffers.block_table = d_table.as<int>();

    backend->prepare(problem, stream.get());
    for (int i = 0; i < 5; ++i) backend->run(problem, buffers, stream.get());
    std::vector<CudaEvent> marks(static_cast<std::size_t>(iterations) + 1);
    CUDA_CHECK(cudaEventRecord(marks[0].get(), stream.get()));
    for (int i = 0; i < iterations; ++i) {
      backend->run(problem, buffers, stream.get());
      CUDA_CHECK(cudaEventRecord(marks[static_cast<std::size_t>(i) + 1].get(), stream.get()));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    std::vector<float> ms(static_cast<std::size_t>(iterations));
    for (int i = 0; i < iterations; ++i)
      CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], marks[static_cast<std::size_t>(i)].get(),
                                      marks[static_cast<std::size_t>(i) + 1].get()));
    std::sort(ms.begin(), ms.end());
    const double median_ms = ms[ms.size() / 2];
    // Q, K, V read once, O written once: the sequences' own tokens, not the pages' slack.
    const double bytes = 2.0 * q_bytes + 2.0 * static_cast<double>(s.total_kv()) * s.kv_heads() * s.head_dim * bytes_per;
    std::printf("flash:fa2 %s %s page=%d kv=%s: median %.2f us  %.0f GB/s  (floor at 4.8 TB/s: %.2f us)\n",
                to_string(problem.dtype).data(), shape_label(s).c_str(), s.page_size, ragged ? "ragged" : "uniform",
                median_ms * 1e3, bytes / (median_ms * 1e-3) / 1e9, bytes / 4.8e12 * 1e6);
    return kExitOk;
  } catch (const NoUsableGpuError& e) {
    std::fprintf(stderr, "attnprof_decode_bench: %s\n", e.what());
    return kExitNoGpu;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attnprof_decode_bench: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnprof_decode_bench: %s\n", e.what());
    return kExitPartialFailure;
  }
}
