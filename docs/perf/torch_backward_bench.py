#!/usr/bin/env python3
"""PyTorch's SDPA backward alone at the shapes of configs/backward.json, timed as attnprof times
(CUDA events around each call, median after warm-up): torch.autograd.grad of the output with a
fixed upstream gradient dO, the forward done once outside the timing (retain_graph). TFLOP/s counts
2.5x the forward's FLOPs (FlashAttention's convention; a causal forward counts the exact visible
pairs, as attnprof does). With --compare, the join with attnprof's summary of that config: our
backward against PyTorch's backend of the same family (flash:fa2 and flash:hopper against PyTorch's
flash; cases that did not run, such as flash:hopper at head dim 64, are left out).

Usage: torch_backward_bench.py [--compare SUMMARY.json] [--backends efficient,flash,cudnn]"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sdpa_bench import BACKENDS, time_us  # noqa: E402  (one way of timing for both)

SHAPES = [(2, 16, 4096, 128), (4, 16, 1024, 64), (4, 16, 1024, 128)]


def forward_flops(b, h, s, d, causal):
    pairs = s * (s + 1) // 2 if causal else s * s  # visible (query, key) pairs, top-left causal
    return 4.0 * b * h * d * pairs


def key(b, h, s, d, causal):
    return f"{b}x{h}x{s}x{s}x{d} {'causal' if causal else 'full'}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backends", default="efficient,flash,cudnn")
    parser.add_argument("--compare", help="attnprof summary.json of configs/backward.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch_tflops = {}
    for b, h, s, d in SHAPES:
        for causal in (False, True):
            q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=torch.bfloat16).mul_(2).sub_(1).requires_grad_()
                       for _ in range(3))
            d_o = torch.rand(b, h, s, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
            for name in args.backends.split(","):
                try:
                    with torch.nn.attention.sdpa_kernel(BACKENDS[name]):
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    fn = lambda: torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True)  # noqa: E731
                    us = time_us(fn, args.warmup, args.iters)
                    tflops = 2.5 * forward_flops(b, h, s, d, causal) / us / 1e6
                    torch_tflops[(name, key(b, h, s, d, causal))] = (tflops, us)
                    print(json.dumps({"backend": name, "shape": key(b, h, s, d, causal), "median_us": round(us, 1),
                                      "tflops": round(tflops, 1)}), flush=True)
                    del out
                except RuntimeError as e:
                    print(json.dumps({"backend": name, "shape": key(b, h, s, d, causal),
                                      "error": str(e).splitlines()[0][:200]}), flush=True)
            del q, k, v, d_o
            torch.cuda.empty_cache()
    if args.compare:
        print_comparison(args.compare, torch_tflops)


def print_comparison(summary_path, torch_tflops):
    """Our backward cases beside PyTorch's: torch_tflops maps (PyTorch backend, key) to (TFLOP/s, us)."""
    cases = [c for c in json.load(open(summary_path))["cases"]
             if c["status"] == "ok" and c["problem"].get("pass") == "backward"]
    print("\n| backward | backend | ours us | PyTorch us | ours vs PyTorch (time ratio) | ours TFLOP/s |")
    print("|---|---|---:|---:|---:|---:|")
    for c in cases:
        p = c["problem"]
        causal = p.get("causal", False) not in (False, "none")
        k = key(p["batch"], p["heads"], p["seq_q"], p["head_dim"], causal)
        family = c["backend"].split(":")[0]  # a variant (flash:fa2) against PyTorch's backend of its family
        theirs = torch_tflops.get((family, k))
        if theirs is None:
            continue
        ours_us = c["timing"]["median_us"]
        print(f'| {k} | {c["backend"]} | {ours_us:.1f} | {theirs[1]:.1f} | {theirs[1] / ours_us:.3f}x | '
              f'{c["roofline"]["flops"] / ours_us / 1e6:.1f} |')


if __name__ == "__main__":
    main()
