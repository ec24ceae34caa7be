#!/usr/bin/env python3
"""flash:fa2's decode kernels and PyTorch's SDPA backends on the same tensors in one process.

torch_decode_bench.py compares two processes, each with its own allocations; this script loads
attnprof_decode_capi (tests/perf/decode_capi.cu, built with `cmake --build build --target
attnprof_decode_capi`) through ctypes and runs our kernels on PyTorch's own q, k, v, so both sides
read the same bytes at the same addresses and are timed by the same code (CUDA events around each
call, median). Rounds alternate the sides. Our output is checked against PyTorch's cuDNN first.
bf16, head dim 128, one query row, no mask; GB/s counts Q, K, V read once and O written once.
Several libraries (two builds of the kernel, an A/B) are timed in the same rounds, on the same
tensors, each under its file name; docs/perf/decode_ab_libs.sh builds one per git revision.

Usage: decode_same_buffers.py LIBRARY [LIBRARY ...] [--rounds 3] [--iters 300] [--backends cudnn,flash]"""
import argparse
import ctypes
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_decode_bench import DECODE, decode_bytes, key  # noqa: E402  (issue 19's shapes, bytes and labels)
from torch_sdpa_bench import time_us  # noqa: E402  (one way of timing for every script here)

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def load(path):
    lib = ctypes.CDLL(path)
    lib.attnprof_decode_error_string.restype = ctypes.c_char_p
    lib.attnprof_decode_splits.argtypes = [ctypes.c_int] * 3 + [ctypes.POINTER(ctypes.c_int)]
    lib.attnprof_decode_workspace_floats.restype = ctypes.c_longlong
    lib.attnprof_decode_workspace_floats.argtypes = [ctypes.c_int] * 3
    lib.attnprof_decode_run.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 5 + [ctypes.c_void_p] * 2
    return lib


def checked(lib, status, what):
    if status != 0:
        raise RuntimeError(f"{what}: {lib.attnprof_decode_error_string(status).decode()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", nargs="+", help="path to libattnprof_decode_capi.so (several: timed side by side)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--backends", default="cudnn,flash")
    args = parser.parse_args()
    libs = {}
    for path in args.library:
        name = os.path.basename(path)
        if name in libs or name in BACKENDS:
            raise RuntimeError(f"{path}: two sides named {name}; give the libraries distinct file names")
        libs[name] = load(path)
    torch.manual_seed(0)
    chosen = args.backends.split(",")
    for b, h, hkv, skv, d in DECODE:
        label = key(b, h, hkv, skv, d)
        if d != 128:
            raise RuntimeError(f"{label}: attnprof_decode_capi holds the head-dim-128 kernels only")
        q = torch.rand(b, h, 1, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
        k, v = (torch.rand(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16) * 2 - 1 for _ in range(2))
        o = torch.empty_like(q)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        ours, splits = {}, {}
        for name, lib in libs.items():
            status = ctypes.c_int(0)
            splits[name] = lib.attnprof_decode_splits(b, hkv, skv, ctypes.byref(status))
            checked(lib, status.value, f"{name}: attnprof_decode_splits")
            workspace = torch.empty(max(1, lib.attnprof_decode_workspace_floats(b, h, splits[name])), device="cuda",
                                    dtype=torch.float32)

            def run(lib=lib, name=name, workspace=workspace):
                checked(lib, lib.attnprof_decode_run(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h,
                                                     hkv, skv, splits[name], workspace.data_ptr(), stream),
                        f"{name}: attnprof_decode_run")

            ours[name] = run

        def theirs(name):
            with sdpa_kernel(BACKENDS[name]):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

        reference = theirs("cudnn" if "cudnn" in chosen else chosen[0])
        errors = {}
        for name, run in ours.items():
            o.fill_(float("nan"))
            run()
            errors[name] = (o.float() - reference.float()).abs().max().item()
            if not errors[name] < 2e-2:  # NaN fails too
                raise RuntimeError(f"{label}: {name} differs from PyTorch by {errors[name]}")
        nbytes = decode_bytes(b, h, hkv, skv, d)
        times = {name: [] for name in ours} | {name: [] for name in chosen}
        for _ in range(args.rounds):
            for name, run in ours.items():
                times[name].append(time_us(run, args.warmup, args.iters))
            for name in chosen:
                times[name].append(time_us(lambda name=name: theirs(name), args.warmup, args.iters))
        print(f"{label} (splits " + ", ".join(f"{name} {n}" for name, n in splits.items()) +
              "; max |ours - PyTorch| " + ", ".join(f"{name} {e:.1e}" for name, e in errors.items()) + ")")
        width = max(len(name) for name in times)
        for side, values in times.items():
            gbps = nbytes / statistics.median(values) / 1e3
            print(f"  {side:{width}s} " + " / ".join(f"{t:.2f}" for t in values) + f" us  {gbps:.0f} GB/s")
        best = min(chosen, key=lambda name: statistics.median(times[name]))
        for name in ours:
            ratio = statistics.median(times[best]) / statistics.median(times[name])
            per_round = [t / o_ for t, o_ in zip(times[best], times[name])]
            print(f"  {name} vs best PyTorch ({best}): {ratio:.4f}x (rounds " +
                  ", ".join(f"{r:.4f}" for r in per_round) + ")", flush=True)
        del q, k, v, o, ours, reference
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
