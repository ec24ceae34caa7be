#!/usr/bin/env python3
"""Reads the flash:hopper developer timeline (a build with -DATTNPROF_HOPPER_TIMELINE; the launch
writes the last launch's logs to $ATTNPROF_HOPPER_TIMELINE) and says where a consumer warpgroup's
time goes, per kind of turn, in SM cycles (medians over every block and both consumers).

  hopper_timeline.py FILE [--clock-ghz G]

A turn is one consumer's GEMM issue slot: the first of a work tile (S alone), the middle ones
(S of key tile n with PV of n - 1) and the last (PV alone). Events, as in flash_hopper_kernel.cuh.
"""
import argparse
import statistics
import struct
import sys

NAMES = {1: "tile_start", 2: "q_ready", 3: "turn_wait", 4: "turn_granted", 5: "k_ready", 6: "s_issued",
         7: "s_done", 8: "v_ready", 9: "pv_done", 10: "epilogue_done", 11: "produce_k", 12: "produce_v",
         13: "produce_q", 14: "softmax_done"}


def read(path):
    data = open(path, "rb").read()
    blocks, block_n, capacity = struct.unpack_from("3i", data, 0)
    offset = 12
    counts = struct.unpack_from(f"{blocks * 3}i", data, offset)
    offset += 4 * blocks * 3
    logs = []
    for log in range(blocks * 3):
        raw = struct.unpack_from(f"{counts[log]}Q", data, offset + 8 * log * capacity)
        logs.append([(r >> 8, NAMES.get(r & 0xFF, str(r & 0xFF))) for r in raw])
    return blocks, block_n, logs


def turns(log):
    """Splits a consumer's log into work tiles, each a dict of its marks and a list of turns."""
    tiles = []
    tile = None
    turn = None
    for t, name in log:
        if name == "tile_start":
            tile = {"start": t, "turns": []}
            tiles.append(tile)
        elif name == "turn_wait":
            turn = {"turn_wait": t}
            tile["turns"].append(turn)
        elif name in ("q_ready", "epilogue_done"):
            tile[name] = t
        elif turn is not None:
            turn[name] = t
    return tiles


def turn_kind(j, turns_in_tile):
    return "first" if j == 0 else "last" if j == turns_in_tile - 1 else "mid"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("--clock-ghz", type=float, default=0.0, help="also print microseconds at this SM clock")
    args = parser.parse_args()
    blocks, block_n, logs = read(args.file)
    # Each consumer's work tiles, by (block, consumer 1 or 2).
    tiles_of = {(b, c): turns(logs[3 * b + c]) for b in range(blocks) for c in (1, 2)}
    rows = {}

    def add(key, value):
        rows.setdefault(key, []).append(value)

    tile_counts = []
    for b in range(blocks):
        for c in (1, 2):
            tiles = tiles_of[b, c]
            tile_counts.append(len(tiles))
            for k, tile in enumerate(tiles):
                ts = tile["turns"]
                if not ts:
                    continue
                add("tile: start -> Q ready", tile["q_ready"] - tile["start"])
                if k + 1 < len(tiles):
                    add("tile: start -> next tile's start", tiles[k + 1]["start"] - tile["start"])
                add("tile: last PV done -> epilogue done", tile["epilogue_done"] - ts[-1]["pv_done"])
                add("tile: epilogue done -> next turn wait",
                    (tiles[k + 1]["turns"][0]["turn_wait"] - tile["epilogue_done"]) if k + 1 < len(tiles) and
                    tiles[k + 1]["turns"] else 0)
                for j, tu in enumerate(ts):
                    kind = turn_kind(j, len(ts))
                    add(f"{kind}: turn wait", tu["turn_granted"] - tu["turn_wait"])
                    if "k_ready" in tu:
                        add(f"{kind}: K wait", tu["k_ready"] - tu["turn_granted"])
                    if "v_ready" in tu:
                        add(f"{kind}: V wait", tu["v_ready"] - tu.get("k_ready", tu["turn_granted"]))
                    add(f"{kind}: granted -> issued (pass)", tu["s_issued"] - tu["turn_granted"])
                    if "s_done" in tu:
                        add(f"{kind}: issued -> S done", tu["s_done"] - tu["s_issued"])
                    if "softmax_done" in tu:
                        add(f"{kind}: S done -> softmax done", tu["softmax_done"] - tu["s_done"])
                    if "pv_done" in tu:
                        add(f"{kind}: -> PV done", tu["pv_done"] - tu.get("softmax_done", tu["s_issued"]))
                    if j + 1 < len(ts):
                        add(f"{kind}: -> next turn wait",
                            ts[j + 1]["turn_wait"] - tu.get("pv_done", tu.get("s_done", tu["s_issued"])))
                        add(f"{kind}: granted -> next granted", ts[j + 1]["turn_granted"] - tu["turn_granted"])
    # Q: the producer's issue of a work tile's Q load against the consumers' wait for it.
    for b in range(blocks):
        produced = [t for t, name in logs[3 * b] if name == "produce_q"]
        for c in (1, 2):
            ready = [tile["q_ready"] for tile in tiles_of[b, c] if "q_ready" in tile]
            for k, (t_issue, t_ready) in enumerate(zip(produced, ready)):
                add("Q: producer issues -> consumer has it", t_ready - t_issue)
    # The other consumer's grant after this one's pass: the turn period seen from the tensor cores.
    periods = {}
    for b in range(blocks):
        grants = []
        for c in (1, 2):
            for tile in tiles_of[b, c]:
                for j, tu in enumerate(tile["turns"]):
                    kind = turn_kind(j, len(tile["turns"]))
                    grants.append((tu["turn_granted"], kind, c))
        grants.sort()
        for (t0, kind0, c0), (t1, kind1, c1) in zip(grants, grants[1:]):
            periods.setdefault(f"grant {kind0} -> grant {kind1}", []).append(t1 - t0)
        if grants:
            periods.setdefault("block: first grant -> last grant", []).append(grants[-1][0] - grants[0][0])
            periods.setdefault("block: turns", []).append(len(grants))
    print(f"{blocks} blocks, {block_n}-key tiles, work tiles per consumer: "
          f"{min(tile_counts)}-{max(tile_counts)}; cycles (median, p10, p90, count)")
    for table in (rows, periods):
        for key in sorted(table):
            values = sorted(table[key])
            med = statistics.median(values)
            p10 = values[len(values) // 10]
            p90 = values[(9 * len(values)) // 10]
            us = f"  {med / args.clock_ghz / 1000:7.3f} us" if args.clock_ghz else ""
            print(f"  {key:<40} {med:9.0f} {p10:9.0f} {p90:9.0f} {len(values):7d}{us}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
