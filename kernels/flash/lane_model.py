# Lane-level model of flash_fwd_kernel (flash_fwd_kernel.cuh), for checking layouts on a machine
# without a GPU. It repeats the kernel's index arithmetic (TileCopy, FragmentRows, chunk_address,
# the masks, the epilogue staging) with the PTX ISA semantics of cp.async zero-fill,
# ldmatrix(.trans).x4 and the mma.m16n8k16 A/B/C fragments, in exact float arithmetic (no bf16
# rounding), and compares o and lse with a float64 reference at 1e-9. It also asserts that no
# global read leaves its tensor and no shared access leaves the allocation.
# Keep it in step with the .cuh; run it after changing any layout:
#   python3 kernels/flash/lane_model.py            # the standard shape set (about a minute)
#   python3 kernels/flash/lane_model.py B H SQ SKV D CAUSAL [BN]
import math, random, sys

def emulate(B, H, SQ, SKV, D, causal, BN=64, BM=128, WARPS=4, STAGES=2, SMEM_BASE=1024, seed=0):
    rnd = random.Random(seed)
    q = [rnd.uniform(-1, 1) for _ in range(B * H * SQ * D)]
    k = [rnd.uniform(-1, 1) for _ in range(B * H * SKV * D)]
    v = [rnd.uniform(-1, 1) for _ in range(B * H * SKV * D)]
    scale = 1 / math.sqrt(D); scale_log2 = scale * math.log2(math.e)
    o = [float('nan')] * (B * H * SQ * D); lse = [float('nan')] * (B * H * SQ)
    THREADS = WARPS * 32; RB = D * 2; CHUNKS = RB // 16; QBYTES = BM * RB; KVT = BN * RB
    kK = QBYTES; kV = kK + STAGES * KVT
    WARP_ROWS = BM // WARPS; MT = WARP_ROWS // 16; ST = BN // 8; OT = D // 8
    ROWS_PER_PASS = THREADS // CHUNKS
    grid_x = (SQ + BM - 1) // BM
    tiles_loaded = 0
    for bz in range(B):
      for by in range(H):
        for bx in range(grid_x):
            smem = {}
            def st16(addr, vals):
                assert addr % 16 == 0 and addr >= SMEM_BASE and addr + 16 <= SMEM_BASE + kV + STAGES * KVT
                for i in range(8): smem[(addr >> 1) + i] = vals[i]
            def ld_row8(addr):
                assert addr % 16 == 0, addr
                return [smem[(addr >> 1) + i] for i in range(8)]
            m0 = (grid_x - 1 - bx) * BM
            head = bz * H + by
            kv_limit = min(SKV, min(SQ, m0 + BM)) if causal else SKV
            n_end = (kv_limit + BN - 1) // BN
            n_unmasked = (min(SKV, m0 + 1) if causal else SKV) // BN
            kv_head = head * SKV * D
            def copy_tile(tid, dst, src, tile, rows, valid_rows):
                row = tid // CHUNKS; chunk = tid % CHUNKS
                soff = row * RB + ((chunk ^ (row & 7)) << 4); elem = row * D + chunk * 8
                for p in range(rows // ROWS_PER_PASS):
                    valid = True if valid_rows >= rows else (p * ROWS_PER_PASS < valid_rows - row)
                    a = dst + soff + p * ROWS_PER_PASS * RB
                    if valid:
                        g = tile + elem + p * ROWS_PER_PASS * D
                        assert 0 <= g and g + 8 <= len(src), "OOB read"
                        st16(a, src[g:g + 8])
                    else:
                        assert 0 <= tile < len(src)
                        st16(a, [0.0] * 8)
            def copy_kv(n):
                nonlocal tiles_loaded
                tiles_loaded += 1
                for tid in range(THREADS):
                    off = kv_head + n * BN * D; valid = SKV - n * BN
                    stage = SMEM_BASE + (n % STAGES) * KVT
                    copy_tile(tid, stage + kK, k, off, BN, valid)
                    copy_tile(tid, stage + kV, v, off, BN, valid)
            for tid in range(THREADS):
                copy_tile(tid, SMEM_BASE, q, (head * SQ + m0) * D, BM, SQ - m0)
            for n in range(STAGES - 1):
                if n < n_end: copy_kv(n)
            def frag_rows(tid):
                lane = tid & 31; warp = tid >> 5
                qv = (lane >> 4) ^ (lane & 7); kx = ((lane >> 3) & 1) ^ (lane & 7)
                return (SMEM_BASE + (warp * WARP_ROWS + (lane & 15)) * RB + (qv << 4),
                        SMEM_BASE + kK + (((lane >> 4) << 3) + (lane & 7)) * RB + (kx << 4),
                        SMEM_BASE + kV + (lane & 15) * RB + (qv << 4))
            def chunk_address(row, chunk):
                return (row ^ ((chunk & 7) << 4)) + ((chunk & ~7) << 4)
            def ldmatrix(addrs, trans):
                mats = [[ld_row8(addrs[8 * j + r]) for r in range(8)] for j in range(4)]
                out = []
                for t in range(32):
                    if not trans: out.append([(mats[j][t // 4][2 * (t % 4)], mats[j][t // 4][2 * (t % 4) + 1]) for j in range(4)])
                    else: out.append([(mats[j][2 * (t % 4)][t // 4], mats[j][2 * (t % 4) + 1][t // 4]) for j in range(4)])
                return out
            def mma(c, a, b0, b1):
                A = [[None] * 16 for _ in range(16)]; Bm = [[None] * 8 for _ in range(16)]
                for t in range(32):
                    g, tig = t >> 2, t & 3
                    for reg in range(4):
                        for half in range(2):
                            A[g + 8 * (reg & 1)][2 * tig + half + 8 * (reg >> 1)] = a[t][reg][half]
                    for half in range(2):
                        Bm[2 * tig + half][g] = b0[t][half]; Bm[2 * tig + 8 + half][g] = b1[t][half]
                for t in range(32):
                    g, tig = t >> 2, t & 3
                    for e in range(4):
                        row = g + 8 * (e >> 1); col = 2 * tig + (e & 1)
                        c[t][e] += sum(A[row][x] * Bm[x][col] for x in range(16))
            O = {w: [[[[0.0] * 4 for _ in range(32)] for _ in range(OT)] for _ in range(MT)] for w in range(WARPS)}
            rmax = {w: [[[-math.inf] * 2 for _ in range(MT)] for _ in range(32)] for w in range(WARPS)}
            rsum = {w: [[[0.0] * 2 for _ in range(MT)] for _ in range(32)] for w in range(WARPS)}
            for n in range(n_end):
                masked = n >= n_unmasked
                if n + STAGES - 1 < n_end: copy_kv(n + STAGES - 1)   # into the stage tile n-1 used
                stage_off = (n % STAGES) * KVT
                for warp in range(WARPS):
                    lanes = [warp * 32 + l for l in range(32)]
                    fr = [frag_rows(t) for t in lanes]
                    S = [[[[0.0] * 4 for _ in range(32)] for _ in range(ST)] for _ in range(MT)]
                    for kk in range(D // 16):
                        A = [ldmatrix([chunk_address(fr[l][0], 2 * kk) + mi * 16 * RB for l in range(32)], False) for mi in range(MT)]
                        for np_ in range(ST // 2):
                            Bf = ldmatrix([chunk_address(fr[l][1] + stage_off, 2 * kk) + np_ * 16 * RB for l in range(32)], False)
                            for mi in range(MT):
                                mma(S[mi][2 * np_], A[mi], [x[0] for x in Bf], [x[1] for x in Bf])
                                mma(S[mi][2 * np_ + 1], A[mi], [x[2] for x in Bf], [x[3] for x in Bf])
                    if masked:
                        for l in range(32):
                            tid = lanes[l]
                            first_row = m0 + (tid >> 5) * WARP_ROWS + ((tid & 31) >> 2)
                            key0 = n * BN + 2 * (tid & 3)
                            for mi in range(MT):
                                for h in range(2):
                                    row = first_row + 16 * mi + 8 * h
                                    limit = min(SKV, row + 1) if causal else SKV
                                    for nt in range(ST):
                                        for e in range(2):
                                            if key0 + 8 * nt + e >= limit: S[mi][nt][l][2 * h + e] = -math.inf
                    for mi in range(MT):
                        for h in range(2):
                            loc = []
                            for l in range(32):
                                mx = rmax[warp][l][mi][h]
                                for nt in range(ST): mx = max(mx, S[mi][nt][l][2 * h], S[mi][nt][l][2 * h + 1])
                                loc.append(mx)
                            for l in range(32):
                                mx = max(loc[(l & ~3):(l & ~3) + 4])
                                ms = 0.0 if mx == -math.inf else mx * scale_log2
                                old = rmax[warp][l][mi][h]
                                resc = 0.0 if old == -math.inf else 2 ** (old * scale_log2 - ms)
                                rmax[warp][l][mi][h] = mx
                                sm = 0.0
                                for nt in range(ST):
                                    for e in range(2):
                                        sv = S[mi][nt][l][2 * h + e]
                                        p = 0.0 if sv == -math.inf else 2 ** (sv * scale_log2 - ms)
                                        S[mi][nt][l][2 * h + e] = p; sm += p
                                rsum[warp][l][mi][h] = rsum[warp][l][mi][h] * resc + sm
                                for dt in range(OT):
                                    O[warp][mi][dt][l][2 * h] *= resc; O[warp][mi][dt][l][2 * h + 1] *= resc
                    Pl = [[[[(S[mi][2 * kk][l][0], S[mi][2 * kk][l][1]), (S[mi][2 * kk][l][2], S[mi][2 * kk][l][3]),
                             (S[mi][2 * kk + 1][l][0], S[mi][2 * kk + 1][l][1]), (S[mi][2 * kk + 1][l][2], S[mi][2 * kk + 1][l][3])]
                            for l in range(32)] for kk in range(ST // 2)] for mi in range(MT)]
                    for kk in range(ST // 2):
                        for dp in range(OT // 2):
                            Bf = ldmatrix([chunk_address(fr[l][2] + stage_off, 2 * dp) + kk * 16 * RB for l in range(32)], True)
                            for mi in range(MT):
                                mma(O[warp][mi][2 * dp], Pl[mi][kk], [x[0] for x in Bf], [x[1] for x in Bf])
                                mma(O[warp][mi][2 * dp + 1], Pl[mi][kk], [x[2] for x in Bf], [x[3] for x in Bf])
            # epilogue, per warp: lse, normalise, stage through Q rows, 16-byte stores
            for warp in range(WARPS):
                for l in range(32):
                    tid = warp * 32 + l
                    for mi in range(MT):
                        for h in range(2):
                            ssum = sum(rsum[warp][(l & ~3) + j][mi][h] for j in range(4))
                            row = m0 + warp * WARP_ROWS + 16 * mi + 8 * h + (l >> 2)
                            if (l & 3) == 0 and row < SQ: lse[head * SQ + row] = rmax[warp][l][mi][h] * scale + math.log(ssum)
                            for dt in range(OT):
                                lr = warp * WARP_ROWS + 16 * mi + 8 * h + (l >> 2)
                                off = SMEM_BASE + lr * RB + ((dt ^ (lr & 7)) << 4) + 4 * (l & 3)
                                smem[off >> 1] = O[warp][mi][dt][l][2 * h] / ssum
                                smem[(off >> 1) + 1] = O[warp][mi][dt][l][2 * h + 1] / ssum
                for l in range(32):
                    for i in range(WARP_ROWS * CHUNKS // 32):
                        idx = i * 32 + l
                        tr = warp * WARP_ROWS + idx // CHUNKS; ch = idx % CHUNKS
                        if m0 + tr < SQ:
                            vals = ld_row8(SMEM_BASE + tr * RB + ((ch ^ (tr & 7)) << 4))
                            g = (head * SQ + m0) * D + tr * D + ch * 8
                            o[g:g + 8] = vals
    # reference
    worst = 0.0; worst_lse = 0.0
    for head in range(B * H):
        for i in range(SQ):
            keys = min(i + 1, SKV) if causal else SKV
            sc = [scale * sum(q[(head * SQ + i) * D + c] * k[(head * SKV + j) * D + c] for c in range(D)) for j in range(keys)]
            mx = max(sc); w = [math.exp(s - mx) for s in sc]; tot = sum(w)
            for c in range(D):
                ref = sum(w[j] * v[(head * SKV + j) * D + c] for j in range(keys)) / tot
                got = o[(head * SQ + i) * D + c]
                if not (abs(got - ref) <= 1e-9): return f'MISMATCH o[{head},{i},{c}] got {got} ref {ref}'
            ref_lse = mx + math.log(tot)
            if not abs(lse[head * SQ + i] - ref_lse) <= 1e-9: return f'MISMATCH lse[{head},{i}] got {lse[head*SQ+i]} ref {ref_lse}'
    return f'ok (K/V tiles loaded {tiles_loaded})'

CASES = [(1, 1, 1, 1, 64, 0), (1, 1, 1, 1, 128, 1), (1, 1, 17, 17, 128, 1), (1, 1, 130, 70, 64, 0),
         (1, 1, 130, 70, 64, 1), (1, 1, 70, 130, 64, 1), (1, 1, 70, 130, 128, 0), (1, 1, 200, 200, 128, 1),
         (1, 1, 257, 129, 128, 1), (2, 2, 129, 257, 64, 1)]

if __name__ == '__main__':
    cases = [tuple(int(x) for x in sys.argv[1:7])] if len(sys.argv) > 6 else CASES
    bn = int(sys.argv[7]) if len(sys.argv) > 7 else 64
    failed = 0
    for B, H, SQ, SKV, D, causal in cases:
        result = emulate(B, H, SQ, SKV, D, bool(causal), BN=bn)
        failed += not result.startswith('ok')
        print(f'{B}x{H}x{SQ}x{SKV}x{D} {"causal" if causal else "full"}: {result}', flush=True)
    sys.exit(1 if failed else 0)
