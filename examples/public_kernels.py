"""The public NKI kernels of aws-neuron/nki-samples as BIR programs, checked against NumPy.

    python examples/public_kernels.py [--kernel all|sd_attention|layernorm|rmsnorm|softmax|mamba]

Each builder writes the sample's tiling with birsim.build (written here from the samples'
published structure, not copied) and returns a module synchronised by
:func:`birsim.synchronize`: DMA ``Load``s bring each 128-row tile from DRAM into SBUF, the
compute engines work on it, a ``Save`` writes the result back. Inputs and outputs are
DRAM tensors in the sample's own layout; ``inputs_*`` makes random inputs, ``ref_*`` is
an independent float64 NumPy reference and ``tiled_*`` the same tiling in NumPy fp32 (the
peer of bench/bench_public_kernels.py; with ``dma=True`` it also copies each tile into
a buffer and the result out of one, as the kernel's Loads and Saves do).

* ``sd_attention(S, d)`` -- the Stable-Diffusion fused self-attention for a small head
  (``fused_self_attn_for_SD_small_head_size``, 4096 x 64, mixed precision): q, k, v are
  [S, d] fp32; k and each q tile are transposed on the PE (Matmult against the identity)
  and cast to bf16; per 128-query tile the scores q k^T fill a [128, S] fp32 row buffer
  (512-key Matmults, copied out of PSUM), one TensorReduce max over the whole row, one
  Activation Exp (scale 1/sqrt(d), bias -max/sqrt(d)), a TensorReduce add, the
  probabilities cast to bf16 and transposed in 128 x 128 blocks on the PE, then S/128
  accumulating bf16 Matmults with v give P v, scaled by the reciprocal of the row sum.
* ``layernorm(N, D)`` -- ``nki_layernorm_kernel_v2``: BNStats over 512-column chunks,
  BNStatsAggregate (mean, variance), rstd = (var + eps) ** -0.5 (TensorScalar add, pow),
  (x - mean) * rstd (TensorScalarPtr), * gamma and + beta (TensorTensor against the
  partition-broadcast rows). 4096 x 8192.
* ``rmsnorm(N, D)`` -- the RMSNorm tutorial: Activation Square, TensorReduce add,
  TensorScalar (* 1/D, + eps) and Activation Rsqrt, x * rrms (TensorScalarPtr), * gamma.
  4096 x 512.
* ``softmax(N, D)`` -- a row softmax (the samples' softmax step as a kernel of its own):
  TensorReduce max (negated), Activation Exp with that bias, TensorReduce add, Reciprocal,
  TensorScalarPtr mult. 4096 x 4096.
* ``mamba(batch, channels, state, seq)`` -- the selective scan of the NKI Mamba tutorial
  (``mamba_v1``): per 128-channel tile and state n, deltaA = exp(delta * A[:, n])
  (Activation Exp with a per-partition scale), deltaU = delta * u, deltaBu = deltaU *
  B[n] (B's row broadcast over the partitions by the DMA), the scan h_t = deltaA_t *
  h_{t-1} + deltaBu_t (TensorScalarPtr is_tensor_tensor_scan), * C[n] and summed over the
  states. 1 x 256 x 16 x 512.
"""

import argparse
import math
import sys

import numpy as np

P = 128                       # partitions: every kernel's row tile
EPS = 1e-5
F32, BF16 = "float32", "bfloat16"


def _B():
    from birsim import build as B
    return B


def _t(name, kind, shape, dt=F32, mem="SB"):
    return _B().tensor(name, kind, dt, shape, mem)


def _tile(name, width, c0, w, dt=F32, parts=P):
    """Columns [c0, c0 + w) of a [parts, width] SBUF tile."""
    return _B().ap(name, [[width, parts], [1, w]], dt, offset=c0 or None)


def _col(name, width=1, c=0, parts=P):
    """Column c of a [parts, width] tile (a per-partition scalar)."""
    return _B().ap(name, [[width, parts], [1, 1]], offset=c or None)


def _drows(name, width, r0, dt=F32, rows=P, c0=0, w=None):
    """Rows [r0, r0 + rows) of a DRAM [*, width] tensor (columns [c0, c0 + w))."""
    return _B().ap(name, [[width, rows], [1, width if w is None else w]], dt,
                   offset=(r0 * width + c0) or None)


def _bcast(name, width, off=0, parts=P):
    """One DRAM row of ``width`` elements at ``off``, broadcast over the partitions."""
    return _B().ap(name, [[0, parts], [1, width]], offset=off or None)


def _module(allocs, code, synchronize=True):
    B = _B()
    return B.module([B.function("main", allocs, code)], synchronize=synchronize)


def _dma_buffers(dma, shape, n=2):
    """n SBUF-like tile buffers for a NumPy tiling with the kernel's Loads and Saves."""
    return tuple(np.empty(shape, np.float32) if dma else None for _ in range(n))


def _load(src, buf):
    """The tile: ``src`` itself, or (a Load) copied into ``buf``."""
    if buf is None:
        return src
    np.copyto(buf, src)
    return buf


def _save(tile, dst):
    """A Save: ``tile`` copied to ``dst`` unless it was computed there."""
    if tile is not dst and not np.shares_memory(tile, dst):
        np.copyto(dst, tile)


# {=== SD attention ===}

KT = 512                      # keys per score Matmult (one fp32 PSUM bank)


def sd_attention(S=4096, d=64, synchronize=True):
    """Fused SD self-attention over [S, d] fp32 q, k, v (bf16 matmul inputs); out [S, d]."""
    B = _B()
    assert S % KT == 0 and d <= P
    scale = 1.0 / math.sqrt(d)
    nt = S // P
    allocs = [_t("q", "ExternalInput", [S, d], mem="DRAM"),
              _t("k", "ExternalInput", [S, d], mem="DRAM"),
              _t("v", "ExternalInput", [S, d], mem="DRAM"),
              _t("ident", "ExternalInput", [P, P], mem="DRAM"),
              _t("out", "ExternalOutput", [S, d], mem="DRAM"),
              _t("id32", "Internal", [P, P]), _t("id16", "Internal", [P, P], BF16),
              _t("kin", "Internal", [P, d]), _t("qin", "Internal", [P, d]),
              _t("vin", "Internal", [P, d]),
              _t("kT", "Internal", [d, S], BF16), _t("qT", "Internal", [d, P], BF16),
              _t("vb", "Internal", [P, nt * d], BF16),
              _t("tp", "Internal", [d, P], mem="PSUM"),
              _t("sc", "Internal", [P, KT], mem="PSUM"),
              _t("pt", "Internal", [P, KT], mem="PSUM"),
              _t("pv", "Internal", [P, d], mem="PSUM"),
              _t("qk", "Internal", [P, S]), _t("ex", "Internal", [P, S]),
              _t("pb", "Internal", [P, S], BF16), _t("pT", "Internal", [P, S], BF16),
              _t("o", "Internal", [P, d])]
    for n in ("mx", "negm", "sm", "rs"):
        allocs.append(_t(n, "Internal", [P, 1]))
    code = [B.load_(B.whole("ident", [P, P]), B.whole("id32", [P, P])),
            B.tensor_copy(B.whole("id32", [P, P]), B.whole("id16", [P, P], BF16))]
    for t in range(nt):            # k^T (bf16) and v (bf16), once
        code += [B.load_(_drows("k", d, t * P), B.whole("kin", [P, d])),
                 B.matmult(B.whole("id32", [P, P]), B.whole("kin", [P, d]), B.whole("tp", [d, P]),
                           accumulation_flag=3),
                 B.tensor_copy(B.whole("tp", [d, P]), _tile("kT", S, t * P, P, BF16, d)),
                 B.load_(_drows("v", d, t * P), B.whole("vin", [P, d])),
                 B.tensor_copy(B.whole("vin", [P, d]), _tile("vb", nt * d, t * d, d, BF16))]
    for i in range(nt):
        code += [B.load_(_drows("q", d, i * P), B.whole("qin", [P, d])),
                 B.matmult(B.whole("id32", [P, P]), B.whole("qin", [P, d]), B.whole("tp", [d, P]),
                           accumulation_flag=3),
                 B.tensor_copy(B.whole("tp", [d, P]), B.whole("qT", [d, P], BF16))]
        for j in range(S // KT):   # scores, 512 keys at a time, into the row buffer
            code += [B.matmult(_tile("kT", S, j * KT, KT, BF16, d), B.whole("qT", [d, P], BF16),
                               B.whole("sc", [P, KT]), accumulation_flag=3),
                     B.tensor_copy(B.whole("sc", [P, KT]), _tile("qk", S, j * KT, KT))]
        code += [B.tensor_reduce(B.whole("qk", [P, S]), _col("mx"), "max", "X"),
                 B.tensor_scalar(_col("mx"), _col("negm"), "mult", -scale),
                 B.activation(B.whole("qk", [P, S]), B.whole("ex", [P, S]), "Exp",
                              scale=scale, bias=_col("negm")),
                 B.tensor_reduce(B.whole("ex", [P, S]), _col("sm"), "add", "X"),
                 B.tensor_copy(B.whole("ex", [P, S]), B.whole("pb", [P, S], BF16))]
        for j in range(S // KT):   # P^T in 128 x 128 blocks, on the PE
            for c in range(KT // P):
                kb = j * (KT // P) + c
                code.append(B.matmult(B.whole("id16", [P, P], BF16), _tile("pb", S, kb * P, P, BF16),
                                      _tile("pt", KT, c * P, P), accumulation_flag=3))
            code.append(B.tensor_copy(B.whole("pt", [P, KT]), _tile("pT", S, j * KT, KT, BF16)))
        for kb in range(nt):       # P v, accumulated over the key blocks
            code.append(B.matmult(_tile("vb", nt * d, kb * d, d, BF16), _tile("pT", S, kb * P, P, BF16),
                                  B.whole("pv", [P, d]),
                                  accumulation_flag=2 if kb == 0 else 1))
        code += [B.reciprocal(_col("sm"), _col("rs")),
                 B.insn("TensorScalarPtr", "DVE", [B.whole("pv", [P, d]), _col("rs")],
                        [B.whole("o", [P, d])], op0="mult"),
                 B.save(B.whole("o", [P, d]), _drows("out", d, i * P))]
    return _module(allocs, code, synchronize)


def inputs_sd_attention(S=4096, d=64, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((S, d), dtype=np.float32) for _ in range(3))
    return {"q": q, "k": k, "v": v, "ident": np.eye(P, dtype=np.float32)}


def ref_sd_attention(q, k, v, **_):
    """softmax(q k^T / sqrt(d)) v in float64, on the bf16 roundings of q, k, v (the
    kernel's matmul inputs)."""
    from birsim import reference as ref
    q, k, v = (ref.decode(ref.cast(a, BF16)).astype(np.float64) for a in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=1, keepdims=True)) @ v


def tiled_sd_attention(q, k, v, dma=False, **_):
    """The kernel's tiling in NumPy fp32: per 128-query tile, scores in 512-key chunks into
    a row buffer, max, exp, sum, P v, times 1 / sum (q, k, v as given: NumPy has no bf16).
    ``dma``: v and each q tile are copied first, as the kernel's Loads do."""
    S, d = q.shape
    scale = np.float32(1.0 / math.sqrt(d))
    kT = np.ascontiguousarray(k.T)
    v = v.copy() if dma else v
    (qb,) = _dma_buffers(dma, (P, d), 1)
    out = np.empty((S, d), np.float32)
    qk = np.empty((P, S), np.float32)
    for i in range(0, S, P):
        qi = _load(q[i:i + P], qb)
        for j in range(0, S, KT):
            np.matmul(qi, kT[:, j:j + KT], out=qk[:, j:j + KT])
        negm = qk.max(axis=1, keepdims=True) * -scale
        ex = np.exp(qk * scale + negm)
        rs = 1 / ex.sum(axis=1, keepdims=True)
        out[i:i + P] = (ex @ v) * rs
    return out


# {=== layernorm ===}

FMAX = 512                    # BNStats' elements per partition


def layernorm(N=4096, D=8192, synchronize=True):
    """nki_layernorm_kernel_v2 over x [N, D], gamma and beta [1, D]; out [N, D]."""
    B = _B()
    assert N % P == 0 and D % FMAX == 0
    nch = D // FMAX
    allocs = [_t("x", "ExternalInput", [N, D], mem="DRAM"),
              _t("gamma", "ExternalInput", [1, D], mem="DRAM"),
              _t("beta", "ExternalInput", [1, D], mem="DRAM"),
              _t("out", "ExternalOutput", [N, D], mem="DRAM"),
              _t("g", "Internal", [P, D]), _t("b", "Internal", [P, D]),
              _t("xt", "Internal", [P, D]), _t("yt", "Internal", [P, D]),
              _t("st", "Internal", [P, 6 * nch]), _t("mv", "Internal", [P, 2]),
              _t("rstd", "Internal", [P, 1])]
    code = [B.load_(_bcast("gamma", D), B.whole("g", [P, D])),
            B.load_(_bcast("beta", D), B.whole("b", [P, D]))]
    for i in range(N // P):
        code.append(B.load_(_drows("x", D, i * P), B.whole("xt", [P, D])))
        for c in range(nch):
            code.append(B.insn("BNStats", "DVE", [_tile("xt", D, c * FMAX, FMAX)],
                               [_tile("st", 6 * nch, 6 * c, 6)]))
        code += [B.insn("BNStatsAggregate", "DVE", [B.whole("st", [P, 6 * nch])],
                        [B.whole("mv", [P, 2])]),
                 B.tensor_scalar(_col("mv", 2, 1), _col("rstd"), "add", EPS, "pow", -0.5),
                 B.insn("TensorScalarPtr", "DVE", [B.whole("xt", [P, D]), _col("mv", 2, 0),
                                                   _col("rstd")],
                        [B.whole("yt", [P, D])], op0="subtract", op1="mult"),
                 B.tensor_tensor(B.whole("yt", [P, D]), B.whole("g", [P, D]),
                                 B.whole("yt", [P, D]), "mult"),
                 B.tensor_tensor(B.whole("yt", [P, D]), B.whole("b", [P, D]),
                                 B.whole("yt", [P, D]), "add"),
                 B.save(B.whole("yt", [P, D]), _drows("out", D, i * P))]
    return _module(allocs, code, synchronize)


def inputs_layernorm(N=4096, D=8192, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((N, D), dtype=np.float32) * 2 + 0.5,
            "gamma": rng.uniform(0.5, 1.5, (1, D)).astype(np.float32),
            "beta": rng.uniform(-0.5, 0.5, (1, D)).astype(np.float32)}


def ref_layernorm(x, gamma, beta, **_):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * gamma + beta


def tiled_layernorm(x, gamma, beta, dma=False, **_):
    """Per 128-row tile: mean, variance, rstd, (x - mean) * rstd, * gamma, + beta.
    ``dma``: also the kernel's Load of each tile into a buffer and Save out of one."""
    N, D = x.shape
    out = np.empty_like(x)
    xb, yb = _dma_buffers(dma, (P, D))
    for i in range(0, N, P):
        xt = _load(x[i:i + P], xb)
        mean = xt.mean(axis=1, keepdims=True)
        rstd = (xt.var(axis=1, keepdims=True) + np.float32(EPS)) ** np.float32(-0.5)
        y = out[i:i + P] if yb is None else yb
        np.subtract(xt, mean, out=y)
        y *= rstd
        y *= gamma
        y += beta
        _save(y, out[i:i + P])
    return out


# {=== rmsnorm ===}

def rmsnorm(N=4096, D=512, synchronize=True):
    """The RMSNorm tutorial over a [N, D], g [1, D]; out [N, D]."""
    B = _B()
    assert N % P == 0
    allocs = [_t("a", "ExternalInput", [N, D], mem="DRAM"),
              _t("g", "ExternalInput", [1, D], mem="DRAM"),
              _t("out", "ExternalOutput", [N, D], mem="DRAM"),
              _t("gb", "Internal", [P, D]), _t("at", "Internal", [P, D]),
              _t("sq", "Internal", [P, D]), _t("yt", "Internal", [P, D]),
              _t("ss", "Internal", [P, 1]), _t("ms", "Internal", [P, 1]),
              _t("rr", "Internal", [P, 1])]
    code = [B.load_(_bcast("g", D), B.whole("gb", [P, D]))]
    for i in range(N // P):
        code += [B.load_(_drows("a", D, i * P), B.whole("at", [P, D])),
                 B.activation(B.whole("at", [P, D]), B.whole("sq", [P, D]), "Square"),
                 B.tensor_reduce(B.whole("sq", [P, D]), _col("ss"), "add", "X"),
                 B.tensor_scalar(_col("ss"), _col("ms"), "mult", 1.0 / D, "add", EPS),
                 B.activation(_col("ms"), _col("rr"), "Rsqrt"),
                 B.insn("TensorScalarPtr", "DVE", [B.whole("at", [P, D]), _col("rr")],
                        [B.whole("yt", [P, D])], op0="mult"),
                 B.tensor_tensor(B.whole("yt", [P, D]), B.whole("gb", [P, D]),
                                 B.whole("yt", [P, D]), "mult"),
                 B.save(B.whole("yt", [P, D]), _drows("out", D, i * P))]
    return _module(allocs, code, synchronize)


def inputs_rmsnorm(N=4096, D=512, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((N, D), dtype=np.float32) * 3,
            "g": rng.uniform(0.5, 1.5, (1, D)).astype(np.float32)}


def ref_rmsnorm(a, g, **_):
    a = a.astype(np.float64)
    return a / np.sqrt((a ** 2).mean(axis=1, keepdims=True) + EPS) * g


def tiled_rmsnorm(a, g, dma=False, **_):
    N, D = a.shape
    out = np.empty_like(a)
    ab, yb = _dma_buffers(dma, (P, D))
    for i in range(0, N, P):
        at = _load(a[i:i + P], ab)
        ss = np.square(at).sum(axis=1, keepdims=True)
        rr = 1 / np.sqrt(ss * np.float32(1.0 / D) + np.float32(EPS))
        y = out[i:i + P] if yb is None else yb
        np.multiply(at, rr, out=y)
        y *= g
        _save(y, out[i:i + P])
    return out


# {=== softmax ===}

def softmax(N=4096, D=4096, synchronize=True):
    """Row softmax of x [N, D]; out [N, D]."""
    B = _B()
    assert N % P == 0
    allocs = [_t("x", "ExternalInput", [N, D], mem="DRAM"),
              _t("out", "ExternalOutput", [N, D], mem="DRAM"),
              _t("xt", "Internal", [P, D]), _t("ex", "Internal", [P, D]),
              _t("yt", "Internal", [P, D]),
              _t("negm", "Internal", [P, 1]), _t("sm", "Internal", [P, 1]),
              _t("rs", "Internal", [P, 1])]
    code = []
    for i in range(N // P):
        code += [B.load_(_drows("x", D, i * P), B.whole("xt", [P, D])),
                 B.tensor_reduce(B.whole("xt", [P, D]), _col("negm"), "max", "X", negate=True),
                 B.activation(B.whole("xt", [P, D]), B.whole("ex", [P, D]), "Exp",
                              bias=_col("negm")),
                 B.tensor_reduce(B.whole("ex", [P, D]), _col("sm"), "add", "X"),
                 B.reciprocal(_col("sm"), _col("rs")),
                 B.insn("TensorScalarPtr", "DVE", [B.whole("ex", [P, D]), _col("rs")],
                        [B.whole("yt", [P, D])], op0="mult"),
                 B.save(B.whole("yt", [P, D]), _drows("out", D, i * P))]
    return _module(allocs, code, synchronize)


def inputs_softmax(N=4096, D=4096, seed=0):
    return {"x": np.random.default_rng(seed).standard_normal((N, D), dtype=np.float32) * 3}


def ref_softmax(x, **_):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def tiled_softmax(x, dma=False, **_):
    N, D = x.shape
    out = np.empty_like(x)
    xb, yb = _dma_buffers(dma, (P, D))
    for i in range(0, N, P):
        xt = _load(x[i:i + P], xb)
        y = out[i:i + P] if yb is None else yb
        np.subtract(xt, xt.max(axis=1, keepdims=True), out=y)
        np.exp(y, out=y)
        y *= 1 / y.sum(axis=1, keepdims=True)
        _save(y, out[i:i + P])
    return out


# {=== mamba ===}

def mamba(batch=1, channels=256, state=16, seq=512, synchronize=True):
    """mamba_v1's selective scan: delta, u [batch, channels, seq], A [channels, state],
    B, C [batch, state, seq]; out [batch, channels, seq]."""
    B = _B()
    assert channels % P == 0
    L, C, N = seq, channels, state
    allocs = [_t("delta", "ExternalInput", [batch, C, L], mem="DRAM"),
              _t("u", "ExternalInput", [batch, C, L], mem="DRAM"),
              _t("A", "ExternalInput", [C, N], mem="DRAM"),
              _t("B", "ExternalInput", [batch, N, L], mem="DRAM"),
              _t("C", "ExternalInput", [batch, N, L], mem="DRAM"),
              _t("out", "ExternalOutput", [batch, C, L], mem="DRAM"),
              _t("dl", "Internal", [P, L]), _t("ut", "Internal", [P, L]),
              _t("at", "Internal", [P, N]), _t("du", "Internal", [P, L]),
              _t("da", "Internal", [P, L]), _t("bb", "Internal", [P, L]),
              _t("dbu", "Internal", [P, L]), _t("cb", "Internal", [P, L]),
              _t("h", "Internal", [P, L]), _t("acc", "Internal", [P, L])]
    w = lambda n: B.whole(n, [P, L])          # noqa: E731
    code = []
    for b in range(batch):
        for ct in range(C // P):
            r0 = b * C + ct * P              # row of the [batch * C, L] view
            code += [B.load_(_drows("delta", L, r0), w("dl")),
                     B.load_(_drows("u", L, r0), w("ut")),
                     B.load_(_drows("A", N, ct * P), B.whole("at", [P, N])),
                     B.tensor_tensor(w("dl"), w("ut"), w("du"), "mult")]
            for n in range(N):
                code += [B.activation(w("dl"), w("da"), "Exp", scale=_col("at", N, n)),
                         B.load_(_bcast("B", L, (b * N + n) * L), w("bb")),
                         B.tensor_tensor(w("du"), w("bb"), w("dbu"), "mult"),
                         B.insn("TensorScalarPtr", "DVE", [w("da"), B.imm(0.0), w("dbu")],
                                [w("h")], op0="mult", op1="add", is_tensor_tensor_scan=True),
                         B.load_(_bcast("C", L, (b * N + n) * L), w("cb"))]
                if n == 0:
                    code.append(B.tensor_tensor(w("h"), w("cb"), w("acc"), "mult"))
                else:
                    code += [B.tensor_tensor(w("h"), w("cb"), w("h"), "mult"),
                             B.tensor_tensor(w("acc"), w("h"), w("acc"), "add")]
            code.append(B.save(w("acc"), _drows("out", L, r0)))
    return _module(allocs, code, synchronize)


def inputs_mamba(batch=1, channels=256, state=16, seq=512, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)    # noqa: E731
    return {"delta": rng.uniform(0.01, 0.2, (batch, channels, seq)).astype(np.float32),
            "u": f(batch, channels, seq),
            "A": -rng.uniform(0.5, 2.0, (channels, state)).astype(np.float32),
            "B": f(batch, state, seq), "C": f(batch, state, seq)}


def ref_mamba(delta, u, A, B, C, **_):
    """h_t = exp(delta_t A) h_{t-1} + delta_t u_t B_t; y_t = sum_n C_t h_t, in float64."""
    delta, u, A, B, C = (np.asarray(a, np.float64) for a in (delta, u, A, B, C))
    batch, ch, L = delta.shape
    h = np.zeros((batch, ch, A.shape[1]))
    y = np.empty((batch, ch, L))
    for t in range(L):
        dA = np.exp(delta[:, :, t, None] * A[None])
        h = dA * h + (delta[:, :, t] * u[:, :, t])[:, :, None] * B[:, None, :, t]
        y[:, :, t] = (h * C[:, None, :, t]).sum(axis=2)
    return y


def tiled_mamba(delta, u, A, B, C, dma=False, **_):
    """mamba_v1's tiling in NumPy fp32: per (batch, 128-channel tile, state) the same
    element-wise steps; the scan is a loop over the sequence (NumPy has no scan)."""
    batch, ch, L = delta.shape
    N = A.shape[1]
    out = np.empty_like(delta)
    h = np.empty((P, L), np.float32)
    db, ub, ob = _dma_buffers(dma, (P, L), 3)
    for b in range(batch):
        for c0 in range(0, ch, P):
            dl, ut = _load(delta[b, c0:c0 + P], db), _load(u[b, c0:c0 + P], ub)
            du = dl * ut
            acc = out[b, c0:c0 + P] if ob is None else ob
            for n in range(N):
                da = np.exp(dl * A[c0:c0 + P, n:n + 1])
                dbu = du * B[b, n]
                r = np.zeros(P, np.float32)
                for t in range(L):
                    r = da[:, t] * r + dbu[:, t]
                    h[:, t] = r
                if n == 0:
                    np.multiply(h, C[b, n], out=acc)
                else:
                    acc += h * C[b, n]
            _save(acc, out[b, c0:c0 + P])
    return out


# {=== table ===}

#: name -> (builder, inputs, float64 reference, NumPy tiling, output, default shape,
#: small shape for tests, tolerance: max |error| / max |reference|). Tolerances: fp32
#: kernels a few ulps (2^-24 = 6e-8) times the depth of their fp32 sums: 1e-5 for the
#: norms (a rounded mean/variance, pow/rsqrt), 1e-4 for softmax (exp of x - max rounded
#: in fp32 at |x| ~ 15, then a sequential 4096-term row sum, bound 4096 * 2^-24 = 2.4e-4,
#: ~1e-5 seen) and mamba (512-step scan, 16 states summed); SD attention 2e-2 (bf16
#: probabilities, 8 significant bits: 2^-8 = 3.9e-3 per term, ~1.5e-3 seen).
KERNELS = {
    "sd_attention": (sd_attention, inputs_sd_attention, ref_sd_attention, tiled_sd_attention,
                     "out", dict(S=4096, d=64), dict(S=512, d=64), 2e-2),
    "layernorm": (layernorm, inputs_layernorm, ref_layernorm, tiled_layernorm,
                  "out", dict(N=4096, D=8192), dict(N=256, D=1024), 1e-5),
    "rmsnorm": (rmsnorm, inputs_rmsnorm, ref_rmsnorm, tiled_rmsnorm,
                "out", dict(N=4096, D=512), dict(N=256, D=512), 1e-5),
    "softmax": (softmax, inputs_softmax, ref_softmax, tiled_softmax,
                "out", dict(N=4096, D=4096), dict(N=256, D=512), 1e-4),
    "mamba": (mamba, inputs_mamba, ref_mamba, tiled_mamba,
              "out", dict(batch=1, channels=256, state=16, seq=512),
              dict(batch=1, channels=128, state=4, seq=64), 1e-4),
}


def rel_error(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def main(argv=None):
    import time
    import birsim
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="all", choices=["all"] + sorted(KERNELS))
    ap.add_argument("--small", action="store_true", help="the tests' small shapes")
    args = ap.parse_args(argv)
    ok = True
    for name in sorted(KERNELS) if args.kernel == "all" else [args.kernel]:
        build, make, ref, _, out, shape, small, tol = KERNELS[name]
        shape = small if args.small else shape
        data = make(**shape)
        sim = birsim.Simulator(build(**shape))
        t0 = time.perf_counter()
        got = sim.run(data)[out]
        t = time.perf_counter() - t0
        err = rel_error(got, ref(**data))
        ok &= err <= tol
        print("%-13s %s: %d instructions in %.3f s; max |birsim - ref| / max |ref| = %.2e %s"
              % (name, shape, sim.stats["instructions"], t, err,
                 "MATCH" if err <= tol else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
