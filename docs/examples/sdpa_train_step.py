#!/usr/bin/env python3
"""A training step of PyTorch attention, per SDPA backend, for `attnprof profile` to attribute.

Each iteration is one NVTX range, `train <backend>`, around the forward, the loss and
`loss.backward()`. PyTorch runs the backward on its autograd engine's thread, where no range is
open; attnprof gives those launches to the one top-level range of the process that is open then
(docs/profile.md), so each case counts the backward's kernels too. Warm-up steps run outside
every range and are not counted.

    attnprof profile --out traces/train -- python3 docs/examples/sdpa_train_step.py
    python3 docs/perf/check_backward_attribution.py traces/train    # the counts, checked

Options: --shape B,H,S,D (default 2,16,1024,128), --iterations N (default 5), --causal,
--backends flash,efficient,cudnn,math (default: all four).
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="2,16,1024,128", help="B,H,S,D")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--backends", default="flash,efficient,cudnn,math")
    args = parser.parse_args()
    b, h, s, d = (int(x) for x in args.shape.split(","))
    names = [n for n in args.backends.split(",") if n]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; expected some of {sorted(BACKENDS)}")

    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))

    def step(backend):
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
        loss = out.float().square().mean()
        loss.backward()

    for name in names:
        backend = BACKENDS[name]
        try:
            for _ in range(2):  # warm-up, outside every range
                step(backend)
                q.grad = k.grad = v.grad = None
            torch.cuda.synchronize()
        except RuntimeError as error:  # no kernel for this shape in this build
            print(f"train {name}: skipped ({str(error).splitlines()[0][:100]})", file=sys.stderr)
            continue
        for _ in range(args.iterations):
            with torch.cuda.nvtx.range(f"train {name}"):
                step(backend)
            q.grad = k.grad = v.grad = None
        torch.cuda.synchronize()
        print(f"train {name}: {args.iterations} steps", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
