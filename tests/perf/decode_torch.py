#!/usr/bin/env python3
"""PyTorch's SDPA backends on the decode shapes of docs/perf/NOTES.md ("Decode, paged caches and ragged batches"), for the side-by-side
with attnprof_decode_bench in the same run on the same card: bf16, enable_gqa=True, median of CUDA-event
timed calls, GB/s counting Q, K, V read once and O written once.
Usage: decode_torch.py [--backends flash,cudnn,efficient] [B,H,HKV,SQ,SKV,D ...] (default: the three
shapes of issue 19)."""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(8, 32, 8, 1, 32768, 128), (64, 32, 8, 1, 4096, 128), (1, 32, 8, 1, 131072, 128)]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def bench(fn, iterations=100):
    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def shape(text):
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 6 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text}: want B,H,HKV,SQ,SKV,D, six positive integers")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated, of " + ", ".join(BACKENDS))
    parser.add_argument("shapes", nargs="*", type=shape, help="B,H,HKV,SQ,SKV,D")
    args = parser.parse_args()
    chosen = args.backends.split(",")
    unknown = [name for name in chosen if name not in BACKENDS]
    if unknown:
        parser.error("unknown backend " + ", ".join(unknown))
    for b, h, hkv, sq, skv, d in args.shapes or SHAPES:
        q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * (2 * q.numel() + k.numel() + v.numel())
        for name in chosen:
            backend = BACKENDS[name]
            try:
                with sdpa_kernel(backend):
                    ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
                print(f"torch {name:9s} {b}x{h}/{hkv}x{sq}x{skv}x{d}: median {ms * 1e3:.2f} us  "
                      f"{nbytes / (ms * 1e-3) / 1e9:.0f} GB/s", flush=True)
            except Exception as error:  # a backend that has no kernel for the shape
                print(f"torch {name:9s} {b}x{h}/{hkv}x{sq}x{skv}x{d}: no kernel ({str(error)[:80]})", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
