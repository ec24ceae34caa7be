#!/usr/bin/env python3
"""PyTorch attention, once per SDPA backend and twice by hand, for `attnprof profile` to watch.

Every call runs inside an NVTX range (torch.cuda.nvtx.range, which `attnprof profile` records)
and a record_function of the same name (which torch.profiler records), so one script gives the
same cases to both profilers:

    sdpa math, sdpa efficient, sdpa flash, sdpa cudnn    F.scaled_dot_product_attention under
                                                          each SDPBackend
    manual masked_fill, manual masked_fill_               the five-line version: matmul, scale,
                                                          mask (out of place / in place), softmax,
                                                          matmul

each with " full" or " causal" appended. Warm-up calls run outside every range, so they are not
counted. What torch.profiler showed on the H200 (docs/GPU.md, 4x16x1024x64 bf16): math 14 kernels
(20 causal); manual 4 kernels, causal 7 kernels and 1 memcpy with masked_fill (it clones the
scores), none with masked_fill_; efficient, flash, cudnn 1 kernel.

    attnprof profile -- python3 docs/examples/sdpa_backends.py        # attnprof's counts
    python3 docs/examples/sdpa_backends.py --torch-profiler t.json    # torch.profiler's counts
    attnprof report t.json                                            # attnprof reading torch's trace

Overhead loops (docs/perf/profile_overhead.sh): --overhead sdpa (N small SDPA calls) or
--overhead launches (N one-kernel ops), timed with a host clock around the loop and a
synchronize, median of --repeats; under --torch-profiler the loop runs inside the profiler.
"""
import argparse
import contextlib
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.autograd.profiler import record_function
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA_BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def manual_attention(q, k, v, causal, in_place):
    """The five lines people write, with the causal mask built every call."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill_(mask, float("-inf")) if in_place else scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def variants(causal_settings):
    """(range name, callable(q, k, v)) for every backend and causal setting."""
    out = []
    for causal in causal_settings:
        suffix = " causal" if causal else " full"
        for name, backend in SDPA_BACKENDS.items():
            def sdpa(q, k, v, backend=backend, causal=causal):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.append(("sdpa " + name + suffix, sdpa))
        for in_place in (False, True):
            def manual(q, k, v, causal=causal, in_place=in_place):
                return manual_attention(q, k, v, causal, in_place)
            out.append(("manual masked_fill" + ("_" if in_place else "") + suffix, manual))
    return out


@contextlib.contextmanager
def case_range(name):
    with torch.cuda.nvtx.range(name), record_function(name):
        yield


def run_cases(args, q, k, v):
    causal = {"both": (False, True), "0": (False,), "1": (True,)}[args.causal]
    names = []
    for name, fn in variants(causal):
        try:
            for _ in range(args.warmup):  # outside every range: not counted
                fn(q, k, v)
            torch.cuda.synchronize()
        except RuntimeError as e:
            print(f"{name}: skipped ({str(e).splitlines()[0][:120]})", flush=True)
            continue
        start = time.perf_counter()
        for _ in range(args.iterations):
            with case_range(name):
                fn(q, k, v)
        torch.cuda.synchronize()
        per_call_us = (time.perf_counter() - start) * 1e6 / args.iterations
        print(f"{name}: {args.iterations} calls, {per_call_us:.1f} us per call (host clock, incl. launch)", flush=True)
        names.append(name)
    return names


def timed_loop(args, body):
    """Median over repeats of the wall time of `calls` calls plus a synchronize, in ms."""
    for _ in range(max(10, args.calls // 10)):
        body()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.calls):
            body()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), times


def counts_from_kineto_trace(path, names):
    """Kernels, memcpys and memsets per call of each range, from torch.profiler's own trace: each
    GPU event joins its runtime/driver launch by correlation id, and the launch the record_function
    range around it on the same thread. Independent of attnprof's reader on purpose."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    launches, ranges = {}, []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = (e["tid"], float(e["ts"]))
        elif cat == "user_annotation" and e.get("name") in names:
            ranges.append((e["tid"], float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    per = {n: {"calls": 0, "kernel": 0, "gpu_memcpy": 0, "gpu_memset": 0, "names": {}} for n in names}
    for r in ranges:
        per[r[3]]["calls"] += 1
    for e in events:
        cat = e.get("cat")
        if e.get("ph") != "X" or cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is None:
            continue
        for tid, start, end, name in ranges:
            if tid == launch[0] and start <= launch[1] <= end:
                per[name][cat] += 1
                per[name]["names"][e["name"]] = per[name]["names"].get(e["name"], 0) + 1
                break
    return per


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="4,16,1024,64", help="batch,heads,seq,head_dim (default 4,16,1024,64)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--causal", default="both", choices=["both", "0", "1"])
    parser.add_argument("--iterations", type=int, default=20, help="calls per case, each in its own range")
    parser.add_argument("--warmup", type=int, default=3, help="calls per case before its ranges")
    parser.add_argument("--torch-profiler", metavar="TRACE.json",
                        help="record with torch.profiler, export its Chrome trace here, print counts per call")
    parser.add_argument("--overhead", choices=["sdpa", "launches"],
                        help="time a loop instead: small SDPA calls, or one-kernel ops (x.add_(1))")
    parser.add_argument("--calls", type=int, help="calls in the timed loop (default: 200 sdpa, 10000 launches)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.calls is None:
        args.calls = 200 if args.overhead == "sdpa" else 10000

    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    profiler = contextlib.nullcontext()
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])

    if args.overhead:
        if args.overhead == "sdpa":
            q, k, v = (torch.randn(1, 8, 128, 64, device="cuda", dtype=dtype) for _ in range(3))
            body = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
        else:
            x = torch.zeros(32, device="cuda")
            body = lambda: x.add_(1)  # noqa: E731
        mode = "torch.profiler" if args.torch_profiler else "plain"
        with profiler as prof:
            median, times = timed_loop(args, body)
        # Same line format as launch_loop, so profile_overhead.sh reads both alike.
        print(f"{args.overhead}_loop ({mode}): {args.calls} calls: median {median:.3f} ms "
              f"({1e3 * median / args.calls:.3f} us/call) over {args.repeats} repeats "
              f"[{' '.join(f'{t:.3f}' for t in times)}] ms", flush=True)
        if args.torch_profiler:
            start = time.perf_counter()
            prof.export_chrome_trace(args.torch_profiler)
            print(f"torch.profiler export: {(time.perf_counter() - start) * 1e3:.1f} ms", flush=True)
        return 0

    b, h, s, d = (int(x) for x in args.shape.split(","))
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, shape {b}x{h}x{s}x{d} {args.dtype}", flush=True)
    with profiler as prof:
        names = run_cases(args, q, k, v)
    if args.torch_profiler:
        prof.export_chrome_trace(args.torch_profiler)
        print(f"\ntorch.profiler, per call (from {args.torch_profiler}):")
        print(f"{'case':32} {'calls':>5} {'kernels':>8} {'memcpy':>7} {'memset':>7}")
        for name, c in counts_from_kineto_trace(args.torch_profiler, names).items():
            calls = max(c["calls"], 1)
            print(f"{name:32} {c['calls']:5d} {c['kernel'] / calls:8.2f} {c['gpu_memcpy'] / calls:7.2f} "
                  f"{c['gpu_memset'] / calls:7.2f}")
            for kernel, count in sorted(c["names"].items(), key=lambda kv: -kv[1]):
                print(f"    {count / calls:5.2f}  {kernel[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
