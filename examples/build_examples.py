"""Regenerate the BIR-JSON examples in this folder with :mod:`birsim.build` (they are
checked in; this script is how they were written, and tests/api/test_api_build.py checks that
it still writes exactly them). Run: python examples/build_examples.py"""

import json
import os

from birsim import build as B

HERE = os.path.dirname(os.path.abspath(__file__))


def dram(name, kind, dtype, shape):
    """A DRAM tensor laid out row-major."""
    return B.tensor(name, kind, dtype, shape, "DRAM", dims=_dims(shape, dtype))


def sbuf(name, dtype, shape, addr=None, mem="SB"):
    """An on-chip tile (``addr`` bytes into each partition when given)."""
    return B.tensor(name, "Internal", dtype, shape, mem, dims=_dims(shape, dtype),
                    base=None if addr is None else 0, addr=addr)


def _dims(shape, dtype):
    size = {"float32": 4, "int32": 4}[dtype]
    free = 1
    for n in shape[1:]:
        free *= n
    return [shape[0], free * size]


def at(axis, coeff):
    """offset = coeff * axis (elements)."""
    return B.affine([(B.iv(axis), coeff)])


def program(functions, synchronize=False):
    """A module; ``synchronize=True`` runs :func:`birsim.synchronize` over it (the
    examples that do not order their engines by hand)."""
    return B.module(functions, version=2, arch="gen3", synchronize=synchronize)


def tiled_matmul(K=512, M=128, N=512, T=128):
    """out = relu(x.T @ w + bias): K tiles of T rows accumulate into one PSUM tile.

    Synchronised with three semaphores, so it is right under every schedule and the
    race checker finds nothing:
        load_bias (DMA)  bs := bias
        zero_ps   (DVE)  ps := 0                                  sem 2 := 1 (buffers free)
        load_x    (DMA)  xs := x[tile k]      wait sem 2 >= 1;    sem 1 += 1
        load_w    (DMA)  ws := w[tile k]      wait sem 2 >= 1;    sem 2 -= 1, sem 1 += 1
        mm        (PE)   ps += xs.T @ ws      wait sem 1 >= 2;    sem 1 -= 2, sem 2 += 1
        epilogue  (Act)  ys := relu(ps + bs)  wait sem 2 >= 1;    sem 2 -= 1, sem 3 += 1
        store     (DMA)  out := ys            wait sem 3 >= 1;    sem 3 -= 1
    Every semaphore is back at 0 at the end."""
    sem = "semaphore"
    x, w = dram("x", "ExternalInput", "float32", [K, M]), dram("w", "ExternalInput", "float32", [K, N])
    bias = dram("bias", "ExternalInput", "float32", [M, 1])
    out = dram("out", "ExternalOutput", "float32", [M, N])
    xs, ws = sbuf("xs", "float32", [T, M], 0), sbuf("ws", "float32", [T, N], 4096)
    bs, ys = sbuf("bs", "float32", [M, 1], 8192), sbuf("ys", "float32", [M, N], 12288)
    ps = sbuf("ps", "float32", [M, N], 0, mem="PSUM")
    body = [
        B.load_(B.ap(x, [[M, T], [1, M]], offset=at("k", T * M)), B.ap(xs, [[M, T], [1, M]]),
                name="load_x", sync=B.sync_info([B.sem_wait(2)], [B.sem_inc(1)])),
        B.load_(B.ap(w, [[N, T], [1, N]], offset=at("k", T * N)), B.ap(ws, [[N, T], [1, N]]),
                name="load_w",
                sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2), B.sem_inc(1)])),
        B.matmult(B.ap(ws, [[N, T], [1, N]]), B.ap(xs, [[M, T], [1, M]]),
                  B.ap(ps, [[N, M], [1, N]]), accumulation_flag=1, name="mm",
                  sync=B.sync_info([B.sem_wait(1, 2)],
                                   [B.update(1, "sem-sub-imm", 2, type=sem), B.sem_inc(2)])),
    ]
    main = [
        B.load_(B.ap(bias, [[1, M], [1, 1]]), B.ap(bs, [[1, M], [1, 1]]), name="load_bias"),
        B.memset(B.ap(ps, [[N, M], [1, N]]), 0, mode="Const", name="zero_ps", engine="DVE",
                 sync=B.sync_info([], [B.update(2, "sem-wr-imm", 1, type=sem)])),
        B.loop("k", K // T, [B.block("kbody", *body)], name="kloop"),
        B.activation(B.ap(ps, [[N, M], [1, N]]), B.ap(ys, [[N, M], [1, N]]), "Relu",
                     scale=1.0, bias=B.ap(bs, [[1, M], [1, 1]]), name="epilogue",
                     sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2), B.sem_inc(3)])),
        B.save(B.ap(ys, [[N, M], [1, N]]), B.ap(out, [[N, M], [1, N]]), name="store",
               sync=B.sync_info([B.sem_wait(3)], [B.sem_dec(3)])),
    ]
    return program([B.function("main", [x, w, bias, out, xs, ws, bs, ys, ps],
                               [B.block("entry", *main)])])


def sync_pipeline(T=6, P=16, F=8, M=4):
    """A five-stage multi-engine pipeline over T tiles in a Loop, ordered only by
    semaphores (the block lists the stages out of order on purpose):

        load  (DMA)        xs := x[tile i]                      sem 0 += 1
        dve   (DVE)        ys := xs * 0.5 - 1     wait sem 0 >= 1; sem 0 -= 1, sem 1 += 1
        act   (Activation) zs := relu(ys * 2)     wait sem 1 >= 1; sem 1 -= 1, sem 2 += 1
        pe    (PE)         ps := w.T @ zs         wait sem 2 >= 1; sem 2 -= 1, sem 3 += 1
        store (DMA)        out[tile i] := ps      wait sem 3 >= 1; sem 3 -= 1

    x is [T*P, F], w is [P, M] (loaded once before the loop), out is [T*M, F]."""
    def sem(waits, updates):
        return B.sync_info([B.sem_wait(i) for i in waits],
                           [B.sem_inc(i) if inc else B.sem_dec(i) for i, inc in updates])
    x = dram("x", "ExternalInput", "float32", [T * P, F])
    w = dram("w", "ExternalInput", "float32", [P, M])
    out = dram("out", "ExternalOutput", "float32", [T * M, F])
    ws, xs = sbuf("ws", "float32", [P, M], 0), sbuf("xs", "float32", [P, F], 1024)
    ys, zs = sbuf("ys", "float32", [P, F], 2048), sbuf("zs", "float32", [P, F], 3072)
    ps = sbuf("ps", "float32", [M, F], 0, mem="PSUM")
    tile = [[F, P], [1, F]]
    stages = {
        "load": B.load_(B.ap(x, tile, offset=at("i", P * F)), B.ap(xs, tile), name="load",
                        sync=sem([], [(0, True)])),
        "dve": B.tensor_scalar(B.ap(xs, tile), B.ap(ys, tile), "mult", 0.5, "subtract", 1.0,
                               name="dve", sync=sem([0], [(0, False), (1, True)])),
        "act": B.activation(B.ap(ys, tile), B.ap(zs, tile), "Relu", scale=2.0, name="act",
                            sync=sem([1], [(1, False), (2, True)])),
        "pe": B.matmult(B.ap(zs, tile), B.ap(ws, [[M, P], [1, M]]), B.ap(ps, [[F, M], [1, F]]),
                        accumulation_flag=2, name="pe", sync=sem([2], [(2, False), (3, True)])),
        "store": B.save(B.ap(ps, [[F, M], [1, F]]),
                        B.ap(out, [[F, M], [1, F]], offset=at("i", M * F)), name="store",
                        sync=sem([3], [(3, False)])),
    }
    main = [
        B.load_(B.ap(w, [[M, P], [1, M]]), B.ap(ws, [[M, P], [1, M]]), name="load_w"),
        B.loop("i", T, [B.block("tile", *(stages[k] for k in ("pe", "act", "load", "dve",
                                                                "store")))], name="tiles"),
    ]
    return program([B.function("main", [x, w, out, ws, xs, ys, zs, ps],
                               [B.block("entry", *main)])])


# ---- control-flow examples -----------------------------------------------------------

def dynamic_add(P=128, F=1024, T=128):
    """out[:, :ntiles*T] = a + b, tile by tile; the tile count comes from the input
    tensor `ntiles` through a register (TensorLoad) into a DynamicForLoop whose
    upper bound is T * register and whose induction value (a column offset, stride T)
    moves symbolic_ap addresses. Columns past the last tile stay 0."""
    a, b = dram("a", "ExternalInput", "float32", [P, F]), dram("b", "ExternalInput", "float32", [P, F])
    ntiles = dram("ntiles", "ExternalInput", "int32", [1, 1])
    out = dram("out", "ExternalOutput", "float32", [P, F])
    sa, sb = sbuf("sa", "float32", [P, T], 0), sbuf("sb", "float32", [P, T], T * 4)
    sc = sbuf("sc", "float32", [P, T], 2 * T * 4)
    n = B.register("n", "int32")
    col = [None, B.iv("c")]
    tile = [[T, P], [1, T]]
    body = [
        B.load_(B.sym_ap(a, [[F, P], [1, T]], col), B.ap(sa, tile), name="load_a"),
        B.load_(B.sym_ap(b, [[F, P], [1, T]], col), B.ap(sb, tile), name="load_b"),
        B.tensor_tensor(B.ap(sa, tile), B.ap(sb, tile), B.ap(sc, tile), "add", name="add"),
        B.save(B.ap(sc, tile), B.sym_ap(out, [[F, P], [1, T]], col), name="store"),
    ]
    main = [
        B.memset(B.ap(out, [[F, P], [1, F]]), 0, mode="Const", engine="DMA", name="clear"),
        B.tensor_load(B.ap(ntiles, [[1, 1], [1, 1]]), B.reg(n), name="read_n"),
        B.dyn_loop("c", B.affine([(B.rv("n"), T)]), [B.block("tile", *body)], stride=T,
                   name="tiles"),
    ]
    return program([B.function("main", [a, b, ntiles, out, sa, sb, sc, n],
                               [B.block("entry", *main)])],
                   synchronize=True)


def halving_do_while(MAXV=32):
    """Halve a counter until it is zero: values[k] = the counter after trip k+1,
    trips = number of trips (the body runs at least once, so n = 0 gives 1)."""
    n = dram("n", "ExternalInput", "int32", [1, 1])
    trips = dram("trips", "ExternalOutput", "int32", [1, 1])
    values = dram("values", "ExternalOutput", "int32", [1, MAXV])
    v, k = B.register("v", "int32"), B.register("k", "int32")
    one = B.imm(1, "int32")
    body = [
        B.register_alu(B.reg(v), B.reg(v), one, "arith_shift_right", name="halve"),
        B.tensor_save(B.reg(v), B.reg_ap(values, [[1, 1], [1, 1]], "k", 0), name="record"),
        B.register_alu(B.reg(k), B.reg(k), one, "add", name="count"),
    ]
    main = [
        B.memset(B.ap(values, [[MAXV, 1], [1, MAXV]]), 0, mode="Const", engine="DMA",
                 name="clear"),
        B.tensor_load(B.ap(n, [[1, 1], [1, 1]]), B.reg(v), name="read_n"),
        B.register_move(B.reg(k), B.imm(0, "int32"), name="k0"),
        B.do_while("v", [B.block("halve_body", *body)], name="halving"),
        B.tensor_save(B.reg(k), B.ap(trips, [[1, 1], [1, 1]]), name="write_trips"),
    ]
    return program([B.function("main", [n, trips, values, v, k], [B.block("entry", *main)])])


def call_twice(P=128, F=256):
    """oa = relu(2a + 1), ob = relu(2b + 1): one function called twice, its tensor
    parameters bound to different SBUF tiles each time."""
    tile = [[F, P], [1, F]]
    a, b = dram("a", "ExternalInput", "float32", [P, F]), dram("b", "ExternalInput", "float32", [P, F])
    oa = dram("oa", "ExternalOutput", "float32", [P, F])
    ob = dram("ob", "ExternalOutput", "float32", [P, F])
    sa, sb = sbuf("sa", "float32", [P, F], 0), sbuf("sb", "float32", [P, F], F * 4)
    ya, yb = sbuf("ya", "float32", [P, F], 2 * F * 4), sbuf("yb", "float32", [P, F], 3 * F * 4)
    main = [
        B.load_(B.ap(a, tile), B.ap(sa, tile), name="load_a"),
        B.load_(B.ap(b, tile), B.ap(sb, tile), name="load_b"),
        B.call("affine_relu", {"x": "sa", "y": "ya"}, name="call_a"),
        B.call("affine_relu", {"x": "sb", "y": "yb"}, name="call_b"),
        B.save(B.ap(ya, tile), B.ap(oa, tile), name="store_a"),
        B.save(B.ap(yb, tile), B.ap(ob, tile), name="store_b"),
    ]
    x, y = sbuf("x", "float32", [P, F]), sbuf("y", "float32", [P, F])
    callee = [
        B.activation(B.ap(x, tile), B.ap(y, tile), "Relu", scale=2.0, bias=B.imm(1.0),
                     name="act"),
        B.ret(engine="Activation", name="ret"),
    ]
    return program([
        B.function("main", [a, b, oa, ob, sa, sb, ya, yb], [B.block("entry", *main)]),
        B.function("affine_relu", [x, y], [B.block("body", *callee)])])


def branch_ladder(P=128, F=64):
    """out = (x + y, x - y, x * y, max(x, y))[clamp(sel, 0, 3)]: a ladder of
    CompareAndBranch instructions on a register picks one of four blocks."""
    tile = [[F, P], [1, F]]
    x, y = dram("x", "ExternalInput", "float32", [P, F]), dram("y", "ExternalInput", "float32", [P, F])
    sel = dram("sel", "ExternalInput", "int32", [1, 1])
    out = dram("out", "ExternalOutput", "float32", [P, F])
    sx, sy = sbuf("sx", "float32", [P, F], 0), sbuf("sy", "float32", [P, F], F * 4)
    so = sbuf("so", "float32", [P, F], 2 * F * 4)
    s = B.register("s", "int32")

    def rung(name, limit, yes, no):
        return B.compare_and_branch(B.reg(s), B.imm(limit, "int32"), "IS_LTIMM", yes, no,
                                    name=name)

    def compute(name, op):
        return B.tensor_tensor(B.ap(sx, tile), B.ap(sy, tile), B.ap(so, tile), op, name=name)

    blocks = [
        B.block("entry",
                B.load_(B.ap(x, tile), B.ap(sx, tile), name="load_x"),
                B.load_(B.ap(y, tile), B.ap(sy, tile), name="load_y"),
                B.tensor_load(B.ap(sel, [[1, 1], [1, 1]]), B.reg(s), name="read_sel"),
                rung("lt1", 1, "case_add", "test2")),
        B.block("test2", rung("lt2", 2, "case_sub", "test3")),
        B.block("test3", rung("lt3", 3, "case_mul", "case_max")),
        B.block("case_add", compute("add", "add"), B.branch("done", name="add_done")),
        B.block("case_sub", compute("sub", "subtract"), B.branch("done", name="sub_done")),
        B.block("case_mul", compute("mul", "mult"), B.branch("done", name="mul_done")),
        B.block("case_max", compute("max", "max")),           # falls through to done
        B.block("done", B.save(B.ap(so, tile), B.ap(out, tile), name="store")),
    ]
    return program([B.function("main", [x, y, sel, out, sx, sy, so, s], blocks)], synchronize=True)


def rmsnorm_customop(P=128, D=512):
    """A fused RMSNorm as a CustomOp whose kernel is a Python function
    (examples/rmsnorm_kernel.py, registered as "rmsnorm"): x and gamma are loaded into
    SBUF by DMA, the CustomOp on the Pool engine computes
    ys = xs / sqrt(mean(xs**2, axis=-1) + eps) * gamma, and a DMA stores the result."""
    x = dram("x", "ExternalInput", "float32", [P, D])
    gamma = dram("gamma", "ExternalInput", "float32", [1, D])
    y = dram("y", "ExternalOutput", "float32", [P, D])
    xs, gs = sbuf("xs", "float32", [P, D], 0), sbuf("gs", "float32", [1, D], D * 4)
    ys = sbuf("ys", "float32", [P, D], 2 * D * 4)
    rows, g = [[D, P], [1, D]], [[D, 1], [1, D]]
    main = [
        B.load_(B.ap(x, rows), B.ap(xs, rows), name="load_x"),
        B.load_(B.ap(gamma, g), B.ap(gs, g), name="load_gamma"),
        B.custom_op("rmsnorm", [B.ap(xs, rows), B.ap(gs, g)], [B.ap(ys, rows)],
                    srcs_shape=[[P, D], [D]], dsts_shape=[[P, D]], name="rmsnorm"),
        B.save(B.ap(ys, rows), B.ap(y, rows), name="store"),
    ]
    return program([B.function("main", [x, gamma, y, xs, gs, ys], [B.block("entry", *main)])],
                   synchronize=True)


EXAMPLES = {"tiled_matmul.json": tiled_matmul,
            "dynamic_add.json": dynamic_add,
            "halving_do_while.json": halving_do_while,
            "call_twice.json": call_twice,
            "branch_ladder.json": branch_ladder,
            "sync_pipeline.json": sync_pipeline,
            "rmsnorm_customop.json": rmsnorm_customop}


def text(make):
    """The checked-in text of one example."""
    return json.dumps(make(), indent=1) + "\n"


if __name__ == "__main__":
    for fname, make in EXAMPLES.items():
        with open(os.path.join(HERE, fname), "w") as f:
            f.write(text(make))
        print("wrote", fname)
