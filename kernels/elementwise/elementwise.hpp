// Host launchers of the small kernels the math and manual backends are built from. Each is
// one kernel launch, named after the PyTorch operation it stands for, so a trace of these
// backends reads like a trace of the eager PyTorch code they model.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/types.hpp"

namespace attnprof::kernels {

// out = in converted between dtypes (PyTorch: .to(dtype), a direct_copy kernel).
void convert(const void* in, DType in_type, void* out, DType out_type, std::int64_t n, cudaStream_t stream);

// out = in * factor, element type `type` (PyTorch: tensor * scalar).
void scale(const void* in, void* out, DType type, float factor, std::int64_t n, cudaStream_t stream);

// out[i] = value (PyTorch: torch.ones / torch.full / a scalar tensor).
void fill_bool(bool* out, bool value, std::int64_t n, cudaStream_t stream);
void fill_float(float* out, float value, std::int64_t n, cudaStream_t stream);

// out = lower triangle (col <= row) of in, zeros above (PyTorch: .tril()).
void tril(const bool* in, bool* out, int rows, int cols, cudaStream_t stream);

// out = in where col <= row + diagonal, zeros elsewhere (PyTorch: .tril(diagonal)); diagonal 0
// runs the same kernel as tril() above.
void tril(const bool* in, bool* out, int rows, int cols, std::int64_t diagonal, cudaStream_t stream);

// out = in where col >= row + diagonal, zeros elsewhere (PyTorch: .triu(diagonal)).
void triu(const bool* in, bool* out, int rows, int cols, std::int64_t diagonal, cudaStream_t stream);

// out [batch, heads, head_elements] = in [batch, heads_kv, head_elements] with every K/V head
// repeated heads / heads_kv times in place (PyTorch: k.repeat_interleave(heads / heads_kv, dim=1),
// one copy kernel, as math SDPA does for enable_gqa). Throws std::invalid_argument when heads is
// not a multiple of heads_kv.
void repeat_interleave(const void* in, void* out, DType type, int batch, int heads, int heads_kv,
                       std::int64_t head_elements, cudaStream_t stream);

// out [batch, heads_kv, head_elements] = the sum over each K/V head's group of heads / heads_kv
// query heads of in [batch, heads, head_elements], fp32 accumulation: the gradient of
// repeat_interleave(heads / heads_kv, dim=1) above (PyTorch: grad.view(B, Hkv, g, ...).sum(2)).
// Throws std::invalid_argument when heads is not a multiple of heads_kv.
void sum_head_groups(const void* in, void* out, DType type, int batch, int heads, int heads_kv,
                     std::int64_t head_elements, cudaStream_t stream);

// out[i] = cond[i] ? *if_true : *if_false, scalars read from device memory (PyTorch: torch.where).
void where_scalars(const bool* cond, const float* if_true, const float* if_false, float* out, std::int64_t n,
                   cudaStream_t stream);

// attn[m, i] += mask[i] for every matrix m of `matrices` (PyTorch: attn.add_(mask), broadcast).
void add_broadcast(float* attn, const float* mask, std::int64_t matrix_elements, std::int64_t matrices,
                   cudaStream_t stream);

// attn[b, m, i] += masks[b, i] for every batch b and matrix m of matrices_per_mask (PyTorch:
// attn.add_(mask[:, None]), a [batch, 1, L, S] mask broadcast over heads); one kernel launch.
void add_batch_broadcast(float* attn, const float* masks, std::int64_t matrix_elements, int batch,
                         std::int64_t matrices_per_mask, cudaStream_t stream);

// Row-wise softmax over the last dim with fp32 accumulation; in and out of element type `type`.
void softmax_rows(const void* in, void* out, DType type, std::int64_t rows, int cols, cudaStream_t stream);

// Row-wise softmax backward with fp32 accumulation (PyTorch: _softmax_backward_data):
// out[r, c] = probs[r, c] * (grad[r, c] - sum_c' grad[r, c'] * probs[r, c']), where probs is the
// softmax's output; all three of element type `type`. out may be grad (in place).
void softmax_backward_rows(const void* grad, const void* probs, void* out, DType type, std::int64_t rows, int cols,
                           cudaStream_t stream);

// out[i] = in[i] == -inf (PyTorch: torch.isneginf).
void isneginf(const float* in, bool* out, std::int64_t n, cudaStream_t stream);

// out[r] = all(in[r, :]) (PyTorch: .all(dim=-1)).
void all_rows(const bool* in, bool* out, std::int64_t rows, int cols, cudaStream_t stream);

// out[r, c] = row_flag[r] ? *zero : in[r, c] (PyTorch: torch.where(rows, 0, softmax) in _safe_softmax).
void where_rows(const bool* row_flag, const float* zero, const float* in, float* out, std::int64_t rows, int cols,
                cudaStream_t stream);

// In place: data[m, r, c] = value where keep[r, c] is false, for every matrix m
// (PyTorch: attn.masked_fill_(~mask, -inf); element type `type`).
void masked_fill(void* data, DType type, const bool* keep, float value, std::int64_t matrix_elements,
                 std::int64_t matrices, cudaStream_t stream);

// In place, a mask per batch: data[b, m, r, c] = value where keep[b, r, c] is false, for every
// matrix m of `matrices` (PyTorch: attn.masked_fill_(~mask[:, None], -inf)).
void masked_fill_batch(void* data, DType type, const bool* keep, float value, std::int64_t matrix_elements, int batch,
                       std::int64_t matrices, cudaStream_t stream);

}  // namespace attnprof::kernels
