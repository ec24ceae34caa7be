#!/usr/bin/env python3
"""Joins attnprof summary.json files with torch_sdpa_bench.py output into the ratio table of
docs/perf/NOTES.md: per backend, shape and causal setting, ours and PyTorch's TFLOP/s."""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: compare_torch.py TORCH.jsonl SUMMARY.json [SUMMARY.json ...]")
    torch_rows = {}
    for line in open(sys.argv[1]):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            torch_rows[(r["backend"], r["shape"], r["causal"])] = r
    print("| backend | shape | causal | attnprof us | attnprof TFLOP/s | PyTorch us | PyTorch TFLOP/s | ratio |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for path in sys.argv[2:]:
        for c in json.load(open(path))["cases"]:
            p = c["problem"]
            shape = f'{p["batch"]}x{p["heads"]}x{p["seq_q"]}x{p["seq_kv"]}x{p["head_dim"]}'
            family = c["backend"].split(":")[0]
            if c["backend"] == "manual:out_of_place":
                continue  # PyTorch's row is the in-place five-line version
            t = torch_rows.get((family, shape, p["causal"]))
            ours = c["timing"]["tflops"] if c["status"] == "ok" else None
            theirs = t.get("tflops") if t else None
            ratio = f"{ours / theirs:.2f}x" if ours and theirs else "-"
            print(f'| {c["backend"]} | {shape} | {"yes" if p["causal"] else "no"} | '
                  f'{c["timing"]["median_us"]:.1f} | {f"{ours:.1f}" if ours is not None else c["status"]} | '
                  f'{t.get("median_us", "-") if t else "-"} | {theirs if theirs is not None else "-"} | {ratio} |')


if __name__ == "__main__":
    main()
