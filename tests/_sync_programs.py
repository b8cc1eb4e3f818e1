"""Program builders and independent reference models for tests/sync/test_sync_semantics.py.

Everything here builds plain BIR-JSON dicts with the helpers of tests/bir.py. The
reference models (the scheduler model, the semaphore arithmetic) are written from
docs/spec/BIR-JSON.md / docs/spec/control-flow-sync.md, not from birsim's C code.
"""

import re

import numpy as np

from bir import function, insn, module, sync_info, tensor, update, wait, whole

ROTATION = ["Pool", "Activation", "PE", "DMA", "DVE", "SP"]   # round_robin order
U32 = 2 ** 32


# ---- small programs --------------------------------------------------------------

def sem_wait(sid, value):
    return wait(sid, "sem-ge-imm", value)


def evt_wait(eid):
    return wait(eid, "evt-set-then-clear", type="event")


def evt_set(eid):
    return update(eid, "evt-set", type="event")


def nop(name, engine="SP", waits=(), updates=(), opcode="EventSemaphore"):
    """An instruction that only carries sync_info."""
    return insn(name, opcode, engine, sync=sync_info(waits, updates))


def probe(name="probe", ids=range(256), engine="SP"):
    """An instruction waiting for every semaphore in ``ids`` to be 0xFFFFFFFF: it can
    only run if all are, so the DeadlockError it causes reports every current value."""
    return nop(name, engine, [sem_wait(i, U32 - 1) for i in ids])


_NOW = re.compile(r"semaphore (\d+) >= (\d+) \(now (\d+)\)")


def sem_values_from_deadlock(message, ids=range(256)):
    """{id: value} read off a probe's deadlock report (a satisfied wait is not listed,
    so a missing id holds 0xFFFFFFFF)."""
    seen = {int(m.group(1)): int(m.group(3)) for m in _NOW.finditer(message)
            if int(m.group(2)) == U32 - 1}
    return {i: seen.get(i, U32 - 1) for i in ids}


def scalar_tensor(name, kind="Internal", mem="SB", dtype="float32", shape=(1, 1), **kw):
    return tensor(name, kind, dtype, list(shape), mem, **kw)


def trace_step(name, engine, k, waits=(), updates=(), loc="x"):
    """``x := x * 8 + k``: executed instructions leave their order as octal digits."""
    return insn(name, "TensorScalar", engine, ins=[whole(loc, (1, 1))],
                outs=[whole(loc, (1, 1))], op0="mult", const0=8.0, op1="add",
                const1=float(k), sync=sync_info(waits, updates) if (waits or updates) else None)


def trace_program(steps):
    """``steps``: list of (engine, waits, updates). Instruction k (1-based) is named
    ``s<k>``. Input ``x0`` (1x1), output ``x``; the run result decodes to the order."""
    body = [insn("init", "TensorCopy", "ALL", ins=[whole("x0", (1, 1))],
                 outs=[whole("x", (1, 1))])]
    for k, (eng, w, u) in enumerate(steps, 1):
        body.append(trace_step("s%d" % k, eng, k, w, u))
    return module([function("main", [
        scalar_tensor("x0", "ExternalInput", "DRAM"),
        scalar_tensor("x", "ExternalOutput", "DRAM")], body)])


def decode_trace(value, n):
    """The executed order (list of 1-based instruction numbers) from ``x``."""
    v = int(value)
    order = []
    while v:
        order.append(v % 8)
        v //= 8
    order.reverse()
    assert len(order) == n, (value, order)
    return order


# ---- reference model of the scheduler ---------------------------------------------

class RefCore:
    """A Python model of one block's engine queues (docs/spec/BIR-JSON.md "Engines and order
    inside a block" and docs/spec/control-flow-sync.md §3): per-engine queues in block order, an instruction is
    ready when it heads its queue and its waits hold; events are consumed when it runs,
    updates applied afterwards."""

    def __init__(self, steps):
        self.steps = steps                      # list of (engine, waits, updates)
        self.sem = [0] * 256
        self.evt = [False] * 256
        self.queues = {}
        for k, (eng, _, _) in enumerate(steps):
            self.queues.setdefault(eng, []).append(k)

    def holds(self, w):
        if w.get("type") == "event" or w["mode"] == "evt-set-then-clear":
            return self.evt[w["id"]]
        return self.sem[w["id"]] >= w["value"]

    def ready(self):
        out = []
        for eng, q in self.queues.items():
            if q and all(self.holds(w) for w in self.steps[q[0]][1]):
                out.append((q[0], eng))
        return sorted(out)

    def run_one(self, k):
        eng, waits, updates = self.steps[k]
        self.queues[eng].remove(k)
        for w in waits:
            if w["mode"] == "evt-set-then-clear":
                # docs/spec/control-flow-sync.md §3.2: clearing an event that is not set is fatal (two waits on
                # one event in one instruction reach here the second time).
                assert self.evt[w["id"]]
                self.evt[w["id"]] = False
        for u in updates:
            m, i, v = u["mode"], u["id"], u.get("value", 0)
            if m == "evt-set":
                assert not self.evt[i]
                self.evt[i] = True
            elif m == "sem-wr-imm":
                self.sem[i] = v % U32
            elif m in ("sem-add-imm", "sem-inc"):
                self.sem[i] = (self.sem[i] + v) % U32
            elif m in ("sem-sub-imm", "sem-dec"):
                self.sem[i] = (self.sem[i] - v) % U32

    def order(self, schedule):
        """Executed order under ``in_order`` or ``round_robin`` (None on deadlock)."""
        done, last = [], None
        while any(self.queues.values()):
            ready = self.ready()
            if not ready:
                return None
            if schedule == "in_order":
                k, eng = ready[0]
            else:
                start = ROTATION.index(last) + 1 if last in ROTATION else 0
                by_eng = dict((e, k) for k, e in ready)
                for d in range(len(ROTATION)):
                    e = ROTATION[(start + d) % len(ROTATION)]
                    if e in by_eng:
                        k, eng = by_eng[e], e
                        break
            last = eng
            self.run_one(k)
            done.append(k + 1)
        return done

    def valid(self, order):
        """Whether ``order`` (1-based) is a possible execution (each step ready)."""
        for k1 in order:
            if (k1 - 1) not in [k for k, _ in self.ready()]:
                return False
            self.run_one(k1 - 1)
        return not any(self.queues.values())


def sem_reference(ops):
    """uint32 semaphore value after applying (mode, value) updates to 0, with NumPy."""
    s = np.uint32(0)
    with np.errstate(over="ignore"):
        for mode, v in ops:
            v = np.uint32(v % U32)
            if mode == "sem-wr-imm":
                s = v
            elif mode in ("sem-add-imm", "sem-inc"):
                s = np.uint32(s + v)
            else:
                s = np.uint32(s - v)
    return int(s)


# ---- reading deadlock reports ------------------------------------------------------

_ENTRY = re.compile(r"^  cores? ([\d,\-]+), engine (\w+), function '([^']*)', block '([^']*)', "
                    r"position (\d+), instruction '([^']*)' \((\w+)\)$")


def _core_list(text):
    cores = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        cores += list(range(int(a), int(b or a) + 1))
    return cores


def blocked_entries(message):
    """The entries of a DeadlockError message: a list of dicts with keys cores (list),
    engine, function, block, position, instruction, opcode, waits (list of lines)."""
    out = []
    for line in message.splitlines()[1:]:
        m = _ENTRY.match(line)
        if m:
            out.append({"cores": _core_list(m.group(1)), "engine": m.group(2),
                        "function": m.group(3), "block": m.group(4),
                        "position": int(m.group(5)), "instruction": m.group(6),
                        "opcode": m.group(7), "waits": []})
        elif line.startswith("    ") and out:
            out[-1]["waits"].append(line.strip())
    return out


def blocked_per_core(message):
    """{(core, instruction): [wait lines]} from a DeadlockError message."""
    return {(k, e["instruction"]): e["waits"] for e in blocked_entries(message)
            for k in e["cores"]}
