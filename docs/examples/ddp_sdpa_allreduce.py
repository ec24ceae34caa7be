#!/usr/bin/env python3
"""A data-parallel step in miniature, for `attnprof profile` under torchrun: each rank runs
scaled_dot_product_attention on its own GPU, then all-reduces the output over NCCL.

Each timed step is one NVTX range, "step" (a case of the profile), holding two nested ranges,
"sdpa" and "all_reduce", so the trace reads like the step and the summary counts both kinds of
kernel per step: the SDPA kernel(s) as compute, NCCL's ncclDevKernel_AllReduce_* as
communication. Warm-up steps (NCCL sets up its communicators and channels there) run outside
every range and are not counted.

    attnprof profile --out traces/ddp -- torchrun --nproc_per_node=2 docs/examples/ddp_sdpa_allreduce.py
    attnprof merge traces/ddp --out traces/ddp/trace-merged.json

With one GPU, --backend gloo runs the ranks side by side on it (NCCL refuses two ranks on one
device): the per-rank outputs and the merge are the same, the all_reduce goes through the host
(memcpy DtoH/HtoD in the trace) instead of NCCL kernels.

NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set before torch loads NCCL, unless the environment already sets them
(machines whose NVLink multicast is unavailable need it off; see docs/multi_gpu.md).
"""
import argparse
import os

# Before torch (and NCCL) are imported: NCCL reads its environment when it initializes.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps, each an NVTX range 'step'")
    parser.add_argument("--warmup", type=int, default=3, help="steps outside every range")
    parser.add_argument("--shape", default="4x16x2048x64", help="batch x heads x seq x head_dim")
    parser.add_argument("--causal", type=int, default=1)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"],
                        help="gloo lets several ranks share one GPU (for trying the flow on one GPU)")
    args = parser.parse_args()

    if not torch.cuda.is_available():
        raise SystemExit("ddp_sdpa_allreduce.py: no CUDA device")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    # Single-process runs work too (world size 1): torchrun is not required to try the script.
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    if args.backend == "nccl":
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    batch, heads, seq, head_dim = (int(x) for x in args.shape.split("x"))
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    generator = torch.Generator(device=device).manual_seed(1234 + rank)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype, generator=generator)
               for _ in range(3))

    def step():
        with torch.cuda.nvtx.range("sdpa"):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(args.causal))
        with torch.cuda.nvtx.range("all_reduce"):
            dist.all_reduce(out)
        return out

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        with torch.cuda.nvtx.range("step"):
            out = step()
    stop.record()
    torch.cuda.synchronize()
    checksum = float(out.float().abs().mean())
    print(f"rank {rank}/{world} on GPU {device.index} ({args.backend}): {args.steps} steps of SDPA {args.shape} {args.dtype} "
          f"causal={args.causal} + all_reduce of {out.numel() * out.element_size() / 2**20:.1f} MiB: "
          f"{start.elapsed_time(stop) / args.steps:.3f} ms/step, |out| mean {checksum:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
