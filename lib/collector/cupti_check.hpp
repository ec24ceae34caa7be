// CUPTI checking: a failed call becomes a GpuCallError naming the call, file and line.
#pragma once

#include <cupti.h>

#include "core/errors.hpp"

namespace attnprof {

[[noreturn]] void throw_cupti_error(CUptiResult status, const char* call, const char* file, int line);

}  // namespace attnprof

#define CUPTI_CHECK(call)                                                        \
  do {                                                                           \
    const CUptiResult attnprof_status_ = (call);                                 \
    if (attnprof_status_ != CUPTI_SUCCESS)                                       \
      ::attnprof::throw_cupti_error(attnprof_status_, #call, __FILE__, __LINE__); \
  } while (0)
