#!/usr/bin/env python3
"""Checks, from `attnprof profile`'s own output, that a range around forward + loss.backward()
counts the backward's kernels (docs/profile.md; docs/examples/sdpa_train_step.py makes the run).

For every case `train <backend>` of summary.json, against trace.json read independently:
  1. the kernels the case counts equal the kernels whose launching API call (any thread of the
     process) started inside one of the case's range instances;
  2. some of them were launched by a thread other than the one holding the range (the autograd
     engine's), and some are backward kernels by name.
Prints the per-iteration counts; exits 1 if a check fails, 2 if the run is not there.

    python3 docs/perf/check_backward_attribution.py OUT_DIR
"""
import collections
import gzip
import json
import os
import re
import sys

BACKWARD = re.compile(r"bwd|backward|bprop|cutlassB|dot_do_o|convert_dq|dq_dk_dv", re.IGNORECASE)


def load(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        return json.load(f)


def main(out_dir):
    trace_path = next((os.path.join(out_dir, n) for n in ("trace.json", "trace.json.gz")
                       if os.path.exists(os.path.join(out_dir, n))), None)
    summary_path = os.path.join(out_dir, "summary.json")
    if trace_path is None or not os.path.exists(summary_path):
        print(f"{out_dir}: no trace.json and summary.json (one profiled process) here", file=sys.stderr)
        return 2
    events = load(trace_path)["traceEvents"]
    summary = load(summary_path)

    launches = {}  # correlation -> (pid, tid, ts) of the API call
    kernels = []   # (correlation, name, case arg)
    ranges = collections.defaultdict(list)  # name -> [(pid, tid, start, end)]
    for e in events:
        cat, args = e.get("cat"), e.get("args", {})
        if cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches[args["correlation"]] = (e["pid"], e["tid"], e["ts"])
        elif cat == "kernel":
            kernels.append((args.get("correlation"), e["name"], args.get("case")))
        elif cat == "user_annotation" and e["name"].startswith("train "):
            ranges[e["name"]].append((e["pid"], e["tid"], e["ts"], e["ts"] + e.get("dur", 0)))

    failed = False
    cases = [c for c in summary["cases"] if c["label"].startswith("train ")]
    if not cases:
        print("no `train <backend>` case in summary.json", file=sys.stderr)
        return 1
    print(f"{'case':18s} {'iters':>5s} {'counted/iter':>12s} {'in window/iter':>14s} {'other thread/iter':>17s}  backward kernels")
    for c in cases:
        name = c["label"]
        windows = ranges.get(name, [])
        iterations = len(windows)
        in_window, other_thread, names = 0, 0, collections.Counter()
        for correlation, kernel_name, _ in kernels:
            launch = launches.get(correlation)
            if launch is None:
                continue
            pid, tid, ts = launch
            for rpid, rtid, start, end in windows:
                if pid == rpid and start <= ts <= end:
                    in_window += 1
                    other_thread += tid != rtid
                    if BACKWARD.search(kernel_name):
                        names[re.sub(r"\(.*", "", kernel_name)[-60:]] += 1
                    break
        counted = c["per_iter"]["kernels"] * max(iterations, 1)
        per = lambda n: n / max(iterations, 1)
        print(f"{name:18s} {iterations:5d} {per(counted):12.1f} {per(in_window):14.1f} {per(other_thread):17.1f}  "
              f"{', '.join(sorted(names))[:160]}")
        problems = []
        if iterations == 0:
            problems.append("no range instances in the trace")
        if round(counted) != in_window:
            problems.append(f"counts {counted:.0f} kernels, {in_window} were launched inside its ranges")
        if other_thread == 0:
            problems.append("no kernel launched from another thread was counted")
        if not names:
            problems.append("no backward kernel among the counted ones")
        for p in problems:
            print(f"  FAIL {name}: {p}")
        failed = failed or bool(problems)
    print("FAILED" if failed else "OK: every case counts its backward kernels, and exactly the kernels of its ranges")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
