// How much host memory a case may still take: the kernel's estimate of what can be allocated
// without swapping (MemAvailable), so a case that cannot fit is skipped before it allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace attnprof {

// MemAvailable from `meminfo` (a /proc/meminfo text), in bytes; nullopt when it is not there.
std::optional<std::uint64_t> parse_mem_available(const std::string& meminfo);

// This machine's, from /proc/meminfo; nullopt where it cannot be read.
std::optional<std::uint64_t> available_host_memory_bytes();

}  // namespace attnprof
