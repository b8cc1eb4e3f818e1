"""A readable listing of a loaded program, rendered from its tables (what the C core sees).

Each instruction line starts with its 0-based position in its block (``[3] name: ...``):
names are labels that may repeat. Access patterns print as ``MEM loc[start:num:step, ...] dtype``: the first dimension in
partitions (a step that is not a whole number of partitions prints as ``<n>e``, in
elements), the others in elements; a dynamic start prints as ``+(expression)``.
"""

from ._load.exprs import X_ADD, X_CONST, X_FLOORDIV, X_IV, X_MOD, X_MUL, X_REG, X_SHARD
from .dtypes import short_name

__all__ = ["render_listing", "expr_text"]


def expr_text(exprs, index, axis_names, reg_names):
    """The infix text of the expression at ``index`` of ``exprs``."""
    n = int(exprs[index])
    stack = []
    for k in range(index + 1, index + 1 + n, 2):
        op, arg = int(exprs[k]), int(exprs[k + 1])
        if op == X_CONST:
            stack.append(str(arg))
        elif op == X_IV:
            stack.append(axis_names[arg] if 0 <= arg < len(axis_names) else "iv%d" % arg)
        elif op == X_REG:
            stack.append(reg_names.get(arg, "r%d" % arg))
        elif op == X_SHARD:
            stack.append("shard")
        elif op == X_ADD and len(stack) >= 2:
            b = stack.pop()
            stack.append("%s + %s" % (stack.pop(), b))
        elif op == X_MUL and stack:
            stack.append("(%s)*%d" % (stack.pop(), arg) if " " in stack[-1]
                         else "%s*%d" % (stack.pop(), arg))
        elif op in (X_FLOORDIV, X_MOD) and stack:
            stack.append("(%s) %s %d" % (stack.pop(), "//" if op == X_FLOORDIV else "%", arg))
        else:
            stack.append("?")
    return stack[-1] if len(stack) == 1 else "?"


class _Renderer:
    def __init__(self, tables, cat, module):
        self.T = tables
        self.cat = cat
        self.m = module
        self.names = {}
        off = 0
        for s in tables["strings"].split(b"\0")[:-1]:
            self.names[off] = s.decode("utf-8", "replace")
            off += len(s) + 1
        self.regs = {i: self.s(r["name"]) for i, r in enumerate(tables["regs"])}
        self.lines = []

    def s(self, off):
        return self.names.get(int(off), "?")

    def expr(self, index):
        return expr_text(self.T["exprs"], int(index), self.m.axis_names, self.regs)

    def out(self, indent, text):
        self.lines.append("  " * indent + text)

    def run(self):
        m, T = self.m, self.T
        self.out(0, "module arch=%s version=%d entry=%s" % (m.arch, m.version, m.entry))
        for fi, f in enumerate(T["funcs"]):
            if int(f["prog"]) != m.core and T["module"][0]["nentries"]:
                continue                # another core's module
            name = self.s(f["name"])
            tag = (" (entry)" if name == m.entry
                   else " (nki)" if name in m.nki_functions else "")
            self.out(0, "")
            self.out(0, "function %s%s" % (name, tag))
            for t in m._all_tensors[f["set0"]:f["set0"] + f["nset"]]:
                self.out(1, self.tensor(t))
            for r in range(f["reg0"], f["reg0"] + f["nreg"]):
                reg = T["regs"][r]
                self.out(1, "register %s %s" % (self.regs[r], self.dt(reg["dtype"])))
            self.region(f["region"], 1)
        for qi in range(len(m._queue_blocks)):
            q = T["queues"][m._queue0 + qi]
            self.out(0, "")
            self.out(0, "dma_queue %s semaphores=%s special=%s" % (
                self.s(q["name"]), self.ints(q["sems"], q["nsems"]),
                self.ints(q["special"], q["nspecial"])))
            for ii in self.m._queue_blocks[qi]:
                self.insn(ii, 1)
        return "\n".join(self.lines) + "\n"

    def ints(self, off, n):
        return "[%s]" % ", ".join(str(int(v)) for v in self.T["ipool"][off:off + n])

    def dt(self, code):
        return short_name(self.cat.dtype_name.get(int(code), "?"))

    def tensor(self, t):
        locs = []
        for li in range(self.T["sets"][t.index]["loc0"],
                        self.T["sets"][t.index]["loc0"] + self.T["sets"][t.index]["nloc"]):
            loc = self.T["locs"][li]
            text = "%s %s[%d x %d]" % (self.cat.enum_name["MEM"][int(loc["memtype"])],
                                       self.s(loc["name"]), loc["parts"], loc["bpp"])
            if loc["placed"]:
                text += " @(%d, %d)" % (loc["base"], loc["addr"])
            locs.append(text)
        return "tensor %s %s %s %s%s: %s" % (
            t.name, t.kind, short_name(t.dtype), list(t.shape),
            " shared" if t.shared else "", ", ".join(locs) or "no locations")

    def region(self, r, indent):
        reg = self.T["regions"][r]
        for b in range(reg["block0"], reg["block0"] + reg["nblock"]):
            blk = self.T["blocks"][b]
            self.out(indent, "block %s:" % self.s(blk["name"]))
            for ii in range(blk["insn0"], blk["insn0"] + blk["ninsn"]):
                self.insn(ii, indent + 1, ii - blk["insn0"])

    def insn(self, ii, indent, position=None):
        ins = self.T["insns"][ii]
        op = self.cat.op_name.get(int(ins["op"]), "?")
        eng = self.cat.enum_name["ENGINE"].get(int(ins["engine"]), "?")
        o0, nin, nout = int(ins["opnd"]), int(ins["nin"]), int(ins["nout"])
        ins_t = [self.operand(k) for k in range(o0, o0 + nin)]
        outs_t = [self.operand(k) for k in range(o0 + nin, o0 + nin + nout)]
        text = "%s: %s %s" % (self.s(ins["name"]), eng, op)
        if position is not None:            # names may repeat; the position identifies
            text = "[%d] %s" % (position, text)
        if outs_t or ins_t:
            text += " %s <- %s" % (", ".join(outs_t) or "()", ", ".join(ins_t) or "()")
        extra = self.extras(op, ins)
        if extra:
            text += "  " + extra
        text += self.sync(ins)
        self.out(indent, text)
        if ins["body"] >= 0:
            self.region(int(ins["body"]), indent + 1)

    def extras(self, op, ins):
        cat = self.cat
        layout = cat.params.get(op, {})

        def prm(name):                     # a named slot of bs_ops.def (KeyError if none)
            slot, index = layout[name]
            return ins[slot][index]

        def alu(name):
            return cat.alu_name.get(int(prm(name)), "?")

        def blk(k):
            return self.s(self.T["blocks"][int(ins[k])]["name"])

        if op == "TensorTensor" or op == "RegisterAlu":
            return "op=%s" % alu("op")
        if op in ("TensorScalar", "TensorScalarPtr"):
            return "op0=%s(%g) op1=%s(%g)" % (alu("op0"), prm("const0"), alu("op1"),
                                              prm("const1"))
        if op == "TensorReduce":
            return "op=%s axis=%s%s" % (alu("op"), cat.enum_name["AXIS"].get(int(prm("axis"))),
                                        " negate" if prm("negate") else "")
        if op == "Activation":
            return "func=%s" % cat.act_name.get(int(prm("func")), "?")
        if op == "Loop":
            return "%s in range(%d, %d, %d)%s" % (
                self.m.axis_names[int(prm("axis"))], prm("lb"), prm("ub"), prm("stride"),
                " parallel" if prm("parallel") else "")
        if op == "DynamicForLoop":
            return "%s from %s while < %d + %d*%s step %s" % (
                self.m.axis_names[int(prm("axis"))], self.expr(prm("lb")), prm("ub_const"),
                prm("ub_coeff"), self.regs.get(int(prm("ub_reg")), "?"),
                self.expr(prm("stride")))
        if op == "DoWhile":
            return "while %s != 0" % self.regs.get(int(prm("cond_reg")), "?")
        if op == "CompareAndBranch":
            return "%s ? %s : %s" % (cat.enum_name["CMP"].get(int(prm("comp_op"))),
                                     blk("target"), blk("target2"))
        if op == "UnconditionalBranch":
            return "-> %s" % blk("target")
        if op in ("Call", "NKIKernel"):
            if int(ins["target"]) < 0:
                return "(no callee: no-op)"
            return "-> %s" % self.s(self.T["funcs"][int(ins["target"])]["name"])
        if op in ("CustomOp", "BIRKernel"):
            return "kernel=%s" % self.s(ins["str"])
        if op in ("DMATrigger", "SwitchQueueInstance", "ResetQueueInstance"):
            names = [self.s(self.T["insns"][int(b)]["name"])
                     for b in self.T["ipool"][ins["list"]:ins["list"] + ins["nlist"]]]
            q = self.s(self.T["queues"][int(prm("queue"))]["name"])
            return "queue=%s blocks=%s" % (q, names)
        if op == "Memset":
            return "constant=%d" % prm("constant")
        return ""

    def operand(self, k):
        o = self.T["opnds"][k]
        kind = self.cat.enum_name["OPND"].get(int(o["kind"]), "?")
        dt = self.dt(o["dtype"])
        if kind == "imm_value":
            return "%s %s" % (int(o["imm_bits"]) if o["imm_is_int"] else repr(float(o["imm"])),
                              dt)
        if kind == "imm_array":
            vals = self.T["fpool"][o["arr_off"]:o["arr_off"] + o["arr_len"]]
            return "[%s] %s" % (", ".join("%g" % v for v in vals), dt)
        if kind == "register_access":
            return "reg %s %s" % (self.regs.get(int(o["loc"]), "?"), dt)
        return self.ap(o, dt)

    def ap(self, o, dt):
        loc = self.T["locs"][int(o["loc"])]
        bpp = int(loc["bpp"]) or 1
        size = self.cat.dtype_size.get(self.cat.dtype_name.get(int(o["dtype"])), 1)
        dyn = o["offset_expr"] >= 0
        off = 0 if dyn else int(o["offset"]) * size      # bytes
        dims = []
        for d in range(int(o["ndim"])):
            step, num = int(o["step"][d]), int(o["num"][d])
            if d == 0:
                start = off // bpp
                ps = step * size
                sstep = str(ps // bpp) if ps % bpp == 0 else "%de" % step
            else:
                start = (off % bpp) // size if d == 1 else 0
                sstep = str(step)
            dims.append("%d:%d:%s" % (start, num, sstep))
        text = "%s %s[%s]" % (self.cat.enum_name["MEM"].get(int(loc["memtype"])),
                              self.s(loc["name"]), ", ".join(dims))
        if dyn:
            text += "+(%s)" % self.expr(o["offset_expr"])
        kind = self.cat.enum_name["OPND"].get(int(o["kind"]))
        if kind == "symbolic_ap":
            addrs = [self.expr(a) if a >= 0 else "-" for a in o["addrs"][:int(o["ndim"])]]
            text += "+addrs(%s)" % ", ".join(addrs)
        elif kind == "register_ap":
            text += "+(%s + %d)" % (self.regs.get(int(o["reg"]), "?"), o["const_ap_offset"])
        return text + " " + dt

    def sync(self, ins):
        parts = []
        s0, nw, nu = int(ins["sync"]), int(ins["nwait"]), int(ins["nupd"])
        for k in range(s0, s0 + nw + nu):
            r = self.T["syncs"][k]
            group = "WAIT" if k < s0 + nw else "UPDATE"
            mode = self.cat.enum_name[group].get(int(r["mode"]), "?").replace("_", "-")
            what = "%s %s" % ("evt" if r["type"] == 0 else "sem", r["id"])
            if mode == "sem-ge-reg":
                arg = " " + self.regs.get(int(r["reg"]), "?")
            elif mode.startswith("evt") or mode in ("sem-inc", "sem-dec"):
                arg = ""
            else:
                arg = " %d" % r["value"]
            core = " core %d" % r["target_core"] if group == "UPDATE" and r["target_core"] >= 0 \
                else ""
            parts.append("%s %s%s%s%s" % ("wait" if group == "WAIT" else "then", what, " " +
                                          mode, arg, core))
        return "  {%s}" % "; ".join(parts) if parts else ""


def render_listing(tables, catalog, module):
    """The listing text of ``module`` (whose tables are ``tables``)."""
    return _Renderer(tables, catalog, module).run()
