#!/usr/bin/env python3
"""PyTorch's SDPA (enable_gqa) at the decode shapes of configs/perf_decode.json, timed as attnprof
times (CUDA events around each call, median after warm-up), and the join with attnprof's summary of
that config: GB/s per backend and shape (Q, K, V read once, O written once, as GPU.md counts), the
best PyTorch backend, each of our flash variants (flash:fa2, flash:hopper: whichever the summary holds)
and cudnn against it; paged decode against the same backend's contiguous decode; the ragged prefill
batch against the same batch padded.

Usage: torch_decode_bench.py [--compare SUMMARY.json]"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sdpa_bench import BACKENDS, time_us  # noqa: E402  (one way of timing for both)

DECODE = [(8, 32, 8, 32768, 128), (64, 32, 8, 4096, 128), (1, 32, 8, 131072, 128)]


def decode_bytes(b, h, hkv, skv, d, width=2):
    return (2 * b * h * d + 2 * b * hkv * skv * d) * width


def key(b, h, hkv, skv, d):
    return f"{b}x{h}/{hkv}x1x{skv}x{d}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--backends", default="math,efficient,flash,cudnn")
    parser.add_argument("--compare", help="attnprof summary.json of configs/perf_decode.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch_gbps = {}
    for b, h, hkv, skv, d in DECODE:
        q = torch.rand(b, h, 1, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
        k, v = (torch.rand(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(2))
        for name in args.backends.split(","):
            def fn(backend=BACKENDS[name]):
                with torch.nn.attention.sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            try:
                us = time_us(fn, args.warmup, args.iters)
                gbps = decode_bytes(b, h, hkv, skv, d) / us / 1e3
                torch_gbps[(name, key(b, h, hkv, skv, d))] = gbps
                print(json.dumps({"backend": name, "shape": key(b, h, hkv, skv, d), "median_us": round(us, 2),
                                  "gbps": round(gbps)}), flush=True)
            except RuntimeError as e:
                print(json.dumps({"backend": name, "shape": key(b, h, hkv, skv, d),
                                  "error": str(e).splitlines()[0][:200]}), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    if args.compare:
        print_comparison(args.compare, torch_gbps)


def print_comparison(summary_path, torch_gbps):
    """Our decode cases beside PyTorch's: torch_gbps maps (PyTorch backend, shape key) to GB/s."""
    cases = [c for c in json.load(open(summary_path))["cases"] if c["status"] == "ok"]
    # Our backends in the summary's order: every flash variant that ran (flash:fa2, flash:hopper), and cudnn.
    backends = [b for b in dict.fromkeys(c["backend"] for c in cases) if b.split(":")[0] in ("flash", "cudnn")]

    def ours(backend, shape_key, page=None, ragged=False):
        for c in cases:
            p = c["problem"]
            if c["backend"] != backend or p.get("page_size") != page or ("seq_lens_q" in p) != ragged:
                continue
            k = f'{p["batch"]}x{p["heads"]}/{p.get("heads_kv", p["heads"])}x{p["seq_q"]}x{p["seq_kv"]}x{p["head_dim"]}'
            if k == shape_key:
                return c
        return None

    print("\n| decode shape | best PyTorch GB/s | ours | our GB/s | vs best | paged16 / paged64 GB/s (vs contiguous) |")
    print("|---|---:|---|---:|---:|---|")
    for b, h, hkv, skv, d in DECODE:
        k = key(b, h, hkv, skv, d)
        best = max(((g, n) for (n, s), g in torch_gbps.items() if s == k), default=(None, None))
        best_text = f"{best[0]:.0f} ({best[1]})" if best[0] else "-"
        for backend in backends:
            c = ours(backend, k)
            gbps = c["roofline"]["gbps"] if c else None
            paged = []
            for page in (16, 64):
                pc = ours(backend, k, page)
                paged.append(f'{pc["roofline"]["gbps"]:.0f} ({pc["roofline"]["gbps"] / gbps:.2f}x)' if pc and gbps else "-")
            ratio = f"{gbps / best[0]:.3f}x" if gbps and best[0] else "-"
            print(f'| {k} | {best_text} | {backend} | {f"{gbps:.0f}" if gbps else "-"} | {ratio} | {" / ".join(paged)} |')
    for backend in backends:
        ragged = ours(backend, "4x32/8x4096x4096x128", ragged=True)
        padded = ours(backend, "4x32/8x4096x4096x128")
        if ragged and padded:
            print(f'\n{backend} ragged prefill (8000 tokens) {ragged["timing"]["median_us"]:.1f} us vs the batch padded to '
                  f'4x4096 {padded["timing"]["median_us"]:.1f} us: {padded["timing"]["median_us"] / ragged["timing"]["median_us"]:.2f}x')


if __name__ == "__main__":
    main()
