// Error types that cross module boundaries, and the exit codes app/ maps them to.
#pragma once

#include <stdexcept>
#include <string>

namespace attnprof {

// Exit codes of every sub-command (README.md lists them for users).
enum ExitCode : int {
  kExitOk = 0,
  kExitRegression = 1,     // `check` found a regression or a surprise
  kExitUsage = 2,          // bad command line, bad config, unreadable input or unwritable output file
  kExitPartialFailure = 3, // some cases failed or were interrupted; the rest were written
  kExitNoGpu = 4,          // no usable GPU (or no usable CUDA driver)
};

// A failed call into CUDA, CUPTI, cuBLAS or cuDNN. The message names the call, file and line.
class GpuCallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No device the run could use; carries the reason to show the user.
class NoUsableGpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input that is not a config document (e.g. an unknown backend on the command line).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An output file or folder that cannot be created: the path is the user's, so it exits as a
// usage error (2), not as cases that failed (3).
class OutputFileError : public UsageError {
 public:
  using UsageError::UsageError;
};

}  // namespace attnprof
