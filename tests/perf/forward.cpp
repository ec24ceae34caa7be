// attnprof_forward: one backend's forward (or, with --backward, its backward) on one shape, a few
// times, with no CUPTI in the process, so external profilers that need the counters to themselves
// (Nsight Compute, Nsight Systems) can look at exactly the kernels `attnprof run` launches. Used by
// docs/perf/occupancy_vs_ncu.sh.
//   attnprof_forward [--backward] BACKEND BATCH HEADS SEQ_Q SEQ_KV HEAD_DIM [DTYPE=bf16] [CAUSAL=0] [ITERATIONS=1]
//                    [HEADS_KV=HEADS] [ALIGNMENT=top_left|bottom_right] [WINDOW_LEFT=-1] [WINDOW_RIGHT=-1]
// (the workloads the config cannot name yet: GQA, bottom-right masks, sliding windows).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "core/errors.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/device_memory.hpp"
#include "runner/device_case.hpp"

int main(int argc, char** argv) {
  using namespace attnprof;
  // --backward: the forward once (for O and the logsumexp), then ITERATIONS backwards.
  const bool backward = argc > 1 && std::string(argv[1]) == "--backward";
  if (backward) {
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: %s [--backward] BACKEND BATCH HEADS SEQ_Q SEQ_KV HEAD_DIM [DTYPE=bf16] [CAUSAL=0] [ITERATIONS=1]\n"
                 "       [HEADS_KV=HEADS] [ALIGNMENT=top_left|bottom_right] [WINDOW_LEFT=-1] [WINDOW_RIGHT=-1]\n",
                 argv[0]);
    return kExitUsage;
  }
  try {
    AttentionProblem problem;
    problem.shape = {std::stoi(argv[2]), std::stoi(argv[3]), std::stoi(argv[4]), std::stoi(argv[5]),
                     std::stoi(argv[6])};
    if (argc > 7) {
      const auto dtype = parse_dtype(argv[7]);
      if (!dtype) throw UsageError(std::string("unknown dtype ") + argv[7]);
      problem.dtype = *dtype;
    }
    problem.causal = argc > 8 && std::string(argv[8]) != "0";
    const int iterations = argc > 9 ? std::stoi(argv[9]) : 1;
    if (argc > 10) problem.shape.heads_kv = std::stoi(argv[10]);
    if (argc > 11) {
      const std::string alignment = argv[11];
      if (alignment != "top_left" && alignment != "bottom_right")
        throw UsageError("alignment must be top_left or bottom_right, not " + alignment);
      problem.alignment = alignment == "bottom_right" ? MaskAlignment::bottom_right : MaskAlignment::top_left;
    }
    if (argc > 12) problem.window.left = std::stoi(argv[12]);
    if (argc > 13) problem.window.right = std::stoi(argv[13]);
    if (backward) problem.pass = AttentionPass::backward;

    const BackendInfo* info = find_backend(argv[1]);
    if (info == nullptr) throw UsageError(std::string("unknown backend ") + argv[1]);
    require_devices();
    CUDA_CHECK(cudaSetDevice(0));
    const std::unique_ptr<AttentionBackend> backend = info->make();
    if (auto why = backend->check_device(query_device_properties(0))) throw UsageError("cannot run here: " + *why);
    if (auto why = backend->check_problem(problem)) throw UsageError("cannot run this problem: " + *why);
    if (backward)
      if (auto why = backend->check_backward(problem)) throw UsageError("no backward for this problem: " + *why);

    CudaStream stream;
    DeviceCase device_case(problem, 1, stream.get());
    backend->prepare(problem, stream.get());
    if (backward) run_forward_for_backward(*backend, device_case, stream.get());
    for (int i = 0; i < iterations; ++i) {
      if (backward) backend->run_backward(problem, device_case.backward_buffers(), stream.get());
      else backend->run(problem, device_case.buffers(), stream.get());
    }
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    std::printf("%s %s (heads_kv %d, %s, window [%d, %d]): %d %s(s) done\n", argv[1],
                case_label(argv[1], problem).c_str(), problem.shape.kv_heads(),
                problem.is_bottom_right() ? "bottom_right" : "top_left", problem.window.left, problem.window.right,
                iterations, backward ? "backward" : "forward");
    return kExitOk;
  } catch (const NoUsableGpuError& e) {
    std::fprintf(stderr, "attnprof_forward: %s\n", e.what());
    return kExitNoGpu;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attnprof_forward: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnprof_forward: %s\n", e.what());
    return kExitPartialFailure;
  }
}
