"""Flash-attention forward as a BIR program, checked against NumPy.

    python examples/flash_attention.py [--seq 4096] [--dim 128] [--dtype float32|bfloat16]

``build(S, d, dtype)`` writes the program with birsim.build: for each tile of 128 queries
and each tile of 512 keys, a PE Matmult gives the scores S = q k^T in PSUM; the running
row maximum m (TensorReduce max + TensorTensor max), P = exp(scale * S - scale * m)
(Activation Exp with a per-row bias), the row sums l and the rescaling factor
alpha = exp(scale * (m_old - m)) follow the online softmax; P is transposed in four
128 x 128 blocks on the PE (a Matmult against the identity), copied out of PSUM (cast to
``dtype``), and four accumulating Matmults give P v; the output tile is rescaled by alpha
and finally divided by l. Statistics and the output stay fp32; with ``bfloat16``, q, k,
v and the transposed P are bf16 (the matmul inputs), as kernels on the machine do.

Layouts (partition first): ``qT`` and ``kT`` are [d, S] (the head dimension on the
partitions, as the PE contracts over partitions), ``v`` is [128, S/128 * d] (key tile t
of 128 keys at columns t*d..), ``ident`` the 128 x 128 identity, ``o`` like ``v``.
``to_inputs``/``from_output`` convert from/to plain [S, d] arrays. The instructions are
in data order on their engines without semaphores: run with the default ``in_order``
schedule.

``numpy_tiled`` is the same tiling and arithmetic order in NumPy (the peer of
bench/bench_flash.py); ``attention`` the plain softmax(q k^T * scale) v in float64.
"""

import argparse
import math
import sys

import numpy as np

QT, KT = 128, 512          # query tile (output partitions), key tile (PSUM bank of fp32)


def build(S, d, dtype="float32", synchronize=True):
    """The BIR module dict of the forward pass over S queries/keys of head size d; its
    engines are ordered by :func:`birsim.synchronize` (``synchronize=False``: the bare
    program, which races)."""
    from birsim import build as B
    assert S % KT == 0 and d <= 128, "S must be a multiple of 512 and d <= 128"
    scale = 1.0 / math.sqrt(d)
    nq, nk = S // QT, S // KT
    f32 = "float32"

    def t(name, kind, shape, dt=f32, mem="SB"):
        return B.tensor(name, kind, dt, shape, mem)

    def cols(name, P, width, c0, w, dt=f32):
        """Columns [c0, c0 + w) of a [P, width] tensor."""
        return B.ap(name, [[width, P], [1, w]], dt, offset=c0 or None)

    def col1(name):
        return B.ap(name, [[1, QT], [1, 1]])

    def bcast(name, w):
        return B.ap(name, [[1, QT], [0, w]])

    allocs = [t("qT", "ExternalInput", [d, S], dtype), t("kT", "ExternalInput", [d, S], dtype),
              t("v", "ExternalInput", [128, (S // 128) * d], dtype),
              t("ident", "ExternalInput", [128, 128]),
              t("o", "ExternalOutput", [128, (S // 128) * d]),
              t("s", "Internal", [QT, KT], mem="PSUM"), t("pt", "Internal", [QT, KT], mem="PSUM"),
              t("pv", "Internal", [QT, d], mem="PSUM"),
              t("p", "Internal", [QT, KT]), t("pT", "Internal", [128, 4 * QT], dtype),
              t("acc", "Internal", [QT, d])]
    for n in ("m0", "m1", "mx", "negm", "alpha", "l", "rs", "rl"):
        allocs.append(t(n, "Internal", [QT, 1]))
    code = []
    for i in range(nq):
        for j in range(nk):
            m_old, m_new = ("m%d" % ((j + 1) % 2), "m%d" % (j % 2))
            code.append(B.matmult(cols("kT", d, S, j * KT, KT, dtype),
                                  cols("qT", d, S, i * QT, QT, dtype), B.whole("s", [QT, KT]),
                                  accumulation_flag=3))
            code.append(B.tensor_reduce(B.whole("s", [QT, KT]),
                                        col1("mx" if j else m_new), "max", "X"))
            if j:
                code.append(B.tensor_tensor(col1(m_old), col1("mx"), col1(m_new), "max"))
            code.append(B.tensor_scalar(col1(m_new), col1("negm"), "mult", -scale))
            code.append(B.activation(B.whole("s", [QT, KT]), B.whole("p", [QT, KT]), "Exp",
                                     scale=scale, bias=col1("negm")))
            code.append(B.tensor_reduce(B.whole("p", [QT, KT]), col1("rs" if j else "l"),
                                        "add", "X"))
            if j:
                code.append(B.activation(col1(m_old), col1("alpha"), "Exp", scale=scale,
                                         bias=col1("negm")))
                code.append(B.tensor_tensor(col1("l"), col1("alpha"), col1("l"), "mult"))
                code.append(B.tensor_tensor(col1("l"), col1("rs"), col1("l"), "add"))
            for c in range(KT // 128):          # P^T in 128 x 128 blocks, on the PE
                code.append(B.matmult(B.whole("ident", [128, 128]),
                                      cols("p", QT, KT, c * 128, 128),
                                      cols("pt", QT, KT, c * QT, QT), accumulation_flag=3))
            code.append(B.tensor_copy(B.whole("pt", [QT, KT]), B.whole("pT", [128, 4 * QT], dtype)))
            for c in range(KT // 128):          # P v over the tile's 512 keys
                kt = j * (KT // 128) + c
                code.append(B.matmult(cols("v", 128, (S // 128) * d, kt * d, d, dtype),
                                      cols("pT", 128, 4 * QT, c * QT, QT, dtype),
                                      B.whole("pv", [QT, d]),
                                      accumulation_flag=2 if c == 0 else 1))
            if j:
                code.append(B.tensor_tensor(B.whole("acc", [QT, d]), bcast("alpha", d),
                                            B.whole("acc", [QT, d]), "mult"))
                code.append(B.tensor_tensor(B.whole("acc", [QT, d]), B.whole("pv", [QT, d]),
                                            B.whole("acc", [QT, d]), "add"))
            else:
                code.append(B.tensor_copy(B.whole("pv", [QT, d]), B.whole("acc", [QT, d])))
        code.append(B.reciprocal(col1("l"), col1("rl")))
        code.append(B.tensor_tensor(B.whole("acc", [QT, d]), bcast("rl", d),
                                    cols("o", 128, (S // 128) * d, i * d, d), "mult"))
    return B.module([B.function("main", allocs, code)], synchronize=synchronize)


def to_inputs(q, k, v, dtype="float32"):
    """The program's inputs from [S, d] arrays (cast to dtype's NumPy type)."""
    from birsim.dtypes import numpy_dtype
    S, d = q.shape
    nt = numpy_dtype(dtype)
    vt = v.reshape(S // 128, 128, d).transpose(1, 0, 2).reshape(128, (S // 128) * d)
    return {"qT": np.ascontiguousarray(q.T).astype(nt), "kT": np.ascontiguousarray(k.T).astype(nt),
            "v": np.ascontiguousarray(vt).astype(nt), "ident": np.eye(128, dtype=np.float32)}


def from_output(o, S, d):
    """The [S, d] attention output from the program's ``o``."""
    return np.asarray(o).reshape(128, S // 128, d).transpose(1, 0, 2).reshape(S, d)


def numpy_tiled(q, k, v):
    """The same tiling in NumPy fp32 (online softmax over 512-key tiles, 128-query tiles)."""
    S, d = q.shape
    scale = np.float32(1.0 / math.sqrt(d))
    out = np.empty((S, d), np.float32)
    for i in range(0, S, QT):
        qi = q[i:i + QT]
        m = l = acc = None
        for j in range(0, S, KT):
            s = qi @ k[j:j + KT].T
            mx = s.max(axis=1, keepdims=True)
            m_new = mx if m is None else np.maximum(m, mx)
            p = np.exp(s * scale - m_new * scale)
            rs = p.sum(axis=1, keepdims=True)
            pv = p @ v[j:j + KT]
            if m is None:
                l, acc = rs, pv
            else:
                alpha = np.exp(m * scale - m_new * scale)
                l = l * alpha + rs
                acc = acc * alpha + pv
            m = m_new
        out[i:i + QT] = acc / l
    return out


def attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v in float64."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=1, keepdims=True)) @ v


def inputs(S, d, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((S, d), dtype=np.float32) for _ in range(3))


TOLERANCE = {"float32": 1e-4, "bfloat16": 3e-2}   # max |error| / max |reference|


def main(argv=None):
    import time
    import birsim
    from birsim import reference
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dtype", default="float32", choices=sorted(TOLERANCE))
    ap.add_argument("--threads", default=1)
    args = ap.parse_args(argv)
    S, d = args.seq, args.dim
    threads = args.threads if args.threads == "auto" else int(args.threads)
    q, k, v = inputs(S, d)
    sim = birsim.Simulator(build(S, d, args.dtype), threads=threads)
    t0 = time.perf_counter()
    o = from_output(sim.run(to_inputs(q, k, v, args.dtype))["o"], S, d)
    t = time.perf_counter() - t0
    want = attention(*(reference.cast(a, args.dtype).astype(np.float32)
                       for a in (q, k, v)))
    err = float(np.max(np.abs(o - want)) / np.max(np.abs(want)))
    ok = err <= TOLERANCE[args.dtype]
    print(f"flash attention {S}x{d} {args.dtype}: {sim.stats['instructions']} instructions "
          f"in {t:.3f} s; max |birsim - attention| / max |attention| = {err:.2e}")
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
