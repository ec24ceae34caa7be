#!/usr/bin/env python3
"""PyTorch's SDPA backends timed the way attnprof times its own (CUDA events around each call,
median of N after warm-up), at the shapes of configs/perf_h200*.json, so both run side by side
in one run. PyTorch is only the yardstick; attnprof does not depend on it.

Prints one JSON object per line: {"backend", "shape", "causal", "median_us", "tflops"}.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(4, 16, 1024, 64), (4, 16, 1024, 128), (2, 16, 4096, 128), (1, 16, 16384, 128)]
BACKENDS = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def manual(q, k, v, causal):
    attn = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        attn.masked_fill_(~mask, float("-inf"))
    return attn.softmax(-1) @ v


def time_us(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        stops[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, stops))


def kernel_time_us(fn, calls=10):
    """GPU kernel time per call and kernel names, from torch.profiler (host overhead excluded)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total, names = 0.0, {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total += e.device_time
            names[e.name] = names.get(e.name, 0) + 1
    return total / calls, {n: c / calls for n, c in names.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel-times", action="store_true",
                        help="also report GPU kernel time per call from torch.profiler")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backends", default="math,manual,efficient,flash,cudnn")
    args = parser.parse_args()
    torch.manual_seed(0)
    for b, h, s, d in SHAPES:
        q, k, v = (torch.rand(b, h, s, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(3))
        for causal in (False, True):
            flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            for name in args.backends.split(","):
                if name in ("math", "manual") and s > 4096:
                    continue  # the score matrix alone is tens of GB
                if name == "manual":
                    fn = lambda: manual(q, k, v, causal)
                else:
                    def fn(backend=BACKENDS[name]):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    us = time_us(fn, args.warmup, args.iters)
                except RuntimeError as e:
                    print(json.dumps({"backend": name, "shape": f"{b}x{h}x{s}x{s}x{d}", "causal": causal,
                                      "error": str(e).splitlines()[0]}), flush=True)
                    continue
                row = {"backend": name, "shape": f"{b}x{h}x{s}x{s}x{d}", "causal": causal,
                       "median_us": round(us, 2), "tflops": round(flops / us / 1e6, 1)}
                if args.kernel_times:
                    kernel_us, names = kernel_time_us(fn)
                    row["kernel_us"] = round(kernel_us, 2)
                    row["kernels_per_call"] = {n[:90]: c for n, c in names.items()}
                print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
