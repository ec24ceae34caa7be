#!/usr/bin/env python3
"""PyTorch's SDPA with enable_gqa at the shapes of configs/perf_gqa.json, timed as attnprof times
(CUDA events around each call, median of N after warm-up), and the join with attnprof's summary:
per backend and shape, both medians and the ratio (each variant against PyTorch's backend of its
family: flash:fa2 and flash:hopper both against PyTorch's flash). TFLOP/s are compared through the medians (the
same FLOPs on both sides), so the FLOP convention does not matter.

Usage: torch_gqa_bench.py [--compare SUMMARY.json]   (prints JSON lines, then the table)"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sdpa_bench import BACKENDS, time_us  # noqa: E402  (one way of timing for both)

SHAPES = [(1, 32, 8, 8192, 128), (4, 32, 8, 2048, 128), (1, 32, 32, 8192, 128), (4, 32, 32, 2048, 128)]
def label(b, h, hkv, s, d):
    heads = f"{h}/{hkv}" if hkv != h else f"{h}"
    return f"{b}x{heads}x{s}x{s}x{d}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backends", default="efficient,flash,cudnn")
    parser.add_argument("--compare", help="attnprof summary.json of configs/perf_gqa.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = {}
    for b, h, hkv, s, d in SHAPES:
        q = torch.rand(b, h, s, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
        k, v = (torch.rand(b, hkv, s, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(2))
        for name in args.backends.split(","):
            def fn(backend=BACKENDS[name]):
                with torch.nn.attention.sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hkv != h)
            key = (name, label(b, h, hkv, s, d))
            try:
                rows[key] = time_us(fn, args.warmup, args.iters)
                print(json.dumps({"backend": name, "shape": key[1], "median_us": round(rows[key], 2)}), flush=True)
            except RuntimeError as e:
                print(json.dumps({"backend": name, "shape": key[1], "error": str(e).splitlines()[0][:200]}), flush=True)
        torch.cuda.empty_cache()
    if args.compare:
        print_comparison(args.compare, rows)


def print_comparison(summary_path, rows):
    """Our cases beside PyTorch's: rows maps (PyTorch backend, shape label) to its median us."""
    print("| backend | shape (causal) | attnprof us | attnprof TFLOP/s | PyTorch us | speed-up over PyTorch |")
    print("|---|---|---:|---:|---:|---:|")
    for c in json.load(open(summary_path))["cases"]:
        p = c["problem"]
        shape = label(p["batch"], p["heads"], p.get("heads_kv", p["heads"]), p["seq_q"], p["head_dim"])
        ours = c["timing"]["median_us"] if c["status"] == "ok" else None
        theirs = rows.get((c["backend"].split(":")[0], shape))
        ratio = f"{theirs / ours:.2f}x" if ours and theirs else "-"
        print(f'| {c["backend"]} | {shape} | {ours or "-"} | {c["timing"]["tflops"]:.0f} | '
              f'{round(theirs, 1) if theirs else "-"} | {ratio} |')


if __name__ == "__main__":
    main()
