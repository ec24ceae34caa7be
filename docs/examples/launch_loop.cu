// launch_loop: a CUDA program for `attnprof profile` to watch.
//
//   launch_loop [--launches N] [--repeats R]     time R loops of N tiny kernel launches (host
//                                                 clock around the loop + cudaDeviceSynchronize,
//                                                 and how long the launches alone took to issue)
//   launch_loop --test-pattern [--exit-code K] [--spawn-child] [--fork-child]
//               [--ready-file F --sleep-ms MS]   known work in NVTX ranges, for tests
//
// The timed loop is the overhead benchmark of docs/perf/profile_overhead.sh: the same binary
// runs unprofiled and under `attnprof profile`, and the ratio of the two medians is the cost of
// recording every launch. The test pattern is what tests/gpu/profile_test.cpp checks:
//   - one kernel before any range (not counted),
//   - range "step" three times: 2 kernels, 1 device-to-device memcpy, 1 memset each, with a
//     nested range "inner" that must not become a case of its own,
//   - range "other" once: 1 kernel.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    const cudaError_t status_ = (call);                                                              \
    if (status_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "launch_loop: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,       \
                   cudaGetErrorString(status_));                                                     \
      std::exit(99);                                                                                 \
    }                                                                                                \
  } while (0)

__global__ void tiny_kernel(float* data) { data[threadIdx.x] += 1.0f; }
__global__ void scale_kernel(float* data, float by, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= by;
}

namespace {

struct Options {
  long launches = 10000;
  int repeats = 5;
  bool test_pattern = false;
  int exit_code = 0;
  bool spawn_child = false;
  bool fork_child = false;
  bool is_child = false;
  std::string ready_file;
  int sleep_ms = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "launch_loop: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--launches") o.launches = std::stol(value());
    else if (a == "--repeats") o.repeats = std::stoi(value());
    else if (a == "--test-pattern") o.test_pattern = true;
    else if (a == "--exit-code") o.exit_code = std::stoi(value());
    else if (a == "--spawn-child") o.spawn_child = true;
    else if (a == "--fork-child") o.fork_child = true;
    else if (a == "--child") o.is_child = true;
    else if (a == "--ready-file") o.ready_file = value();
    else if (a == "--sleep-ms") o.sleep_ms = std::stoi(value());
    else {
      std::fprintf(stderr, "launch_loop: unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

void timed_loops(const Options& o) {
  float* data = nullptr;
  CHECK(cudaMalloc(&data, 32 * sizeof(float)));
  // Warm-up: module loading, CUPTI's first buffers, clocks.
  for (int i = 0; i < 200; ++i) tiny_kernel<<<1, 32>>>(data);
  CHECK(cudaDeviceSynchronize());
  std::vector<double> ms, enqueue_ms;
  for (int r = 0; r < o.repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < o.launches; ++i) tiny_kernel<<<1, 32>>>(data);
    CHECK(cudaGetLastError());
    const auto enqueued = std::chrono::steady_clock::now();
    CHECK(cudaDeviceSynchronize());
    const auto end = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    enqueue_ms.push_back(std::chrono::duration<double, std::milli>(enqueued - start).count());
  }
  const auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double median = median_of(ms);
  std::printf("launch_loop: %ld launches: median %.3f ms (%.3f us/launch) over %d repeats [", o.launches, median,
              1000.0 * median / static_cast<double>(o.launches), o.repeats);
  for (std::size_t i = 0; i < ms.size(); ++i) std::printf("%s%.3f", i ? " " : "", ms[i]);
  // The host's share: the launches alone, before the final synchronize. Near the total, the loop
  // is bound by the host's launch path; well below it, by the GPU working through the kernels.
  std::printf("] ms; launches issued in %.3f ms\n", median_of(enqueue_ms));
  CHECK(cudaFree(data));
}

void test_pattern(const Options& o) {
  constexpr int n = 1 << 16;
  float *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  if (o.is_child) {
    nvtxRangePushA("child step");
    scale_kernel<<<n / 256, 256, 0, stream>>>(a, 2.f, n);
    nvtxRangePop();
  } else {
    tiny_kernel<<<1, 32, 0, stream>>>(a);  // outside every range
    for (int i = 0; i < 3; ++i) {
      nvtxRangePushA("step");
      nvtxRangePushA("inner");
      scale_kernel<<<n / 256, 256, 0, stream>>>(a, 1.5f, n);
      nvtxRangePop();
      CHECK(cudaMemcpyAsync(b, a, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      CHECK(cudaMemsetAsync(a, 0, n * sizeof(float), stream));
      tiny_kernel<<<1, 32, 0, stream>>>(b);
      nvtxRangePop();
    }
    nvtxRangePushA("other");
    scale_kernel<<<n / 256, 256, 0, stream>>>(b, 0.5f, n);
    nvtxRangePop();
  }
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));

  if (o.spawn_child) {
    // A second process that also uses CUDA: it inherits the injection and writes its own profile.
    char self[4096] = {};
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) std::exit(98);
    char arg1[] = "--test-pattern", arg2[] = "--child";
    char* child_argv[] = {self, arg1, arg2, nullptr};
    pid_t child = 0;
    if (posix_spawn(&child, self, nullptr, nullptr, child_argv, environ) != 0) std::exit(97);
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::exit(96);
  }
  if (o.fork_child) {
    // fork() without exec after CUDA is up: the child must exit without touching CUPTI (a flush
    // there can hang) and without writing a profile of its own.
    const pid_t child = fork();
    if (child == 0) std::exit(0);
    int status = 0;
    waitpid(child, &status, 0);
  }
  if (!o.ready_file.empty()) std::ofstream(o.ready_file) << "ready\n";
  if (o.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.sleep_ms));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.test_pattern) test_pattern(o);
  else timed_loops(o);
  return o.exit_code;
}
