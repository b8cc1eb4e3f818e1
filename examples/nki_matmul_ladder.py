"""The four stages of the NKI matrix-multiplication tutorial, built with birsim.build.

The tutorial (aws-neuron-sdk, nki/tutorials/matrix_multiplication.rst and
matrix_multiplication_nki_kernels.py) computes ``result[M, N] = lhsT[K, M].T @ rhs[K, N]``
in bf16 and optimises it in four steps, published on trn1 for [4096, 8192] @ [8192, 8192]:

1. ``tiled``: for every (m, n) output tile and k, load a [128, 128] lhsT tile and a
   [128, 512] rhs tile, and accumulate their matmul in PSUM;
2. ``hoist_load``: load a row of lhsT tiles once per m, and the column of rhs tiles once per
   (m, n);
3. ``block_free``: block M and N by 2 tiles, so each loaded tile serves two output tiles;
4. ``fully_optimized``: block N (2 tiles), K (8 tiles) and M (16 tiles), with bigger loads
   ([128, 1024] and [128, 2048]), accumulating each K block's PSUM result into SBUF.

This is birsim's own code written from the kernels' loop structure (not a copy). Each stage
is an unrolled instruction stream: loads on the DMA and SP queues, stores on Pool, matmuls
on PE, PSUM evacuation on Activation (stage 4: accumulation on DVE, packing on Activation).
Buffers are rings (the compiler multi-buffers the tutorial's per-iteration tiles); every
cross-queue dependency (read after write, write after read, write after write on a buffer
slot) is a wait on the producing queue's counting semaphore, so the program is race-free
under ``checks="all"`` (tests/timing/test_timing_model.py runs it at a small shape and compares the
result with NumPy).

``stage(k, M, N, K, ...)`` returns the module; ``PUBLISHED`` the tutorial's figures.
"""

from typing import Dict, List, Optional, Tuple

from birsim import build as B

#: stage -> (published ms, published HFU %) on trn1 for [4096, 8192] @ [8192, 8192] bf16
PUBLISHED = {1: (51.80, 10.98), 2: (42.96, 13.24), 3: (22.07, 26.51), 4: (6.97, 85.24)}
NAMES = {1: "tiled", 2: "hoist_load", 3: "block_free", 4: "fully_optimized"}

TM, TK, TN = 128, 128, 512       # stationary free, contraction (partitions), moving free
QUEUES = ("DMA", "SP", "Pool", "PE", "Activation", "DVE")


class _Stream:
    """Instructions in program order, with the semaphore waits their buffer slots need."""

    def __init__(self) -> None:
        self.insns: List[dict] = []
        self.count = {q: 0 for q in QUEUES}          # instructions per queue so far
        self.writer: Dict[tuple, Tuple[str, int]] = {}
        self.readers: Dict[tuple, List[Tuple[str, int]]] = {}

    def add(self, queue: str, insn: dict, reads=(), writes=()) -> None:
        need: Dict[str, int] = {}

        def dep(d: Optional[Tuple[str, int]]) -> None:
            if d is not None and d[0] != queue:
                need[d[0]] = max(need.get(d[0], 0), d[1] + 1)
        for s in reads:
            dep(self.writer.get(s))
        for s in writes:
            dep(self.writer.get(s))
            for r in self.readers.get(s, ()):
                dep(r)
        me = (queue, self.count[queue])
        for s in reads:
            self.readers.setdefault(s, []).append(me)
        for s in writes:
            self.writer[s] = me
            self.readers[s] = []
        self.count[queue] += 1
        waits = [B.sem_wait(QUEUES.index(q), n) for q, n in sorted(need.items())]
        insn["sync_info"] = B.sync_info(waits, [B.sem_inc(QUEUES.index(queue))])
        insn["engine"] = queue
        self.insns.append(insn)

    def finish(self) -> List[dict]:
        """The stream, then a NoOp that waits for every queue and zeroes the semaphores."""
        used = [q for q in QUEUES if self.count[q]]
        self.insns.append(B.insn("NoOp", "Pool", name="done", sync=B.sync_info(
            [B.sem_wait(QUEUES.index(q), self.count[q]) for q in used if q != "Pool"],
            [B.update(QUEUES.index(q), "sem-wr-imm", 0, type="semaphore") for q in used])))
        return self.insns


def _dram_tile(t: dict, row: int, col: int, rows: int, cols: int, pitch: int) -> dict:
    return B.ap(t, [[pitch, rows], [1, cols]], offset=row * pitch + col)


def _sb(t: dict, col: int, cols: int, rows: int = TK) -> dict:
    width = t["tensor_shape"][1]
    return B.ap(t, [[width, rows], [1, cols]], offset=col)


def stage(k: int, M: int = 4096, N: int = 8192, K: int = 8192, *, blocks=(16, 2, 8),
          arch: str = "trn1") -> dict:
    """The module of tutorial stage ``k`` (1..4) for lhsT [K, M] @ rhs [K, N] in bf16;
    ``blocks`` = stage 4's (TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, TILES_IN_BLOCK_K)."""
    bf = "bfloat16"
    lhsT = B.tensor("lhsT", "ExternalInput", bf, [K, M], "DRAM")
    rhs = B.tensor("rhs", "ExternalInput", bf, [K, N], "DRAM")
    res = B.tensor("result", "ExternalOutput", bf, [M, N], "DRAM")
    s = _Stream()
    nk = K // TK
    if k in (1, 2, 3):
        bm_, bn_ = (2, 2) if k == 3 else (1, 1)
        # tiles in each ring: double buffers, or a generation and part of the next (SBUF)
        nbuf_l = {1: 2, 2: 2 * nk, 3: bm_ * nk + max(1, nk // 4)}[k]
        nbuf_r = {1: 2, 2: 2 * nk, 3: bn_ * nk + max(1, nk // 4)}[k]
        lt = B.tensor("lt", "Internal", bf, [TK, nbuf_l * TM], "SB")
        rt = B.tensor("rt", "Internal", bf, [TK, nbuf_r * TN], "SB")
        ps = B.tensor("ps", "Internal", "float32", [TM, 4 * TN], "PSUM")
        ot = B.tensor("ot", "Internal", bf, [TM, 2 * TN], "SB")
        tensors = [lhsT, rhs, res, lt, rt, ps, ot]
        nl_, nr_, np_, no_ = [0], [0], [0], [0]

        def load_l(kk: int, m: int) -> tuple:
            slot = nl_[0] % nbuf_l
            nl_[0] += 1
            s.add("SP", B.load_(_dram_tile(lhsT, kk * TK, m * TM, TK, TM, M),
                                _sb(lt, slot * TM, TM)), writes=[("lt", slot)])
            return slot

        def load_r(kk: int, n: int) -> tuple:
            slot = nr_[0] % nbuf_r
            nr_[0] += 1
            s.add("DMA", B.load_(_dram_tile(rhs, kk * TK, n * TN, TK, TN, N),
                                 _sb(rt, slot * TN, TN)), writes=[("rt", slot)])
            return slot

        def out_tile(m: int, n: int, pairs) -> None:
            p = np_[0] % 4
            np_[0] += 1
            for j, (ls, rs) in enumerate(pairs):
                s.add("PE", B.matmult(_sb(rt, rs * TN, TN), _sb(lt, ls * TM, TM),
                                      _sb(ps, p * TN, TN, TM),
                                      accumulation_flag=2 if j == 0 else 1),
                      reads=[("lt", ls), ("rt", rs)], writes=[("ps", p)])
            o = no_[0] % 2
            no_[0] += 1
            s.add("Activation", B.tensor_copy(_sb(ps, p * TN, TN, TM), _sb(ot, o * TN, TN, TM)),
                  reads=[("ps", p)], writes=[("ot", o)])
            s.add("Pool", B.save(_sb(ot, o * TN, TN, TM),
                                 _dram_tile(res, m * TM, n * TN, TM, TN, N)),
                  reads=[("ot", o)])

        if k == 1:
            for m in range(M // TM):
                for n in range(N // TN):
                    pairs = []
                    for kk in range(nk):
                        pairs.append((load_l(kk, m), load_r(kk, n)))
                    out_tile(m, n, pairs)
        else:
            for mb in range(M // (TM * bm_)):
                lsl = [[load_l(kk, mb * bm_ + i) for kk in range(nk)] for i in range(bm_)]
                for nb in range(N // (TN * bn_)):
                    rsl = [[load_r(kk, nb * bn_ + j) for kk in range(nk)] for j in range(bn_)]
                    for i in range(bm_):
                        for j in range(bn_):
                            out_tile(mb * bm_ + i, nb * bn_ + j, list(zip(lsl[i], rsl[j])))
    else:
        tbm, tbn, tbk = blocks
        BM, BN, BK = TM * tbm, TN * tbn, TK * tbk
        nbm, nbn, nbk = M // BM, N // BN, K // BK
        rt = B.tensor("rt", "Internal", bf, [TK, 2 * tbk * BN], "SB")
        lt = B.tensor("lt", "Internal", bf, [TK, 2 * tbk * BM], "SB")
        acc = B.tensor("acc", "Internal", bf, [TM, nbm * tbm * tbn * TN], "SB")
        ps = B.tensor("ps", "Internal", "float32", [TM, 4 * TN], "PSUM")
        pk = B.tensor("pk", "Internal", bf, [TM, 2 * BN], "SB")
        tensors = [lhsT, rhs, res, rt, lt, acc, ps, pk]
        cnt = {"rt": 0, "lt": 0, "ps": 0, "pk": 0}

        def ring(name: str, size: int) -> int:
            v = cnt[name] % size
            cnt[name] += 1
            return v
        ntile = nbm * tbm * tbn
        for n in range(nbn):
            s.add("Pool", B.memset(_sb(acc, 0, ntile * TN, TM)),
                  writes=[("acc", t) for t in range(ntile)])
            for kb in range(nbk):
                rs = ring("rt", 2)
                for j in range(tbk):
                    s.add("DMA", B.load_(_dram_tile(rhs, (kb * tbk + j) * TK, n * BN, TK, BN, N),
                                         _sb(rt, (rs * tbk + j) * BN, BN)),
                          writes=[("rt", rs, j)])
                for m in range(nbm):
                    ls = ring("lt", 2)
                    for j in range(tbk):
                        s.add("SP", B.load_(_dram_tile(lhsT, (kb * tbk + j) * TK, m * BM, TK, BM,
                                                       M),
                                            _sb(lt, (ls * tbk + j) * BM, BM)),
                              writes=[("lt", ls, j)])
                    for bn in range(tbn):
                        for bm in range(tbm):
                            p = ring("ps", 4)
                            for j in range(tbk):
                                s.add("PE", B.matmult(
                                    _sb(rt, (rs * tbk + j) * BN + bn * TN, TN),
                                    _sb(lt, (ls * tbk + j) * BM + bm * TM, TM),
                                    _sb(ps, p * TN, TN, TM),
                                    accumulation_flag=2 if j == 0 else 1),
                                    reads=[("rt", rs, j), ("lt", ls, j)], writes=[("ps", p)])
                            t = (m * tbm + bm) * tbn + bn
                            s.add("DVE", B.tensor_tensor(_sb(acc, t * TN, TN, TM),
                                                         _sb(ps, p * TN, TN, TM),
                                                         _sb(acc, t * TN, TN, TM), "add"),
                                  reads=[("acc", t), ("ps", p)], writes=[("acc", t)])
            for m in range(nbm):
                for bm in range(tbm):
                    q = ring("pk", 2)
                    for bn in range(tbn):
                        t = (m * tbm + bm) * tbn + bn
                        s.add("Activation", B.tensor_copy(_sb(acc, t * TN, TN, TM),
                                                          _sb(pk, q * BN + bn * TN, TN, TM)),
                              reads=[("acc", t)], writes=[("pk", q, bn)])
                    s.add("Pool", B.save(_sb(pk, q * BN, BN, TM),
                                         _dram_tile(res, (m * tbm + bm) * TM, n * BN, TM, BN,
                                                    N)),
                          reads=[("pk", q, bn) for bn in range(tbn)])
    return B.module([B.function("main", tensors, s.finish())], arch=arch)
