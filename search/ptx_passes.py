"""PTX-level transformations applied to Triton's PTX: small, named, each with its own legality test.

Every pass is a pure function ``PTX text -> PTX text`` (or ``None`` when it does not apply to this
module: nothing to change, or legality cannot be shown). A pass never changes the entry signature
or the launch contract, so the result is launched exactly like its input. Every result still goes
through ptxas, the verifier and the GPU harness before it can be accepted (:mod:`search.engine`);
the legality tests here only keep proposals that cannot be right out of the pool.

Passes (names are stable; they appear in reports and transcripts as ``+name``):

* cache-policy hints on global memory (PTX ISA 9.0 §9.7.9.8 ``ld``, §9.7.9.10 ``st``,
  §9.7.9.25.3 ``cp.async``): ``ld.nc`` (read-only data path; only for loads whose address derives
  from *input* pointer parameters alone, by a taint analysis over the entry's registers),
  ``ld.L1::no_allocate``, ``ld.L1::evict_last``, ``ld.L2::evict_first``, ``ld.L2::evict_last``,
  ``ld.L2::256B`` / ``ld.L2::128B`` (L2 prefetch size), ``cp.async.L2::256B`` / ``cp.async.L2::128B``,
  ``st.cs`` (streaming store), ``st.L1::no_allocate``. Not offered: a ``createpolicy`` cache hint
  on ``cp.async`` (``cp.async.cg.shared.global.L2::cache_hint ..., policy``): ptxas 12.8 accepts it
  but every such candidate stopped with CUDA_ERROR_ILLEGAL_INSTRUCTION on the H200 (bitdelta_batched,
  sage_attention, forgetting_attention; 2026-12-01 02:55 UTC), so :func:`_policy_hint` is only
  registered for ``ld``;
* entry performance directives (PTX ISA 9.0 §11.4): ``maxnreg=N`` (``.maxnreg``; legal when
  ``N`` x threads <= 65536 registers per SM, H200 / sm_90), ``minnctapersm=N`` (``.minnctapersm``;
  legal when N CTAs fit one SM: N x threads <= 2048 and N x (shared + 1 KiB reserved) <= 228 KiB,
  CUDA C Programming Guide, compute capability 9.0 table);
* approximate math (PTX ISA 9.0 §9.7.3 ``div``, ``rcp``, ``sqrt``): ``approx.div`` (``div.rn.f32`` /
  ``div.full.f32`` -> ``div.approx.ftz.f32``, max error 2 ulp for |b| < 2^126), ``approx.sqrt``
  (``sqrt.rn.f32`` -> ``sqrt.approx.ftz.f32``), ``approx.rcp`` (``rcp.rn.f32`` ->
  ``rcp.approx.ftz.f32``): offered only when every output's tolerance is at least fp16's
  (``rtol >= 1e-3``, :func:`approx_allowed`); fp32 outputs are held to 1e-5 and never get them;
* vector widening (``vec.ld2``): two adjacent scalar ``ld.global.b32`` from one base register at
  byte offsets ``o`` and ``o + 4`` under the same guard become one ``ld.global.v2.b32`` when the
  address is provably 8-byte aligned (a known-bits analysis of the address: pointer parameters are
  16-byte aligned by the harness contract and Triton's ``tt.divisibility`` hint).

ptxas option variants: the candidate format (:class:`harness.Candidate`) carries PTX only and is
always assembled with Triton's ptxas flags, so option variants are offered through their PTX
equivalents (``.maxnreg`` for ``-maxrregcount``, explicit cache operators for ``-dlcm``/``-dscm``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = [
    "PassContext",
    "PtxPass",
    "PASSES",
    "passes_for",
    "apply_passes",
    "approx_allowed",
    "input_only_address_regs",
    "MAX_REGS_PER_SM",
    "MAX_THREADS_PER_SM",
    "SMEM_PER_SM",
]

MAX_REGS_PER_SM = 65536
"""32-bit registers per SM on sm_90 (CUDA C Programming Guide, Technical Specifications table)."""
MAX_THREADS_PER_SM = 2048
"""Resident threads per SM on sm_90 (same table)."""
SMEM_PER_SM = 233472
"""Shared memory per SM on sm_90: 228 KiB (same table); each CTA also reserves 1 KiB."""
SMEM_RESERVED_PER_CTA = 1024
"""Shared memory the system reserves per CTA on sm_80+ (CUDA C Programming Guide §16.8.3 / §K)."""


@dataclass(frozen=True)
class PassContext:
    """What a pass may need to know about the kernel beyond its PTX.

    Attributes:
        input_params: PTX ``.param`` names of pointer parameters whose buffers the kernel only reads
            (spec role ``in``); the harness allocates every buffer separately, so they do not alias.
        threads: threads per CTA (the entry's ``.reqntid``).
        dynamic_smem: dynamic shared memory per CTA, bytes.
        registers: registers per thread ptxas gave the unmodified kernel (None: unknown).
        approx_ok: approximate-math passes are allowed (see :func:`approx_allowed`).
    """

    input_params: frozenset[str] = frozenset()
    threads: int = 128
    dynamic_smem: int = 0
    registers: int | None = None
    approx_ok: bool = False


@dataclass(frozen=True)
class PtxPass:
    """One named transformation.

    Attributes:
        name: stable id used in reports (``ld.nc``, ``maxnreg=128``).
        kind: ``cache`` | ``directive`` | ``approx`` | ``vector``.
        doc: one line: what it does and the source of its rule.
        fn: ``(ptx, ctx) -> ptx | None``; None = not applicable (nothing to change, or illegal).
    """

    name: str
    kind: str
    doc: str
    fn: Callable[[str, PassContext], str | None] = field(repr=False)

    def apply(self, ptx: str, ctx: PassContext) -> str | None:
        """Apply the pass; None when it does not apply or would change nothing."""
        out = self.fn(ptx, ctx)
        return None if out is None or out == ptx else out


# ---- a minimal line-level reader of Triton's PTX -------------------------------------------------

_INSTR_RE = re.compile(r"^(?P<indent>\s*)(?P<pred>@!?%\w+\s+)?(?P<op>[a-z][\w.:]*)(?P<rest>.*)$")
_REG_RE = re.compile(r"%[A-Za-z_][\w$]*")
_PARAM_LD_RE = re.compile(r"^\s*ld\.param(?:\.\w+)+\s+(%\w+)\s*,\s*\[\s*([\w$]+)\s*(?:\+\s*\d+\s*)?\]")
_ADDR_RE = re.compile(r"\[\s*(%\w+)\s*(?:\+\s*(-?\d+)\s*)?\]")

UNKNOWN = "?"
"""Taint of a value that came from memory or from an undefined register."""


def _code_lines(ptx: str) -> list[tuple[int, str]]:
    """(index, code) for every line, comments stripped."""
    out = []
    for i, line in enumerate(ptx.split("\n")):
        code = line.split("//", 1)[0]
        out.append((i, code))
    return out


def _split_dst_src(op: str, rest: str) -> tuple[list[str], list[str]]:
    """Registers written and read by one instruction (over-approximating reads).

    Stores, barriers, ``cp.async``, ``red``/``prefetch`` write no register. Everything else writes
    the registers of its first operand (a brace list counts as several).
    """
    rest = rest.strip().rstrip(";")
    regs = _REG_RE.findall(rest)
    if not regs:
        return [], []
    base = op.split(".", 1)[0]
    if base in ("st", "cp", "bar", "barrier", "red", "prefetch", "fence", "mbarrier", "stmatrix",
                "wgmma", "tcgen05", "cp.async", "ret", "bra", "membar", "griddepcontrol"):
        if base == "wgmma" and op.startswith("wgmma.mma_async"):
            # accumulators are read and written: treat the first brace list as both
            first = rest.split("}", 1)[0]
            acc = _REG_RE.findall(first)
            return acc, regs
        return [], regs
    if rest.startswith("{"):
        first, _, tail = rest.partition("}")
        dst = _REG_RE.findall(first)
        return dst, _REG_RE.findall(tail)
    first, _, tail = rest.partition(",")
    dst = _REG_RE.findall(first)
    return dst, _REG_RE.findall(tail)


def _taint(ptx: str, pointer_params: Iterable[str]) -> dict[str, frozenset[str]]:
    """Register -> set of pointer parameters (or :data:`UNKNOWN`) its value may derive from.

    A forward may-analysis to a fixpoint over every definition in the module (flow-insensitive, so
    loop-carried ``mov``s are covered): ``ld.param`` of a pointer parameter seeds the parameter's
    name, any other load seeds :data:`UNKNOWN` (a pointer read from memory), and every other
    instruction passes the union of its sources' taints to its destinations. Registers never
    defined are :data:`UNKNOWN`.
    """
    ptrs = set(pointer_params)
    defs: list[tuple[list[str], list[str], frozenset[str]]] = []
    defined: set[str] = set()
    for _, code in _code_lines(ptx):
        m = _INSTR_RE.match(code)
        if not m or code.strip().startswith("."):
            continue
        op = m.group("op")
        pm = _PARAM_LD_RE.match(code)
        if pm:
            reg, name = pm.group(1), pm.group(2)
            defs.append(([reg], [], frozenset({name}) if name in ptrs else frozenset()))
            defined.add(reg)
            continue
        dst, src = _split_dst_src(op, m.group("rest"))
        if not dst:
            continue
        seed: frozenset[str] = frozenset()
        if op.startswith(("ld.", "ldu.", "atom.", "ldmatrix", "shfl", "tcgen05.ld", "cvta.to.global")):
            # a value loaded from memory (or exchanged between lanes) can be any address
            seed = frozenset({UNKNOWN}) if not op.startswith("cvta.to.global") else frozenset()
        if op.startswith("mov") and any(s.startswith("%tid") or s.startswith("%ctaid") for s in src):
            src = [s for s in src if not s.startswith(("%tid", "%ctaid", "%ntid", "%nctaid"))]
        defs.append((dst, [s for s in src if s not in dst or op.startswith("wgmma")], seed))
        defined.update(dst)
    taint: dict[str, frozenset[str]] = {}
    changed = True
    while changed:
        changed = False
        for dst, src, seed in defs:
            t = set(seed)
            for s in src:
                if s.startswith(("%tid", "%ctaid", "%ntid", "%nctaid", "%laneid", "%warpid",
                                 "%clock", "%globaltimer", "%smid", "%nsmid", "%cluster")):
                    continue
                if s not in defined:
                    t.add(UNKNOWN)
                else:
                    t |= taint.get(s, frozenset())
            ft = frozenset(t)
            for d in dst:
                old = taint.get(d, frozenset())
                if not ft <= old:
                    taint[d] = old | ft
                    changed = True
    return taint


def _pointer_params(ptx: str) -> list[str]:
    """Names of the entry's ``.u64`` / ``.b64`` parameters (candidate pointers)."""
    m = re.search(r"\.entry\s+[\w$]+\s*\((.*?)\)", ptx, re.S)
    if not m:
        return []
    return re.findall(r"\.param\s+\.[ub]64\b[^,]*?([\w$]+)\s*(?:,|$)", m.group(1) + ",")


def input_only_address_regs(ptx: str, input_params: Iterable[str]) -> set[str]:
    """Registers whose value derives only from the given input pointer parameters (and integers).

    Args:
        ptx: a PTX module (its first entry is analysed).
        input_params: ``.param`` names of read-only pointer parameters.

    Returns:
        The registers usable as a read-only (``.nc``) address base.
    """
    inputs = set(input_params)
    taint = _taint(ptx, _pointer_params(ptx))
    return {r for r, t in taint.items() if t and t <= inputs}


# ---- rewriting of global loads, stores and cp.async ----------------------------------------------

_LD_RE = re.compile(r"\bld\.global((?:\.[\w:]+)*)(\s)")
_ST_RE = re.compile(r"\bst\.global((?:\.[\w:]+)*)(\s)")
_CPASYNC_RE = re.compile(r"\bcp\.async\.(ca|cg)\.shared(?:::cta)?\.global((?:\.[\w:]+)*)(\s)")

_VEC = {".v2", ".v4", ".v8"}
_TYPES = {".b8", ".b16", ".b32", ".b64", ".b128", ".u8", ".u16", ".u32", ".u64", ".s8", ".s16",
          ".s32", ".s64", ".f16", ".f32", ".f64"}
_COP_LD = {".ca", ".cg", ".cs", ".lu", ".cv"}
_L1 = {".L1::evict_normal", ".L1::evict_unchanged", ".L1::evict_first", ".L1::evict_last",
       ".L1::no_allocate"}
_L2 = {".L2::evict_normal", ".L2::evict_first", ".L2::evict_last"}
_PF = {".L2::64B", ".L2::128B", ".L2::256B"}


@dataclass
class _Quals:
    nc: bool = False
    cop: str = ""
    l1: str = ""
    l2: str = ""
    hint: str = ""
    pf: str = ""
    vec: str = ""
    type: str = ""

    @classmethod
    def parse(cls, text: str) -> "_Quals | None":
        q = cls()
        for part in re.findall(r"\.[\w:]+", text):
            if part == ".nc":
                q.nc = True
            elif part in _COP_LD:
                q.cop = part
            elif part in _L1:
                q.l1 = part
            elif part in _L2:
                q.l2 = part
            elif part == ".L2::cache_hint":
                q.hint = part
            elif part in _PF:
                q.pf = part
            elif part in _VEC:
                q.vec = part
            elif part in _TYPES:
                q.type = part
            else:
                return None  # .volatile, .relaxed, .acquire, ...: leave such accesses alone
        return q if q.type else None

    def render(self) -> str:
        return "".join([".nc" if self.nc else "", self.cop, self.l1, self.l2, self.hint, self.pf,
                        self.vec, self.type])


def _rewrite_loads(ptx: str, edit: Callable[[_Quals, str], bool], only_regs: set[str] | None = None
                   ) -> str | None:
    """Apply ``edit(quals, base_register)`` to every plain ``ld.global``; None when nothing changed."""
    lines = ptx.split("\n")
    changed = False
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        m = _LD_RE.search(code)
        if not m:
            continue
        q = _Quals.parse(m.group(1))
        if q is None or q.hint:  # a cache-policy operand is already there: leave it
            continue
        am = _ADDR_RE.search(code, m.end())
        if not am:
            continue
        base = am.group(1)
        if only_regs is not None and base not in only_regs:
            continue
        before = q.render()
        if not edit(q, base) or q.render() == before:
            continue
        lines[i] = line[:m.start()] + "ld.global" + q.render() + m.group(2) + line[m.end():]
        changed = True
    return "\n".join(lines) if changed else None


def _ld_nc(ptx: str, ctx: PassContext) -> str | None:
    if not ctx.input_params:
        return None
    regs = input_only_address_regs(ptx, ctx.input_params)

    def edit(q: _Quals, base: str) -> bool:
        if q.cop in (".cv", ".lu"):
            return False  # volatile-like / last-use operators have no .nc form
        q.nc = True
        if q.cop == ".cs":
            q.cop = ""
        return True

    return _rewrite_loads(ptx, edit, only_regs=regs)


def _ld_hint(kind: str, value: str) -> Callable[[str, PassContext], str | None]:
    def fn(ptx: str, ctx: PassContext) -> str | None:
        def edit(q: _Quals, base: str) -> bool:
            if q.cop:  # .cop and eviction priorities are alternative forms (PTX ISA 9.0 ld syntax)
                return False
            setattr(q, kind, value)
            return True
        return _rewrite_loads(ptx, edit)
    return fn


def _cp_async_prefetch(size: str) -> Callable[[str, PassContext], str | None]:
    def fn(ptx: str, ctx: PassContext) -> str | None:
        changed = False
        lines = ptx.split("\n")
        for i, line in enumerate(lines):
            code = line.split("//", 1)[0]
            m = _CPASYNC_RE.search(code)
            if not m:
                continue
            quals = re.findall(r"\.[\w:]+", m.group(2))
            if any(q not in _PF for q in quals):
                continue  # a cache hint operand or unknown qualifier: leave it
            new = f".L2::{size}"
            if quals == [new]:
                continue
            start = m.start(2)
            lines[i] = line[:start] + new + m.group(3) + line[m.end():]
            changed = True
        return "\n".join(lines) if changed else None
    return fn


def _st_rewrite(edit: Callable[[_Quals], bool]) -> Callable[[str, PassContext], str | None]:
    def fn(ptx: str, ctx: PassContext) -> str | None:
        lines = ptx.split("\n")
        changed = False
        for i, line in enumerate(lines):
            code = line.split("//", 1)[0]
            m = _ST_RE.search(code)
            if not m:
                continue
            q = _Quals.parse(m.group(1))
            if q is None or q.hint or q.nc or q.pf:
                continue
            before = q.render()
            if not edit(q) or q.render() == before:
                continue
            lines[i] = line[:m.start()] + "st.global" + q.render() + m.group(2) + line[m.end():]
            changed = True
        return "\n".join(lines) if changed else None
    return fn


def _st_cs(q: _Quals) -> bool:
    if q.l1 or q.l2 or q.cop:
        return False
    q.cop = ".cs"
    return True


def _st_no_allocate(q: _Quals) -> bool:
    if q.cop:
        return False
    q.l1 = ".L1::no_allocate"
    return True


POLICY_REG = "%rd_ailower_policy"
"""The 64-bit register holding the cache policy that the createpolicy passes add."""


def _policy_hint(priority: str, targets: tuple[str, ...]) -> Callable[[str, PassContext], str | None]:
    """Give every plain global load / cp.async a ``createpolicy`` L2 eviction priority.

    Inserts ``.reg .b64 %rd_ailower_policy;`` and ``createpolicy.fractional.L2::<priority>.b64
    %rd_ailower_policy, 1.0;`` at the top of the entry body and appends the policy operand with
    ``.L2::cache_hint`` to each access (PTX ISA 9.0 §9.7.9.18 createpolicy, §9.7.9.8 ld).
    """
    def fn(ptx: str, ctx: PassContext) -> str | None:
        if POLICY_REG in ptx:
            return None  # one policy per module: compose with another priority is not offered
        lines = ptx.split("\n")
        changed = False
        for i, line in enumerate(lines):
            code, sep, comment = line.partition("//")
            stripped = code.rstrip()
            if not stripped.endswith(";"):
                continue
            if "ld" in targets:
                m = _LD_RE.search(code)
                if m:
                    q = _Quals.parse(m.group(1))
                    if q is None or q.hint or q.cop or q.l2:
                        continue
                    q.hint = ".L2::cache_hint"
                    new = code[:m.start()] + "ld.global" + q.render() + m.group(2) + code[m.end():]
                    new = new.rstrip()[:-1].rstrip() + f", {POLICY_REG};"
                    lines[i] = new + (sep + comment if sep else "")
                    changed = True
                    continue
            if "cp.async" in targets:
                m = _CPASYNC_RE.search(code)
                if m:
                    quals = re.findall(r"\.[\w:]+", m.group(2))
                    if any(q not in _PF for q in quals):
                        continue
                    new = (code[:m.start(2)] + ".L2::cache_hint" + "".join(quals) + m.group(3)
                           + code[m.end():])
                    # cp-size and src-size must both be present before the policy operand
                    ops = new.rstrip()[:-1].split("]")[-1].split(",")
                    if len([o for o in ops if o.strip()]) < 2:
                        continue
                    new = new.rstrip()[:-1].rstrip() + f", {POLICY_REG};"
                    lines[i] = new + (sep + comment if sep else "")
                    changed = True
        if not changed:
            return None
        out = "\n".join(lines)
        m = _ENTRY_HEAD_RE.search(out)
        if not m:
            return None
        body = m.end()
        setup = (f"\n\t.reg .b64 \t{POLICY_REG};\n"
                 f"\tcreatepolicy.fractional.L2::{priority}.b64 \t{POLICY_REG}, 1.0;")
        # declarations must precede use: put it after the entry's own .reg lines
        rest = out[body:]
        decl_end = 0
        for dm in re.finditer(r"^\s*\.reg[^\n]*\n", rest, re.M):
            if rest[decl_end:dm.start()].strip():
                break
            decl_end = dm.end()
        return out[:body] + rest[:decl_end].rstrip("\n") + setup + "\n" + rest[decl_end:]
    return fn


# ---- entry directives -------------------------------------------------------------------------

_ENTRY_HEAD_RE = re.compile(r"(\.entry\s+[\w$]+\s*\(.*?\))(?P<dirs>[^{]*)\{", re.S)


def _set_directive(ptx: str, name: str, value: int) -> str | None:
    m = _ENTRY_HEAD_RE.search(ptx)
    if not m:
        return None
    dirs = m.group("dirs")
    pat = re.compile(rf"\.{name}\s+\d+")
    if pat.search(dirs):
        new_dirs = pat.sub(f".{name} {value}", dirs)
    else:
        new_dirs = dirs.rstrip("\n") + f"\n.{name} {value}\n"
    if new_dirs == dirs:
        return None
    return ptx[:m.start("dirs")] + new_dirs + ptx[m.end("dirs"):]


def _maxnreg(n: int) -> Callable[[str, PassContext], str | None]:
    def fn(ptx: str, ctx: PassContext) -> str | None:
        if n * ctx.threads > MAX_REGS_PER_SM or n < 24:
            return None  # the CTA could never launch, or ptxas rejects it
        if ctx.registers is not None and n >= ctx.registers:
            return None  # no tighter than what ptxas already allocates: no change in code
        return _set_directive(ptx, "maxnreg", n)
    return fn


def _minnctapersm(n: int) -> Callable[[str, PassContext], str | None]:
    def fn(ptx: str, ctx: PassContext) -> str | None:
        if n * ctx.threads > MAX_THREADS_PER_SM:
            return None
        if n * (ctx.dynamic_smem + SMEM_RESERVED_PER_CTA) > SMEM_PER_SM:
            return None  # n CTAs cannot share one SM's shared memory: the hint cannot be met
        if MAX_REGS_PER_SM // (n * ctx.threads) < 24:
            return None
        return _set_directive(ptx, "minnctapersm", n)
    return fn


# ---- approximate math -------------------------------------------------------------------------

def approx_allowed(tolerances: Iterable[tuple[float, float]]) -> bool:
    """Whether approximate f32 division/sqrt/reciprocal may be proposed.

    Args:
        tolerances: ``(rtol, max_norm_err)`` of every output of the kernel.

    Returns:
        True when every output is held to at least fp16's tolerance (``rtol >= 1e-3``): the
        approximate forms' 2-ulp fp32 error (PTX ISA 9.0 §9.7.3.8 ``div.approx``: max 2 ulp for
        ``|b|`` in [2^-126, 2^126]) is then ~1e-7 relative, four orders below the tolerance. fp32
        outputs (rtol 1e-5) are not offered them. The harness still checks every result.
    """
    tols = list(tolerances)
    return bool(tols) and all(r >= 1e-3 for r, _ in tols)


def _approx(pattern: str, repl: str) -> Callable[[str, PassContext], str | None]:
    rx = re.compile(pattern)

    def fn(ptx: str, ctx: PassContext) -> str | None:
        if not ctx.approx_ok:
            return None
        out, n = rx.subn(repl, ptx)
        return out if n else None
    return fn


# ---- vector widening --------------------------------------------------------------------------

_SPECIAL = ("%tid", "%ctaid", "%ntid", "%nctaid", "%laneid", "%warpid")


def _known_align(ptx: str, pointer_align: int = 16) -> dict[str, int]:
    """Register -> a power of two that provably divides its value (1 when nothing is known).

    A must-analysis (greatest fixpoint from the optimistic start over every definition of a
    register): pointer parameters have ``pointer_align`` (the harness allocates 256-byte aligned
    buffers; Triton's ``tt.divisibility`` = 16 hint); ``mov`` of an immediate: its lowest set bit;
    ``shl`` by an immediate k multiplies by 2^k; ``mul``/``mul.wide`` multiplies; ``add``/``sub``
    takes the minimum; ``cvt`` between integer widths keeps it; anything else is 1.
    """
    params = set(_pointer_params(ptx))
    defs: dict[str, list[tuple[str, list[str]]]] = {}
    for _, code in _code_lines(ptx):
        m = _INSTR_RE.match(code)
        if not m or code.strip().startswith("."):
            continue
        op, rest = m.group("op"), m.group("rest").strip().rstrip(";")
        pm = _PARAM_LD_RE.match(code)
        if pm:
            defs.setdefault(pm.group(1), []).append(("param", [pm.group(2)]))
            continue
        if rest.startswith("{"):
            for r in _REG_RE.findall(rest.partition("}")[0]):
                defs.setdefault(r, []).append(("opaque", []))
            continue
        ops = [o.strip() for o in rest.split(",")]
        if not ops or not ops[0].startswith("%"):
            continue
        defs.setdefault(ops[0], []).append((op, ops[1:]))

    def imm_align(tok: str) -> int | None:
        try:
            v = int(tok, 0)
        except ValueError:
            return None
        return 1 << 30 if v == 0 else (v & -v)

    align = {r: 1 << 30 for r in defs}
    cap = 1 << 30

    def val(tok: str) -> int:
        a = imm_align(tok)
        if a is not None:
            return a
        if tok in align:
            return align[tok]
        return 1

    changed = True
    while changed:
        changed = False
        for r, ds in defs.items():
            best = cap
            for op, srcs in ds:
                base = op.split(".", 1)[0]
                if op == "param":
                    a = pointer_align if srcs[0] in params else 1
                elif base == "mov" and len(srcs) == 1:
                    a = 1 if srcs[0].startswith(_SPECIAL) else val(srcs[0])
                elif base in ("add", "sub") and len(srcs) == 2:
                    a = min(val(srcs[0]), val(srcs[1]))
                elif base == "mul" and len(srcs) == 2 and ".hi" not in op:
                    a = min(cap, val(srcs[0]) * val(srcs[1]))
                elif base == "shl" and len(srcs) == 2 and imm_align(srcs[1]) is not None:
                    a = min(cap, val(srcs[0]) << int(srcs[1], 0))
                elif base == "cvt" and len(srcs) == 1 and re.match(r"cvt\.[us]\d+\.[us]\d+$", op):
                    a = val(srcs[0])
                elif base == "mad" and len(srcs) == 3 and ".hi" not in op:
                    a = min(cap, val(srcs[0]) * val(srcs[1]), val(srcs[2]))
                else:
                    a = 1
                best = min(best, a)
            if best < align[r]:
                align[r] = best
                changed = True
    return align


_SCALAR_LD_RE = re.compile(
    r"^(?P<indent>\s*)(?P<pred>@!?%\w+\s+)?ld\.global(?P<q>(?:\.(?:nc|ca|cg|cs|L1::\w+|L2::\w+))*)"
    r"\.b32\s+(?:\{\s*)?(?P<dst>%\w+)(?:\s*\})?\s*,\s*\[\s*(?P<base>%\w+)\s*(?:\+\s*(?P<off>-?\d+)\s*)?\]\s*;\s*$")


def _vec_ld2(ptx: str, ctx: PassContext) -> str | None:
    lines = ptx.split("\n")
    align = None
    changed = False
    i = 0
    while i < len(lines) - 1:
        a = _SCALAR_LD_RE.match(lines[i].split("//", 1)[0])
        j = i + 1
        while j < len(lines) and not lines[j].split("//", 1)[0].strip():
            j += 1
        b = _SCALAR_LD_RE.match(lines[j].split("//", 1)[0]) if j < len(lines) else None
        if a and b and a["base"] == b["base"] and (a["pred"] or "") == (b["pred"] or "") \
                and a["q"] == b["q"] and int(b["off"] or 0) == int(a["off"] or 0) + 4 \
                and a["dst"] != b["dst"] and a["dst"] != a["base"]:
            if align is None:
                align = _known_align(ptx)
            off = int(a["off"] or 0)
            if align.get(a["base"], 1) >= 8 and off % 8 == 0:
                lines[i] = (f"{a['indent']}{a['pred'] or ''}ld.global{a['q']}.v2.b32 "
                            f"{{ {a['dst']}, {b['dst']} }}, [ {a['base']} + {off} ];")
                lines[j] = ""
                changed = True
                i = j + 1
                continue
        i += 1
    return "\n".join(lines) if changed else None


# ---- the registry -----------------------------------------------------------------------------

def _build() -> dict[str, PtxPass]:
    ps = [
        PtxPass("ld.nc", "cache", "global loads from read-only input buffers through the non-coherent "
                "(texture) path: ld.global.nc (PTX ISA 9.0 §9.7.9.8); address provenance by taint "
                "analysis", _ld_nc),
        PtxPass("ld.L1::no_allocate", "cache", "global loads do not allocate in L1 (streaming "
                "data; PTX ISA 9.0 §9.7.9.8 .level1::eviction_priority)",
                _ld_hint("l1", ".L1::no_allocate")),
        PtxPass("ld.L1::evict_last", "cache", "global loads kept longest in L1 (re-read tiles)",
                _ld_hint("l1", ".L1::evict_last")),
        PtxPass("ld.L2::evict_first", "cache", "global loads evicted first from L2 (read-once "
                "streams): createpolicy.fractional.L2::evict_first + .L2::cache_hint (PTX ISA 9.0 "
                "§9.7.9.18; sm_90 ptxas accepts .L2::evict_* on ld only for 256-bit vectors)",
                _policy_hint("evict_first", ("ld",))),
        PtxPass("ld.L2::evict_last", "cache", "global loads kept longest in L2 (operands re-read "
                "by other CTAs), through a createpolicy cache hint",
                _policy_hint("evict_last", ("ld",))),
        PtxPass("ld.L2::256B", "cache", "global loads prefetch 256 B into L2 "
                "(.level::prefetch_size)", _ld_hint("pf", ".L2::256B")),
        PtxPass("ld.L2::128B", "cache", "global loads prefetch 128 B into L2",
                _ld_hint("pf", ".L2::128B")),
        PtxPass("cp.async.L2::256B", "cache", "cp.async global->shared copies prefetch 256 B into "
                "L2 (PTX ISA 9.0 §9.7.9.25.3.1)", _cp_async_prefetch("256B")),
        PtxPass("cp.async.L2::128B", "cache", "cp.async copies prefetch 128 B into L2",
                _cp_async_prefetch("128B")),
        PtxPass("st.cs", "cache", "streaming global stores (.cs: evict-first, PTX ISA 9.0 "
                "§9.7.9.10)", _st_rewrite(_st_cs)),
        PtxPass("st.L1::no_allocate", "cache", "global stores do not allocate in L1",
                _st_rewrite(_st_no_allocate)),
        PtxPass("approx.div", "approx", "div.rn/div.full.f32 -> div.approx.ftz.f32 (2 ulp; only "
                "under fp16-or-looser tolerances)",
                _approx(r"\bdiv\.(?:rn|full)(?:\.ftz)?\.f32\b", "div.approx.ftz.f32")),
        PtxPass("approx.sqrt", "approx", "sqrt.rn.f32 -> sqrt.approx.ftz.f32",
                _approx(r"\bsqrt\.rn(?:\.ftz)?\.f32\b", "sqrt.approx.ftz.f32")),
        PtxPass("approx.rcp", "approx", "rcp.rn.f32 -> rcp.approx.ftz.f32",
                _approx(r"\brcp\.rn(?:\.ftz)?\.f32\b", "rcp.approx.ftz.f32")),
        PtxPass("vec.ld2", "vector", "two adjacent 4-byte global loads from one provably 8-byte "
                "aligned base -> one ld.global.v2.b32", _vec_ld2),
    ]
    for n in (64, 96, 128, 168, 192, 232, 255):
        ps.append(PtxPass(f"maxnreg={n}", "directive", f".maxnreg {n}: cap registers per thread "
                          "(PTX ISA 9.0 §11.4.1; the PTX form of ptxas -maxrregcount)", _maxnreg(n)))
    for n in (1, 2, 3, 4):
        ps.append(PtxPass(f"minnctapersm={n}", "directive", f".minnctapersm {n}: ask ptxas for "
                          f"{n} resident CTAs per SM (PTX ISA 9.0 §11.4.4)", _minnctapersm(n)))
    return {p.name: p for p in ps}


PASSES: dict[str, PtxPass] = _build()
"""Every PTX pass by name."""


def passes_for(ptx: str, ctx: PassContext) -> list[tuple[PtxPass, str]]:
    """Every pass that applies to ``ptx`` with its result, in :data:`PASSES` order."""
    out = []
    for p in PASSES.values():
        res = p.apply(ptx, ctx)
        if res is not None:
            out.append((p, res))
    return out


def apply_passes(ptx: str, names: Iterable[str], ctx: PassContext) -> str | None:
    """Apply the named passes in order; None when one of them does not apply.

    Raises:
        KeyError: an unknown pass name (the message lists the known ones).
    """
    out = ptx
    for n in names:
        if n not in PASSES:
            raise KeyError(f"unknown PTX pass {n!r}; known: {', '.join(PASSES)}")
        res = PASSES[n].apply(out, ctx)
        if res is None:
            return None
        out = res
    return out
