"""Control-flow graph, dominators and post-dominators of one PTX function.

The function body (nested ``{ }`` scopes included) is flattened into one instruction list;
labels map to the index of the next instruction. Basic blocks start at every branch target and
after every ``bra``/``brx``/``ret``/``exit``/``trap``. A conditional edge carries the guard
``(register key, value)`` that holds when it is taken, so path-sensitive analyses can refine
their state on it.

Sources: PTX ISA 9.1 §9.7.12 (control flow instructions: ``bra``, ``brx.idx``, ``ret``, ``exit``,
``trap``), §11.1 (scoping of labels); dominators by Cooper, Harvey and Kennedy, "A Simple, Fast
Dominance Algorithm" (2001).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verifier.tables import FunctionInfo, ScopeInfo
from verifier.ptx.ast import Instruction, Label, Scope

__all__ = ["CFG", "TERMINATORS", "Block", "Edge", "build_cfg"]

#: Mnemonics that end a basic block.
TERMINATORS = frozenset({"bra", "brx", "ret", "exit", "trap"})


@dataclass(slots=True)
class Edge:
    """A CFG edge ``src -> dst``; ``cond`` is ``(predicate key, value)`` true on it, or None."""

    src: int
    dst: int
    cond: tuple[str, bool] | None = None


@dataclass(slots=True)
class Block:
    """A basic block: instructions ``start`` .. ``end - 1`` of :attr:`CFG.instrs`."""

    id: int
    start: int
    end: int
    succs: list[Edge] = field(default_factory=list)
    preds: list[Edge] = field(default_factory=list)


class CFG:
    """The control-flow graph of one function body.

    Attributes:
        info: the function's :class:`~verifier.context.FunctionInfo`.
        instrs: every instruction in source order (nested scopes flattened).
        scopes: the :class:`~verifier.context.ScopeInfo` each instruction sits in.
        blocks: basic blocks; block 0 is the entry. ``exit_id`` (= ``len(blocks)``) is a virtual
            exit reached by ``ret``/``exit``/``trap`` and by falling off the end.
        block_of: instruction index -> block id.
        idom / ipdom: immediate (post-)dominator per block (entry / exit map to themselves;
            None for blocks unreachable from the entry / that cannot reach the exit).
        rpo: reachable blocks in reverse post-order.
        in_cycle: block ids that lie on a cycle (loop bodies).
        unresolved: ``(instruction index, label)`` of branch targets that could not be resolved
            (D2 reports them; the CFG treats them as exits).
    """

    def __init__(self, info: FunctionInfo):
        self.info = info
        self.instrs: list[Instruction] = []
        self.scopes: list[ScopeInfo] = []
        self.unresolved: list[tuple[int, str]] = []
        self._label_index: dict[int, int] = {}
        self._flatten()
        self.blocks: list[Block] = []
        self.block_of: list[int] = []
        self._build_blocks()
        self.exit_id = len(self.blocks)
        self.rpo = self._rpo()
        self.idom = self._dominators(forward=True)
        self.ipdom = self._dominators(forward=False)
        self.in_cycle = self._cycles()

    # ------------------------------------------------------------------ construction

    def _flatten(self) -> None:
        fi = self.info
        if fi.root is None:
            return
        by_scope = {id(si.scope): si for si in fi.scopes}
        instrs, scopes, labels = self.instrs, self.scopes, self._label_index
        stack: list[tuple[list, int, ScopeInfo]] = [(fi.root.scope.stmts, 0, fi.root)]
        while stack:
            stmts, k, si = stack.pop()
            while k < len(stmts):
                st = stmts[k]
                k += 1
                t = type(st)
                if t is Instruction:
                    instrs.append(st)
                    scopes.append(si)
                elif t is Label:
                    labels[id(st)] = len(instrs)
                elif t is Scope:
                    stack.append((stmts, k, si))
                    stack.append((st.stmts, 0, by_scope[id(st)]))
                    break

    def target_index(self, i: int, name: str) -> int | None:
        """Instruction index a label named ``name`` resolves to from instruction ``i``."""
        lab = self.scopes[i].lookup_label(name)
        if lab is None:
            return None
        return self._label_index.get(id(lab))

    def _build_blocks(self) -> None:
        instrs = self.instrs
        n = len(instrs)
        leaders = {0} if n else set()
        targets: dict[int, list[int | None]] = {}
        for i, ins in enumerate(instrs):
            b = ins.parts[0]
            if b not in TERMINATORS:
                continue
            if i + 1 < n:
                leaders.add(i + 1)
            ts: list[int | None] = []
            if b == "bra" and ins.operands:
                name = ins.operands[-1].name or ins.operands[-1].text
                ts.append(self._resolve(i, name))
            elif b == "brx" and len(ins.operands) >= 2:
                d = self.info.label_directives.get(ins.operands[1].name or "")
                for lab in (d.args if d is not None else ()):
                    ts.append(self._resolve(i, lab))
            for t in ts:
                if t is not None and t < n:
                    leaders.add(t)
            targets[i] = ts
        starts = sorted(leaders)
        block_of = [0] * n
        for bid, s in enumerate(starts):
            e = starts[bid + 1] if bid + 1 < len(starts) else n
            self.blocks.append(Block(bid, s, e))
            for i in range(s, e):
                block_of[i] = bid
        self.block_of = block_of
        exit_id = len(self.blocks)
        start_block = {s: bid for bid, s in enumerate(starts)}

        def to_block(idx: int | None) -> int:
            if idx is None or idx >= n:
                return exit_id
            return start_block[idx]

        for blk in self.blocks:
            last = instrs[blk.end - 1]
            b = last.parts[0]
            fall = blk.end if blk.end < n else None
            guard = None
            if last.predicate is not None:
                guard = self.reg_key(last.predicate, blk.end - 1)
            edges: list[Edge] = []
            if b == "bra":
                (t,) = targets[blk.end - 1] or [None]
                if guard is None:
                    edges.append(Edge(blk.id, to_block(t)))
                else:
                    taken = not last.negated
                    edges.append(Edge(blk.id, to_block(t), (guard, taken)))
                    edges.append(Edge(blk.id, to_block(fall), (guard, not taken)))
            elif b == "brx":
                for t in targets[blk.end - 1]:
                    edges.append(Edge(blk.id, to_block(t)))
                if guard is not None:
                    edges.append(Edge(blk.id, to_block(fall), (guard, last.negated)))
            elif b == "trap":
                # 'trap' aborts the kernel (PTX ISA 9.1 §9.7.19.1): no thread runs past it and
                # no barrier waits for a trapped thread, so its path ends without reaching the
                # exit (assertion failures of CUTLASS / libcu++ code are not early exits)
                if guard is not None:
                    edges.append(Edge(blk.id, to_block(fall), (guard, last.negated)))
            elif b in ("ret", "exit"):
                if guard is None:
                    edges.append(Edge(blk.id, exit_id))
                else:
                    taken = not last.negated
                    edges.append(Edge(blk.id, exit_id, (guard, taken)))
                    edges.append(Edge(blk.id, to_block(fall), (guard, not taken)))
            else:
                edges.append(Edge(blk.id, to_block(fall)))
            # merge duplicate destinations (a branch to the next instruction)
            seen: dict[int, Edge] = {}
            for e in edges:
                if e.dst in seen:
                    seen[e.dst].cond = None
                else:
                    seen[e.dst] = e
            blk.succs = list(seen.values())
            for e in blk.succs:
                if e.dst != exit_id:
                    self.blocks[e.dst].preds.append(e)

    def _resolve(self, i: int, name: str) -> int | None:
        t = self.target_index(i, name)
        if t is None:
            self.unresolved.append((i, name))
        return t

    # ------------------------------------------------------------------ register keys

    def reg_key(self, name: str, i: int) -> str:
        """A function-unique key for register ``name`` as seen from instruction ``i``.

        Registers declared in nested scopes (Triton's ``.reg .pred complete;`` inside inline-asm
        blocks) get ``name#<line of the declaration>`` so same-named registers of sibling blocks
        stay distinct; everything else is its name.
        """
        si = self.scopes[i]
        if si.parent is None:
            return name
        d = si.lookup_reg(name)
        if d is None:
            return name
        root = self.info.root
        if root is not None and (root.regs.get(d.name) is d or root.ranges.get(d.name) is d):
            return name
        return f"{name}#{d.line}"

    # ------------------------------------------------------------------ graph algorithms

    def succ_ids(self, b: int) -> list[int]:
        """Successor block ids of block ``b`` (the exit included)."""
        return [e.dst for e in self.blocks[b].succs]

    def _rpo(self) -> list[int]:
        if not self.blocks:
            return []
        seen = {0}
        order: list[int] = []
        stack: list[tuple[int, int]] = [(0, 0)]
        exit_id = self.exit_id
        while stack:
            b, k = stack[-1]
            succ = self.blocks[b].succs
            if k < len(succ):
                stack[-1] = (b, k + 1)
                d = succ[k].dst
                if d != exit_id and d not in seen:
                    seen.add(d)
                    stack.append((d, 0))
            else:
                stack.pop()
                order.append(b)
        order.reverse()
        return order

    def _dominators(self, forward: bool) -> list[int | None]:
        n = len(self.blocks)
        exit_id = self.exit_id
        if forward:
            order = self.rpo
            root = 0

            def preds(b: int) -> list[int]:
                return [e.src for e in self.blocks[b].preds]
        else:
            # reverse graph: post-order of the reversed CFG from the exit
            rpreds: dict[int, list[int]] = {b: [] for b in range(n + 1)}
            for blk in self.blocks:
                for e in blk.succs:
                    rpreds[e.dst].append(blk.id)
            seen = {exit_id}
            post: list[int] = []
            stack: list[tuple[int, int]] = [(exit_id, 0)]
            while stack:
                b, k = stack[-1]
                ps = rpreds[b]
                if k < len(ps):
                    stack[-1] = (b, k + 1)
                    d = ps[k]
                    if d not in seen:
                        seen.add(d)
                        stack.append((d, 0))
                else:
                    stack.pop()
                    post.append(b)
            order = post[::-1]
            root = exit_id

            def preds(b: int) -> list[int]:
                return self.succ_ids(b) if b != exit_id else []
        index = {b: k for k, b in enumerate(order)}
        idom: dict[int, int] = {root: root}
        changed = True
        while changed:
            changed = False
            for b in order:
                if b == root:
                    continue
                new = None
                for p in preds(b):
                    if p not in idom:
                        continue
                    if new is None:
                        new = p
                        continue
                    a, c = p, new
                    while a != c:
                        while index[a] > index[c]:
                            a = idom[a]
                        while index[c] > index[a]:
                            c = idom[c]
                    new = a
                if new is not None and idom.get(b) != new:
                    idom[b] = new
                    changed = True
        return [idom.get(b) for b in range(n + 1)]

    def dominates(self, a: int, b: int) -> bool:
        """Block ``a`` dominates block ``b`` (both reachable)."""
        while True:
            if a == b:
                return True
            d = self.idom[b]
            if d is None or d == b:
                return False
            b = d

    def _cycles(self) -> set[int]:
        # Tarjan's SCC, iterative; blocks in a non-trivial SCC (or with a self loop) are cyclic
        n = len(self.blocks)
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        on: set[int] = set()
        st: list[int] = []
        out: set[int] = set()
        counter = 0
        for root in range(n):
            if root in index:
                continue
            work = [(root, 0)]
            index[root] = low[root] = counter
            counter += 1
            st.append(root)
            on.add(root)
            while work:
                v, k = work[-1]
                succ = [d for d in self.succ_ids(v) if d != self.exit_id]
                if k < len(succ):
                    work[-1] = (v, k + 1)
                    w = succ[k]
                    if w not in index:
                        index[w] = low[w] = counter
                        counter += 1
                        st.append(w)
                        on.add(w)
                        work.append((w, 0))
                    elif w in on:
                        low[v] = min(low[v], index[w])
                else:
                    work.pop()
                    if work:
                        u = work[-1][0]
                        low[u] = min(low[u], low[v])
                    if low[v] == index[v]:
                        comp = []
                        while True:
                            w = st.pop()
                            on.discard(w)
                            comp.append(w)
                            if w == v:
                                break
                        if len(comp) > 1 or v in self.succ_ids(v):
                            out.update(comp)
        return out

    def region(self, b: int) -> set[int]:
        """Blocks executed conditionally on block ``b``'s branch: reachable from its successors
        without passing through its immediate post-dominator (the reconvergence point)."""
        stop = self.ipdom[b]
        out: set[int] = set()
        work = [d for d in self.succ_ids(b) if d != stop and d != self.exit_id]
        while work:
            x = work.pop()
            if x in out:
                continue
            out.add(x)
            for d in self.succ_ids(x):
                if d != stop and d != self.exit_id and d not in out:
                    work.append(d)
        return out

    def edge_region(self, e: Edge) -> set[int]:
        """Blocks reachable along edge ``e`` before the source's reconvergence point."""
        stop = self.ipdom[e.src]
        out: set[int] = set()
        work = [e.dst] if e.dst not in (stop, self.exit_id) else []
        while work:
            x = work.pop()
            if x in out:
                continue
            out.add(x)
            for d in self.succ_ids(x):
                if d != stop and d != self.exit_id and d not in out:
                    work.append(d)
        return out


def build_cfg(info: FunctionInfo) -> CFG:
    """The :class:`CFG` of a function with a body."""
    return CFG(info)
