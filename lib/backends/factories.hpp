// Constructors of the concrete backends; only the registry calls them.
#pragma once

#include <memory>

#include "backends/backend.hpp"

namespace attnprof {

enum class MaskedFill { out_of_place, in_place };

std::unique_ptr<AttentionBackend> make_math_backend();
std::unique_ptr<AttentionBackend> make_manual_backend(MaskedFill masked_fill);
std::unique_ptr<AttentionBackend> make_efficient_backend();
std::unique_ptr<AttentionBackend> make_flash_backend();         // flash:fa2
std::unique_ptr<AttentionBackend> make_flash_hopper_backend();  // flash:hopper
std::unique_ptr<AttentionBackend> make_cudnn_backend();

}  // namespace attnprof
