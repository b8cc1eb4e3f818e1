"""Randomness: the host MT19937-64 (seeded by Simulator rng_seed, 42), the per-partition gen-1
(LFSR, PCG32, Philox-4x32-10) and gen-2 (Xorwow) generators, Rand, Rand2, Dropout,
Get/SetRandState, RandGet/SetState and Memset Random -- against independent pure-Python
implementations of each generator written here (and published known answers)."""

import math
import warnings

import numpy as np
import pytest

import birsim
from bir import block, function, insn, module, tensor, whole

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1


# ---- independent oracles ------------------------------------------------------------

class MT64:
    """The 64-bit Mersenne Twister (Matsumoto & Nishimura, init_genrand64)."""

    def __init__(self, seed):
        self.mt = [seed & M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64)
        self.i = 312

    def next(self):
        mt = self.mt
        if self.i >= 312:
            for k in range(312):
                x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                y = mt[(k + 156) % 312] ^ (x >> 1)
                if x & 1:
                    y ^= 0xB5026F5AA96619E9
                mt[k] = y
            self.i = 0
        x = mt[self.i]
        self.i += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000 & M64
        x ^= (x << 37) & 0xFFF7EEE000000000 & M64
        x ^= x >> 43
        return x


def xorwow(s):
    """Marsaglia's xorwow on [x, y, z, w, v, d] (updated in place)."""
    t = s[0] ^ (s[0] >> 2)
    s[0], s[1], s[2], s[3] = s[1], s[2], s[3], s[4]
    s[4] = (s[4] ^ (s[4] << 4) & M32) ^ (t ^ (t << 1) & M32)
    s[5] = (s[5] + 362437) & M32
    return (s[4] + s[5]) & M32


def lfsr(s):
    x = s[0]
    x = (x >> 1) ^ (0x80200003 if x & 1 else 0)
    s[0] = x
    return x


def pcg32(s):
    old = s[0] | s[1] << 32
    inc = (s[2] | s[3] << 32) | 1
    new = (old * 6364136223846793005 + inc) & M64
    s[0], s[1] = new & M32, new >> 32
    xs = (((old >> 18) ^ old) >> 27) & M32
    rot = old >> 59
    return ((xs >> rot) | (xs << ((-rot) & 31))) & M32


def philox_block(s):
    c0, c1, c2, c3, k0, k1 = s
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    ctr = (s[0] | s[1] << 32 | s[2] << 64 | s[3] << 96) + 1
    for w in range(4):
        s[w] = (ctr >> (32 * w)) & M32
    return [c0, c1, c2, c3]


def test_oracles_match_published_known_answers():
    assert MT64(5489).next() == 14514284786278117030        # mt19937-64.c reference output
    assert philox_block([0] * 6) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]   # Random123 KAT


def initial_states(seed=42, parts=128):
    """Device states at run start: per partition gen-1 (3 draws) then gen-2 (12 draws)."""
    mt = MT64(seed)
    g1, g2 = [], []
    for _ in range(parts):
        words = []
        for _ in range(3 + 12):
            d = mt.next()
            words += [d & M32, d >> 32]
        g1.append(words[:6])
        g2.append([words[6 + 6 * l:12 + 6 * l] for l in range(4)])
    return mt, g1, g2


# ---- programs ---------------------------------------------------------------------------

P = 128


def _prog(*insns, tensors=()):
    return module([function("main", list(tensors), [block("b0", *insns)])])


def _run(prog, inputs=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(prog, **kw)
        return sim.run(inputs or {}), sim


def _out(name, shape, dtype="uint32"):
    return tensor(name, "ExternalOutput", dtype, shape, "SB")


def test_memset_random_is_the_host_mt19937_64_seeded_42():
    prog = _prog(insn("m", "Memset", "Pool", outs=[whole("o", (4, 8), "uint64")], mode="Random"),
                 tensors=[_out("o", (4, 8), "uint64")])
    out, _ = _run(prog)
    mt, _, _ = initial_states(42)
    assert out["o"].ravel().tolist() == [mt.next() for _ in range(32)]


def test_memset_random_narrow_dtype_takes_low_bits_and_seed_shifts():
    prog = _prog(insn("m", "Memset", "Pool", outs=[whole("o", (2, 5), "uint16")], mode="Random"),
                 tensors=[_out("o", (2, 5), "uint16")])
    out, _ = _run(prog, rng_seed=49)
    mt, _, _ = initial_states(49)
    assert out["o"].ravel().tolist() == [mt.next() & 0xFFFF for _ in range(10)]


def test_initial_device_states_come_from_the_host_generator():
    prog = _prog(insn("g1", "GetRandState", "DVE", outs=[whole("s1", (P, 6), "uint32")]),
                 insn("g2", "RandGetState", "DVE", outs=[whole("s2", (P, 24), "uint32")]),
                 tensors=[_out("s1", (P, 6)), _out("s2", (P, 24))])
    out, _ = _run(prog)
    _, g1, g2 = initial_states()
    assert out["s1"].tolist() == g1
    assert out["s2"].tolist() == [sum(lanes, []) for lanes in g2]


ALGS = {"LFSR": lfsr, "PCG32": pcg32}


@pytest.mark.parametrize("alg", ["LFSR", "PCG32", "PHILOX_1"])
def test_rand_raw_matches_the_generator(alg):
    F = 10
    prog = _prog(insn("r", "Rand", "DVE", outs=[whole("o", (P, F), "uint32")], random_algorithm=alg,
                      distribution="Raw", rand_num_steps=1, params=[]),
                 insn("r2", "Rand", "DVE", outs=[whole("o2", (P, F), "uint32")], random_algorithm=alg,
                      distribution="Raw"),
                 tensors=[_out("o", (P, F)), _out("o2", (P, F))])
    out, _ = _run(prog)
    _, g1, _ = initial_states()
    for name in ("o", "o2"):
        want = []
        for p in range(P):
            if alg == "PHILOX_1":
                row = []
                while len(row) < F:
                    row += philox_block(g1[p])
                want.append(row[:F])          # unused words of the last block are dropped
            else:
                want.append([ALGS[alg](g1[p]) for _ in range(F)])
        assert out[name].tolist() == want, name


def _u(x):
    return np.float32(x >> 8) * np.float32(2.0 ** -24)


def test_rand_uniform_normal_binomial():
    F = 16
    prog = _prog(insn("u", "Rand", "DVE", outs=[whole("u", (P, F), "float32")],
                      random_algorithm="PCG32", distribution="Uniform", params=[-2.0, 3.0]),
                 insn("n", "Rand", "DVE", outs=[whole("n", (P, F), "float32")],
                      random_algorithm="PCG32", distribution="Normal", params=[1.0, 0.5]),
                 insn("b", "Rand", "DVE", outs=[whole("b", (P, F), "float32")],
                      random_algorithm="PCG32", distribution="Binomial", params=[5, 0.25]),
                 tensors=[_out("u", (P, F), "float32"), _out("n", (P, F), "float32"),
                          _out("b", (P, F), "float32")])
    out, _ = _run(prog)
    _, g1, _ = initial_states()
    f = np.float32
    want_u = [[f(-2) + _u(pcg32(g1[p])) * f(5) for _ in range(F)] for p in range(P)]
    np.testing.assert_array_equal(out["u"], np.array(want_u, np.float32))
    want_n = []
    for p in range(P):
        row = []
        for _ in range(F):
            u1 = f((pcg32(g1[p]) >> 8) + 1) * f(2.0 ** -24)
            u2 = _u(pcg32(g1[p]))
            row.append(1.0 + 0.5 * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2))
        want_n.append(row)
    np.testing.assert_allclose(out["n"], np.array(want_n), rtol=1e-5, atol=1e-5)
    want_b = [[sum(_u(pcg32(g1[p])) < f(0.25) for _ in range(5)) for _ in range(F)]
              for p in range(P)]
    np.testing.assert_array_equal(out["b"], np.array(want_b, np.float32))


def _philox_words(state):
    """Philox-4x32-10's stream of one generator: 4 words a block, block after block."""
    while True:
        yield from philox_block(state)


@pytest.mark.parametrize("alg", ["LFSR", "PCG32", "PHILOX_1"])
@pytest.mark.parametrize("steps", [2, 3, 255])
def test_rand_num_steps_is_generator_steps_per_number(alg, steps):
    """rand_num_steps s: each number is the s-th of s generator steps (s - 1 outputs
    dropped), for every algorithm, distribution Raw and Uniform alike."""
    F = 5
    prog = _prog(insn("r", "Rand", "DVE", outs=[whole("o", (P, F), "uint32")], random_algorithm=alg,
                      distribution="Raw", rand_num_steps=steps),
                 insn("u", "Rand", "DVE", outs=[whole("u", (P, F), "float32")],
                      random_algorithm=alg, distribution="Uniform", rand_num_steps=steps,
                      params=[0.0, 2.0]),
                 tensors=[_out("o", (P, F)), _out("u", (P, F), "float32")])
    out, _ = _run(prog)
    _, g1, _ = initial_states()
    want_raw, want_u = [], []
    for p in range(P):
        if alg == "PHILOX_1":
            words = _philox_words(g1[p])
            nxt = lambda: next(words)          # noqa: E731 (one stream per instruction)
        else:
            nxt = lambda: ALGS[alg](g1[p])     # noqa: E731
        raw = []
        for _ in range(F):
            for _ in range(steps - 1):
                nxt()
            raw.append(nxt())
        want_raw.append(raw)
        if alg == "PHILOX_1":                  # a new instruction starts a new block
            words = _philox_words(g1[p])
            nxt = lambda: next(words)          # noqa: E731
        row = []
        for _ in range(F):
            for _ in range(steps - 1):
                nxt()
            row.append(np.float32(0) + _u(nxt()) * np.float32(2))
        want_u.append(row)
    assert out["o"].tolist() == want_raw
    np.testing.assert_array_equal(out["u"], np.array(want_u, np.float32))


def test_rand_num_steps_zero_and_one_are_one_step():
    F = 4
    prog = _prog(*[insn("r%d" % s, "Rand", "DVE", outs=[whole("o%d" % s, (P, F), "uint32")],
                        random_algorithm="LFSR", distribution="Raw", rand_num_steps=s)
                   for s in (0, 1)],
                 tensors=[_out("o0", (P, F)), _out("o1", (P, F))])
    out, _ = _run(prog)
    _, g1, _ = initial_states()
    assert out["o0"].tolist() == [[lfsr(g1[p]) for _ in range(F)] for p in range(P)]
    assert out["o1"].tolist() == [[lfsr(g1[p]) for _ in range(F)] for p in range(P)]


@pytest.mark.parametrize("steps", [256, -1])
def test_rand_num_steps_outside_a_byte_is_a_program_error(steps):
    prog = _prog(insn("r", "Rand", "DVE", outs=[whole("o", (P, 4), "uint32")], random_algorithm="LFSR",
                      distribution="Raw", rand_num_steps=steps),
                 tensors=[_out("o", (P, 4))])
    with pytest.raises(birsim.ProgramError, match="rand_num_steps"):
        _run(prog)


def test_rand2_uses_xorwow_lane_j_mod_4():
    F = 9
    prog = _prog(insn("r", "Rand2", "DVE", ins=[{"kind": "imm_value", "dtype": "float32", "value": 1.5},
                                                {"kind": "imm_value", "dtype": "float32", "value": 4.0}],
                      outs=[whole("o", (P, F), "float32")]),
                 tensors=[_out("o", (P, F), "float32")])
    out, _ = _run(prog)
    _, _, g2 = initial_states()
    f = np.float32
    want = [[f(1.5) + _u(xorwow(g2[p][j % 4])) * f(2.5) for j in range(F)] for p in range(P)]
    np.testing.assert_array_equal(out["o"], np.array(want, np.float32))


@pytest.mark.parametrize("keep", [False, True])
def test_dropout_mask_is_xorwow_against_the_probability(keep):
    F = 64
    x = np.random.default_rng(3).standard_normal((P, F)).astype(np.float32)
    prob = np.linspace(0, 1, P, dtype=np.float32).reshape(P, 1)
    prog = _prog(insn("d", "Dropout", "DVE", ins=[whole("x", (P, F), "float32"),
                                                   whole("p", (P, 1), "float32")],
                      outs=[whole("o", (P, F), "float32")], is_keep_threshold=keep),
                 tensors=[tensor("x", "ExternalInput", "float32", (P, F), "SB"),
                          tensor("p", "ExternalInput", "float32", (P, 1), "SB"),
                          _out("o", (P, F), "float32")])
    out, _ = _run(prog, {"x": x, "p": prob})
    _, _, g2 = initial_states()
    want = x.copy()
    for p in range(P):
        for j in range(F):
            u = _u(xorwow(g2[p][j % 4]))
            kept = (u < prob[p, 0]) if keep else not (u < prob[p, 0])
            if not kept:
                want[p, j] = 0
    np.testing.assert_array_equal(out["o"], want)
    # prob 0 keeps everything (drop mode) / drops everything (keep mode), and 1 the reverse
    assert np.array_equal(out["o"][0], np.zeros(F) if keep else x[0])
    assert np.array_equal(out["o"][-1], x[-1] if keep else np.zeros(F))


def test_set_state_then_draw_and_read_back():
    st1 = np.random.default_rng(5).integers(0, 2**32, (P, 6), dtype=np.uint64).astype(np.uint32)
    st2 = np.random.default_rng(6).integers(0, 2**32, (P, 24), dtype=np.uint64).astype(np.uint32)
    prog = _prog(insn("s1", "SetRandState", "DVE", ins=[whole("i1", (P, 6), "uint32")], rng_engine="DVE"),
                 insn("s2", "RandSetState", "DVE", ins=[whole("i2", (P, 24), "uint32")]),
                 insn("r", "Rand", "DVE", outs=[whole("o", (P, 3), "uint32")], random_algorithm="LFSR"),
                 insn("r2", "Rand2", "DVE", ins=[], outs=[whole("o2", (P, 4), "float32")]),
                 insn("g1", "GetRandState", "DVE", outs=[whole("b1", (P, 6), "uint32")]),
                 insn("g2", "RandGetState", "DVE", outs=[whole("b2", (P, 24), "uint32")]),
                 tensors=[tensor("i1", "ExternalInput", "uint32", (P, 6), "SB"),
                          tensor("i2", "ExternalInput", "uint32", (P, 24), "SB"),
                          _out("o", (P, 3)), _out("o2", (P, 4), "float32"),
                          _out("b1", (P, 6)), _out("b2", (P, 24))])
    out, _ = _run(prog, {"i1": st1, "i2": st2})
    g1 = st1.astype(np.int64).tolist()
    g2 = [[row[6 * l:6 * l + 6] for l in range(4)] for row in st2.astype(np.int64).tolist()]
    assert out["o"].tolist() == [[lfsr(g1[p]) for _ in range(3)] for p in range(P)]
    want2 = [[_u(xorwow(g2[p][j])) for j in range(4)] for p in range(P)]
    np.testing.assert_array_equal(out["o2"], np.array(want2, np.float32))
    assert out["b1"].tolist() == g1
    assert out["b2"].tolist() == [sum(l, []) for l in g2]


def test_state_tensor_shape_is_checked():
    prog = _prog(insn("s", "SetRandState", "DVE", ins=[whole("i", (P, 5), "uint32")]),
                 tensors=[tensor("i", "ExternalInput", "uint32", (P, 5), "SB")])
    with pytest.raises(birsim.SimulationError, match=r"SetRandState: needs \[P, 6\] words"):
        _run(prog, {"i": np.zeros((P, 5), np.uint32)})


def test_seed_reproducible_and_fresh_per_run():
    prog = _prog(insn("r", "Rand", "DVE", outs=[whole("o", (P, 8), "uint32")], random_algorithm="PCG32"),
                 insn("m", "Memset", "Pool", outs=[whole("m", (4, 4), "uint32")], mode="Random"),
                 tensors=[_out("o", (P, 8)), _out("m", (4, 4))])
    sim = birsim.Simulator(prog, rng_seed=3)
    a = sim.run({})
    b = sim.run({})                                   # each run starts from the seed
    c = birsim.Simulator(prog, rng_seed=3).run({})
    d = birsim.Simulator(prog, rng_seed=4).run({})
    for k in ("o", "m"):
        assert np.array_equal(a[k], b[k]) and np.array_equal(a[k], c[k])
        assert not np.array_equal(a[k], d[k])
