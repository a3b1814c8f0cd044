"""KernelSpec: a declarative, JSON/YAML-serialisable description of one Triton kernel.

A spec names the ``@triton.jit`` function (import path, file path or inline source), every
parameter in order (pointer / scalar / constexpr / tensor descriptor; dtype; shape as an expression
over named problem dims; role in/out/inout), named problem sizes (at least ``verify`` and
``bench``), the launch grid as expressions over dims and meta-parameters, the autotune space
(meta-parameters x num_warps x num_stages x num_ctas), input distributions, per-dtype tolerances,
FLOP and byte formulas for the roofline, and optionally a float64 NumPy reference.

Expressions are evaluated by :mod:`kernels.expr`, never ``eval``.

A lowering candidate is PTX for *one* set of constexpr values. A derived constexpr may read the
problem dims (a *size constexpr*, e.g. ``N_CTX: tl.constexpr`` with ``value: N``) and so take
different values for ``verify`` and ``bench``: each size is then its own compile
(:meth:`KernelSpec.size_constexprs`, :meth:`KernelSpec.compile_size`), and the spec identity
covers the sizes and the value expressions.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic_core import to_json
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from kernels.dtypes import DTYPES
from kernels.expr import ExprError, compile_expr, evaluate, evaluate_value

__all__ = [
    "SourceRef",
    "Distribution",
    "Param",
    "Config",
    "AutotuneSpace",
    "Tolerance",
    "KernelSpec",
    "SpecError",
    "load_spec",
    "DEFAULT_TOLERANCES",
]

Num = int | float
ExprLike = str | StrictInt
Scalar = StrictBool | StrictInt | StrictFloat | StrictStr | None
MetaValue = Scalar | tuple[Scalar, ...]
"""A meta-parameter / constexpr value, passed to Triton as such: an int, a bool (kept a bool:
YAML ``true`` is not ``1.0``), a float, a string (``BIAS_TYPE: tl.constexpr`` with ``"none"`` /
``"vector"`` / ``"matrix"``: Triton compares it with ``==`` at compile time), a tuple of these
(a YAML/JSON list) or None (Triton passes a ``None`` argument as a constexpr). Types are strict:
``"1"`` stays a string, ``1`` an int, ``true`` a bool."""

MAX_AUTOTUNE_CONFIGS = 4096
"""Largest autotune space a spec may declare (after constraints). Each config is one Triton compile
(0.05-0.5 s, ``../shared/reference/triton_toolchain.md`` section 4) plus a GPU timing run, so a
space this large already takes tens of minutes on a 2-core host; more is almost surely a mistake
(a cross product that should have been a list of ``configs`` or pruned by ``constraints``)."""

MAX_TENSOR_BYTES = 1 << 36
"""Largest tensor a spec may declare (64 GiB): more is a mistake on any current GPU (H200: 141 GB)."""


class SpecError(ValueError):
    """A spec file or spec object is invalid; the message names the field and what is wrong."""

    def __init__(self, where: str, reason: str):
        self.where, self.reason = where, reason
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        return (SpecError, (self.where, self.reason))


class SourceRef(BaseModel):
    """Where the ``@triton.jit`` function lives: exactly one of ``module``, ``path`` or ``text``.

    Attributes:
        function: the function's name, or ``Class.name`` for a ``@staticmethod`` of a class.
        module: an importable module path (``kernels.suite.softmax``).
        path: a Python file path (relative paths resolve against the spec file's folder).
        text: the module source itself. ``path`` and ``text`` sources are never executed: the
            kernel and what it needs are extracted with :mod:`ast` (:mod:`kernels.source`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
    module: str | None = None
    path: str | None = None
    text: str | None = None

    @model_validator(mode="after")
    def _one_origin(self) -> "SourceRef":
        given = [k for k in ("module", "path", "text") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of module/path/text, got {given or 'none'}")
        return self

    def source_text(self) -> str:
        """The module source text (for hashing and prompts).

        Raises:
            SpecError: the module or file cannot be found or read.
        """
        if self.text is not None:
            return self.text
        if self.path is not None:
            try:
                return Path(self.path).read_text()
            except OSError as exc:
                raise SpecError("source.path", f"cannot read {self.path}: {exc.strerror}") from None
        spec = importlib.util.find_spec(self.module)  # type: ignore[arg-type]
        if spec is None or spec.origin is None:
            raise SpecError("source.module", f"module {self.module!r} not found")
        return Path(spec.origin).read_text()

    def load(self, cache_dir: Path | None = None) -> Any:
        """Return the kernel as a ``triton.runtime.JITFunction``.

        ``function`` is ``name`` or ``Class.name`` (a ``@staticmethod`` of a class). A ``module``
        source is imported (it is the user's own installed code); a ``path`` or ``text`` source is
        never executed: :func:`kernels.source.extract_kernel` copies the kernel, the jit functions
        it calls and the constexpr globals it reads into a small module under
        ``<cache_dir>/sources/``, which is imported instead (so a file importing ``torch`` or the
        user's own packages works without them). A function without ``@triton.jit`` is wrapped
        with it.

        Raises:
            SpecError: import or extraction failed, or the function is missing.
        """
        import triton
        from triton.runtime.jit import JITFunction

        from kernels.source import SourceExtractError, extract_kernel

        try:
            if self.module is not None:
                mod = importlib.import_module(self.module)
                fn: Any = mod
                for part in self.function.split("."):
                    fn = getattr(fn, part, None)
                    if fn is None:
                        raise SpecError("source.function",
                                        f"no function {self.function!r} in {self.origin()}")
                fn = getattr(fn, "__func__", fn)  # staticmethod / classmethod objects
            else:
                try:
                    ext = extract_kernel(self.source_text(), self.function,
                                         filename=self.path or "<inline text>")
                except SourceExtractError as exc:
                    raise SpecError(f"source {exc.where}", exc.reason) from None
                digest = hashlib.sha256(ext.text.encode()).hexdigest()[:16]
                if cache_dir is None:  # the data directory's (AILOWER_DATA_DIR), not always ~
                    from common.settings import get_settings

                    cache_dir = get_settings().cache_dir
                root = Path(cache_dir)
                stem = Path(self.path).stem if self.path else "src"
                stem = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
                file = root / "sources" / f"{stem}_{digest}.py"
                file.parent.mkdir(parents=True, exist_ok=True)
                if not file.exists() or file.read_text() != ext.text:
                    tmp = file.with_suffix(f".{os.getpid()}.tmp")
                    tmp.write_text(ext.text)
                    os.replace(tmp, file)
                name = f"_ailower_src_{digest}"
                if name in sys.modules:
                    mod = sys.modules[name]
                else:
                    ispec = importlib.util.spec_from_file_location(name, file)
                    if ispec is None or ispec.loader is None:
                        raise SpecError("source.path", f"cannot import {file}")
                    mod = importlib.util.module_from_spec(ispec)
                    sys.modules[name] = mod
                    try:
                        ispec.loader.exec_module(mod)
                    except BaseException:
                        sys.modules.pop(name, None)
                        raise
                fn = mod
                for part in ext.qualname.split("."):
                    fn = getattr(fn, part)
        except SpecError:
            raise
        except Exception as exc:  # the user's module ran and raised: report it, naming the file
            raise SpecError(f"source {self.origin()}",
                            f"importing the kernel source raised {type(exc).__name__}: {exc}") from None
        if not isinstance(fn, JITFunction):
            if not callable(fn) or not hasattr(fn, "__code__"):
                raise SpecError("source.function",
                                f"{self.function!r} in {self.origin()} is not a function")
            fn = triton.jit(fn)  # an undecorated kernel: wrap it as Triton's decorator would
        return fn

    def kernel_text(self) -> str:
        """The source a model or user needs to read: for ``path``/``text`` sources the extracted
        module (kernel, the jit functions it calls, constexpr globals); for ``module`` sources the
        whole module file.

        Raises:
            SpecError: as :meth:`source_text`, or the kernel cannot be extracted.
        """
        from kernels.source import SourceExtractError, compact, extract_kernel

        if self.module is not None:
            return self.source_text()
        try:
            return compact(extract_kernel(self.source_text(), self.function,
                                  filename=self.path or "<inline text>").text)
        except SourceExtractError as exc:
            raise SpecError(f"source {exc.where}", exc.reason) from None

    def origin(self) -> str:
        """Where the source comes from, for messages (module name, file path or ``<inline text>``)."""
        return self.module or self.path or "<inline text>"


class Distribution(BaseModel):
    """How to draw an input tensor's elements (host NumPy, float64 then cast to the dtype).

    ``normal``: mean + std * N(0, 1); ``uniform``: U[low, high); ``randint``: integers in
    [low, high); ``arange``: ``low, low + 1, ...`` in row-major order (indices, offsets, positions;
    ``high`` unused); ``permutation``: a random permutation of ``0 .. n-1`` along the last axis,
    drawn independently for every row (gather/scatter indices that must not collide); ``zeros``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["normal", "uniform", "randint", "arange", "permutation", "zeros"] = "normal"
    mean: float = 0.0
    std: float = Field(default=1.0, ge=0)
    low: float = 0.0
    high: float = 1.0

    @model_validator(mode="after")
    def _range(self) -> "Distribution":
        if self.kind in ("uniform", "randint") and not self.low < self.high:
            raise ValueError(f"{self.kind} distribution needs low < high, got [{self.low}, {self.high})")
        return self

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...], np_dtype: np.dtype) -> np.ndarray:
        """Draw an array of ``shape`` stored as ``np_dtype``."""
        n = int(np.prod(shape)) if shape else 1
        if self.kind == "arange":
            x = np.arange(n, dtype=np.int64) + int(self.low)
            if n and np.issubdtype(np_dtype, np.integer) and \
                    (x[-1] > np.iinfo(np_dtype).max or x[0] < np.iinfo(np_dtype).min):
                raise ValueError(f"arange from {int(self.low)} over {n} elements overflows "
                                 f"{np.dtype(np_dtype).name}")
        elif self.kind == "permutation":
            last = shape[-1] if shape else 1
            rows = n // last if last else 0
            x = np.argsort(rng.random((rows, last)), axis=1, kind="stable").reshape(-1)
            if last and np.issubdtype(np_dtype, np.integer) and last - 1 > np.iinfo(np_dtype).max:
                raise ValueError(f"a permutation of {last} does not fit {np.dtype(np_dtype).name}")
        elif self.kind == "zeros":
            x = np.zeros(n)
        elif self.kind == "randint":
            x = rng.integers(int(self.low), int(self.high), size=n)
        elif self.kind == "uniform":
            x = rng.uniform(self.low, self.high, size=n).astype(np.float32)
        else:
            x = rng.standard_normal(size=n, dtype=np.float32)
            if self.std != 1.0 or self.mean != 0.0:
                x = x * np.float32(self.std) + np.float32(self.mean)
        return np.ascontiguousarray(x.astype(np_dtype).reshape(shape))


class Param(BaseModel):
    """One parameter of the jit function, in declaration order.

    Attributes:
        name: the Python parameter name.
        kind: ``pointer`` (a tensor the harness allocates), ``scalar`` (a runtime number),
            ``constexpr`` (compile-time; vanishes from the PTX entry), ``none`` (an argument
            always passed as ``None``: Triton makes it a constexpr ``None``, e.g. an optional
            bias pointer left out), ``tensordesc`` (a host TMA descriptor over a contiguous
            row-major tensor; the GPU harness encodes its CUtensorMap, ``harness.tensormap``).
        dtype: element dtype (pointers, tensordescs) or scalar type; a Triton type name.
        shape: pointer shape as expressions over dims (row-major, contiguous).
        role: pointer role: ``in`` (read only; checked unchanged), ``out`` (written; sentinel
            pre-filled) or ``inout``.
        value: scalar: expression over dims; constexpr: expression over dims, meta-parameters,
            ``num_warps``, ``num_stages`` and ``num_ctas``, a boolean (``true`` stays a bool),
            a string literal inside the expression (``value: "'matrix'"``: a string
            constexpr), or a list (a tuple constexpr); omit it to take the constexpr from the
            autotune config's meta of the same name (where strings need no inner quotes:
            ``meta: {BIAS_TYPE: [none, vector]}``).
        init: out pointers: ``sentinel`` (default; pre-filled with a sentinel so an element the
            kernel forgets to write fails) or ``zeros`` (the caller zero-fills it, e.g. a kernel
            that accumulates with atomics; the whole output is compared).
        written: out pointers the kernel writes only partly (masked stores): per dimension a
            half-open ``[start, stop)`` pair of expressions over dims; only that region is
            compared with the reference, the rest is left unchecked.
        divisibility: ``tt.divisibility`` hint; every problem size must satisfy it for scalars.
            Pointers get 16 by default (the harness allocates 256-byte aligned buffers).
        distribution: how to draw the input (``in``/``inout`` pointers).
        block_shape: tensordesc block shape (expressions).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    kind: Literal["pointer", "scalar", "constexpr", "none", "tensordesc"]
    dtype: str | None = None
    shape: tuple[ExprLike, ...] | None = None
    role: Literal["in", "out", "inout"] | None = None
    value: StrictBool | ExprLike | float | tuple[Scalar, ...] | None = None
    init: Literal["sentinel", "zeros"] = "sentinel"
    written: tuple[tuple[ExprLike, ExprLike], ...] | None = None
    divisibility: int | None = None
    distribution: Distribution = Distribution()
    block_shape: tuple[ExprLike, ...] | None = None

    @model_validator(mode="after")
    def _check(self) -> "Param":
        if isinstance(self.value, bool | tuple) and self.kind != "constexpr":
            raise ValueError(f"a {self.kind} value must be a number or an expression, not a "
                             f"{'boolean' if isinstance(self.value, bool) else 'list'} (only "
                             "constexprs may be booleans or tuples)")
        if self.kind == "none" and (self.value is not None or self.dtype or self.shape):
            raise ValueError("a 'none' parameter is always None: give no value, dtype or shape")
        if (self.init != "sentinel" or self.written is not None) and not (
                self.kind == "pointer" and self.role in ("out", "inout")):
            raise ValueError("init and written apply to out/inout pointers only")
        if self.init == "zeros" and self.role != "out":
            raise ValueError("init: zeros applies to out pointers (an inout buffer holds its input)")
        if self.written is not None:
            if len(self.written) != len(self.shape or ()):
                raise ValueError(f"written has {len(self.written)} ranges for a "
                                 f"{len(self.shape or ())}-dimensional shape; give one "
                                 "[start, stop) pair per dimension")
            for pair in self.written:
                for e in pair:
                    if isinstance(e, str):
                        compile_expr(e)
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; known: {', '.join(DTYPES)}")
        if self.kind in ("pointer", "tensordesc"):
            if self.dtype is None or self.shape is None or self.role is None:
                raise ValueError(f"{self.kind} parameter needs dtype, shape and role")
        if self.kind == "tensordesc" and self.block_shape is None:
            raise ValueError("tensordesc parameter needs block_shape")
        if self.kind == "scalar" and (self.dtype is None or self.value is None):
            raise ValueError("scalar parameter needs dtype and value")
        for e in (self.shape or ()) + (self.block_shape or ()):
            if isinstance(e, str):
                compile_expr(e)
        if isinstance(self.value, str):
            compile_expr(self.value)
        return self

    @property
    def is_tensor(self) -> bool:
        """Pointer or tensor descriptor: a buffer the harness allocates."""
        return self.kind in ("pointer", "tensordesc")

    def triton_type(self, block: tuple[int, ...] | None = None) -> str:
        """The ``ASTSource`` signature string: ``*fp16``, ``i32``, ``constexpr``,
        ``tensordesc<fp16[128, 64]>`` (``block``: the evaluated ``block_shape``, needed for a
        tensordesc; :meth:`KernelSpec.signature` passes it when given a config).

        Raises:
            SpecError: a tensordesc parameter and no ``block``.
        """
        if self.kind == "pointer":
            return f"*{self.dtype}"
        if self.kind in ("constexpr", "none"):
            return "constexpr"
        if self.kind == "tensordesc":
            if block is None:
                raise SpecError(f"params.{self.name}",
                                "tensordesc signature needs the block values (give a config)")
            return f"tensordesc<{self.dtype}[{', '.join(str(int(b)) for b in block)}]>"
        return str(self.dtype)


class Config(BaseModel):
    """One autotune configuration: meta-parameter values plus Triton's compile options.

    Attributes:
        meta: constexpr name -> a :data:`MetaValue` (int, bool, float, string, tuple or None).
        num_warps, num_stages, num_ctas: Triton's options of the same names.
        maxnreg: Triton's ``maxnreg`` option (registers per thread cap; emitted as PTX
            ``.maxnreg``), 16..256; None leaves it to ptxas. PTX ISA 9.1 section 11.4.1
            (``.maxnreg``; 256 is also the top of ``setmaxnreg``'s range); Triton 3.9's ptxas
            assembles ``.maxnreg 256`` for sm_90a.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    meta: dict[str, MetaValue] = Field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = Field(default=3, ge=1, le=16)
    num_ctas: int = Field(default=1, ge=1, le=16)
    maxnreg: int | None = Field(default=None, ge=16, le=256)

    @field_validator("num_warps")
    @classmethod
    def _pow2(cls, v: int) -> int:
        if v < 1 or v & (v - 1) or v > 32:
            raise ValueError(f"num_warps must be a power of two in [1, 32], got {v}")
        return v

    def key(self) -> str:
        """A short stable text key, e.g. ``BLOCK=1024,w4,s3,c1`` (strings and tuples quoted as
        Python writes them, ``BIAS_TYPE='none'``, so ``'1'`` and ``1`` differ)."""
        meta = ",".join(f"{k}={v!r}" if isinstance(v, str | tuple) else f"{k}={v}"
                        for k, v in sorted(self.meta.items()))
        reg = f",r{self.maxnreg}" if self.maxnreg is not None else ""
        return (f"{meta + ',' if meta else ''}w{self.num_warps},s{self.num_stages},"
                f"c{self.num_ctas}{reg}")

    def __hash__(self) -> int:
        return hash(self.key())


class AutotuneSpace(BaseModel):
    """The autotune space: the cross product of ``meta`` x num_warps x num_stages x num_ctas (skipped
    when only explicit ``configs`` are given), plus explicit ``configs``; ``constraints`` (expressions over meta and dims) prune it (kept when nonzero)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    meta: dict[str, tuple[MetaValue, ...]] = Field(default_factory=dict)
    num_warps: tuple[int, ...] = (4,)
    num_stages: tuple[int, ...] = (3,)
    num_ctas: tuple[int, ...] = (1,)
    maxnreg: tuple[int | None, ...] = (None,)
    configs: tuple[Config, ...] = ()
    constraints: tuple[str, ...] = ()

    def size(self) -> int:
        """Number of configs before constraints and de-duplication (cheap: nothing is built)."""
        n = 0 if (self.configs and not self.meta) else math.prod(len(v) for v in self.meta.values())
        n *= len(self.num_warps) * len(self.num_stages) * len(self.num_ctas) * len(self.maxnreg)
        return n + len(self.configs)

    def expand(self) -> list[Config]:
        """Every configuration, cross product first then explicit ones, duplicates removed.

        Raises:
            ValueError: the space has more than :data:`MAX_AUTOTUNE_CONFIGS` configs (checked
                before anything is built, so a huge cross product fails at once).
        """
        total = self.size()
        if total > MAX_AUTOTUNE_CONFIGS:
            dims = " x ".join(f"{len(v)} {k}" for k, v in sorted(self.meta.items()))
            raise ValueError(
                f"the autotune space has {total} configs ({dims or 'no meta'} x "
                f"{len(self.num_warps)} num_warps x {len(self.num_stages)} num_stages x "
                f"{len(self.num_ctas)} num_ctas x {len(self.maxnreg)} maxnreg"
                f"{f' + {len(self.configs)} explicit' if self.configs else ''}); the limit is "
                f"{MAX_AUTOTUNE_CONFIGS}: list the configs you mean under 'configs' or prune the "
                "cross product with 'constraints'")
        names = sorted(self.meta)
        out: dict[str, Config] = {}
        product = itertools.product(*(self.meta[n] for n in names))
        if self.configs and not self.meta:
            product = iter(())  # explicit configs only
        for values in product:
            for w, s, c, r in itertools.product(self.num_warps, self.num_stages, self.num_ctas,
                                                self.maxnreg):
                cfg = Config(meta=dict(zip(names, values)), num_warps=w, num_stages=s, num_ctas=c,
                             maxnreg=r)
                out.setdefault(cfg.key(), cfg)
        for cfg in self.configs:
            out.setdefault(cfg.key(), cfg)
        return list(out.values())


class Tolerance(BaseModel):
    """Correctness tolerance for one output dtype.

    An element passes when ``|out - ref| <= atol + rtol * |ref|``; the whole output also needs
    ``||out - ref||_2 / ||ref||_2 <= max_norm_err``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rtol: float = Field(ge=0)
    atol: float = Field(ge=0)
    max_norm_err: float = Field(gt=0)


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    # fp32 arithmetic lands far under 1e-5 relative (METHOD.md: "float32 arithmetic lands far
    # under 1e-3"); fp16 storage rounds at 2^-11 = 4.9e-4; bf16 at 2^-8 = 3.9e-3; fp8 e4m3 at 2^-4.
    "fp64": Tolerance(rtol=1e-12, atol=1e-14, max_norm_err=1e-12),
    "fp32": Tolerance(rtol=1e-5, atol=1e-6, max_norm_err=1e-5),
    "fp16": Tolerance(rtol=2e-3, atol=1e-5, max_norm_err=1e-3),
    "bf16": Tolerance(rtol=1.6e-2, atol=1e-4, max_norm_err=8e-3),
    "fp8e4nv": Tolerance(rtol=1.25e-1, atol=1e-2, max_norm_err=6e-2),
    "fp8e5": Tolerance(rtol=2.5e-1, atol=1e-2, max_norm_err=1.2e-1),
}
"""Per-dtype defaults; a spec overrides them with ``tolerances``."""


class KernelSpec(BaseModel):
    """A declarative description of one Triton kernel and how to run, check and time it.

    Attributes:
        name: suite name (``softmax``).
        description: one line.
        source: where the ``@triton.jit`` function lives.
        params: every parameter of the jit function, in order.
        sizes: named problem sizes, dim name -> int; must include ``verify`` (small; checked
            against the float64 reference) and ``bench`` (timed; fills the GPU).
        grid: 1-3 expressions over dims and meta-parameters giving the number of programs.
        autotune: the autotune space.
        tolerances: per output dtype, overriding :data:`DEFAULT_TOLERANCES`.
        flops: FLOP count of one launch (expression over dims); 0 for memory-bound kernels.
        bytes: minimum DRAM bytes one launch must move (each input read and output written once).
        flop_dtype: the dtype whose tensor-core rate bounds the FLOPs (``fp16``), for the roofline.
        reference: optional float64 NumPy reference, ``module:function`` or ``file.py::function``;
            called as ``f(inputs: dict[str, ndarray], dims: dict[str, int]) -> dict[str, ndarray]``
            with inputs as float64 and returning every out/inout parameter.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    description: str = ""
    source: SourceRef
    params: tuple[Param, ...]
    sizes: dict[str, dict[str, int]]
    grid: tuple[ExprLike, ...]
    autotune: AutotuneSpace = AutotuneSpace()
    tolerances: dict[str, Tolerance] = Field(default_factory=dict)
    flops: ExprLike = 0
    bytes: ExprLike = 0
    flop_dtype: str | None = None
    reference: str | None = None

    # ---- validation -------------------------------------------------------------------------
    @model_validator(mode="after")
    def _check(self) -> "KernelSpec":
        names = [p.name for p in self.params]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate parameter name(s): {', '.join(sorted(dup))}")
        for req in ("verify", "bench"):
            if req not in self.sizes:
                raise ValueError(f"sizes must include {req!r} (have: {', '.join(self.sizes)})")
        if not 1 <= len(self.grid) <= 3:
            raise ValueError(f"grid has {len(self.grid)} expressions; give 1 to 3")
        if not any(p.is_tensor and p.role in ("out", "inout") for p in self.params):
            raise ValueError("the kernel has no out/inout pointer: nothing to check")
        for e in (*self.grid, self.flops, self.bytes):
            if isinstance(e, str):
                compile_expr(e)
        self._check_meta_keys()
        configs = self.configs()
        if not configs:
            raise ValueError("the autotune space is empty (after constraints)")
        # Every expression must evaluate at every size for every config. A derived constexpr
        # may depend on the size (size_constexprs): each size then compiles its own variant.
        for cfg in configs:
            seen: dict[str, Num] | None = None
            for size_name in self.sizes:
                where = f"sizes.{size_name} with config {cfg.key()}"
                try:
                    ce = self.constexprs(cfg, size_name)
                    env = self.env(cfg, size_name)
                    self.grid_dims(size_name, cfg.meta)
                    for p in self.params:
                        if p.is_tensor:
                            nbytes = int(np.prod(self.shape(p, size_name), dtype=object)) * DTYPES[
                                p.dtype].itemsize  # type: ignore[index]
                            if nbytes > MAX_TENSOR_BYTES:
                                raise ValueError(f"tensor {p.name} would take {nbytes} bytes "
                                                 f"(> {MAX_TENSOR_BYTES} = 64 GiB)")
                        if p.written is not None:
                            self.written_region(p, size_name)
                        if p.kind == "scalar":
                            v = evaluate(p.value, env)  # type: ignore[arg-type]
                            _check_scalar_range(p, v)
                            if p.divisibility and int(v) % p.divisibility:
                                raise ValueError(
                                    f"scalar {p.name}={v} is not divisible by {p.divisibility} "
                                    "(its declared divisibility hint)")
                    evaluate(self.flops, env)
                    evaluate(self.bytes, env)
                except ExprError as exc:
                    raise ValueError(f"{where}: {exc}") from None
                except ValueError as exc:
                    raise ValueError(f"{where}: {exc}") from None
                if seen is None:
                    seen = ce
        return self

    def _check_meta_keys(self) -> None:
        """Every meta key of the autotune space must be a constexpr parameter of the kernel or a
        name some spec expression reads (a knob that derives constexprs or the grid); anything
        else is a typo Triton would reject (``unexpected keyword argument``)."""
        keys = set(self.autotune.meta)
        for cfg in self.autotune.configs:
            keys |= set(cfg.meta)
        if not keys:
            return
        constexpr_params = [p.name for p in self.params if p.kind == "constexpr"]
        read: set[str] = set()
        exprs: list[Any] = [*self.grid, self.flops, self.bytes, *self.autotune.constraints]
        for p in self.params:
            exprs += [p.value, *(p.shape or ()), *(p.block_shape or ())]
            for pair in p.written or ():
                exprs += list(pair)
        for e in exprs:
            if isinstance(e, str):
                read |= set(compile_expr(e).names)
        for p in self.params:
            if p.kind != "constexpr" and p.name in keys:
                raise ValueError(f"autotune meta key {p.name!r} names a {p.kind} parameter; only "
                                 "constexpr parameters take values from the autotune space")
        bad = sorted(keys - set(constexpr_params) - read)
        if bad:
            raise ValueError(
                f"autotune meta key(s) {', '.join(map(repr, bad))} are not constexpr parameters "
                f"of {self.source.function}() (its constexprs: "
                f"{', '.join(constexpr_params) or 'none'}) and no spec expression reads them")

    # ---- derived values ---------------------------------------------------------------------
    def configs(self) -> list[Config]:
        """The autotune space after constraints (evaluated at the ``bench`` size).

        Raises:
            ValueError: the space exceeds :data:`MAX_AUTOTUNE_CONFIGS`.
        """
        out = []
        for cfg in self.autotune.expand():
            env = {**self.sizes["bench"], **cfg.meta, "num_warps": cfg.num_warps,
                   "num_stages": cfg.num_stages, "num_ctas": cfg.num_ctas}
            if all(evaluate(c, env) for c in self.autotune.constraints):
                out.append(cfg)
        return out

    def dims(self, size: str) -> dict[str, int]:
        """The named problem size; raises :class:`SpecError` for an unknown name."""
        try:
            return dict(self.sizes[size])
        except KeyError:
            raise SpecError("size", f"unknown size {size!r}; have {', '.join(self.sizes)}") from None

    def constexprs(self, cfg: Config, size: str = "bench") -> dict[str, Any]:
        """constexpr name -> value for ``cfg`` (derived ones evaluated at ``size``).

        Derived constexprs may read dims, meta, earlier constexprs, ``num_warps``,
        ``num_stages`` and ``num_ctas``. Booleans stay booleans, strings strings and lists
        tuples; ``none`` parameters are None.

        Raises:
            SpecError: a constexpr has no value and ``cfg.meta`` lacks it.
        """
        env: dict[str, Any] = {**self.dims(size), **cfg.meta, "num_warps": cfg.num_warps,
                               "num_stages": cfg.num_stages, "num_ctas": cfg.num_ctas}
        out: dict[str, Any] = {}
        for p in self.params:
            if p.kind == "none":
                out[p.name] = None
                continue
            if p.kind != "constexpr":
                continue
            if isinstance(p.value, bool | tuple):
                out[p.name] = p.value
            elif p.value is None:
                if p.name not in cfg.meta:
                    raise SpecError(f"params.{p.name}",
                                    f"constexpr has no value and config {cfg.key()} lacks it")
                out[p.name] = cfg.meta[p.name]
            else:
                try:
                    out[p.name] = evaluate_value(p.value, env)
                except ExprError as exc:
                    hint = ""
                    if isinstance(p.value, str) and p.value.strip().isidentifier() and \
                            p.value.strip() not in env:
                        hint = (f"; for a string constexpr quote it inside the YAML string: "
                                f"value: \"'{p.value.strip()}'\"")
                    raise SpecError(f"params.{p.name}.value", f"{exc}{hint}") from None
            env[p.name] = out[p.name]
        return out

    def size_constexprs(self, cfg: Config | None = None) -> list[str]:
        """Names of the constexprs whose value differs between the spec's sizes for ``cfg``
        (default: any config): size constexprs, e.g. ``N_CTX`` with ``value: N``. Empty for
        most specs; when not empty, PTX compiled for one size's values is a different program
        from another size's, so every size compiles its own variant (Triton: one
        ``ASTSource`` per size; :meth:`compile_size`)."""
        names: set[str] = set()
        for c in ([cfg] if cfg is not None else self.configs()):
            per = [self.constexprs(c, s) for s in self.sizes]
            for k in per[0]:
                if any(p.get(k) != per[0][k] for p in per[1:]):
                    names.add(k)
        return [p.name for p in self.params if p.name in names]

    def compile_size(self, size: str, cfg: Config | None = None) -> str:
        """The size whose constexpr values a compile for ``size`` must use: ``size`` itself
        when the spec has size constexprs (for ``cfg``), else ``bench`` (one compile serves
        every size, as before size constexprs; keeps the compile caches' keys)."""
        self.dims(size)
        return size if self.size_constexprs(cfg) else "bench"

    def env(self, cfg: Config, size: str) -> dict[str, Num]:
        """Names visible to expressions: dims, meta, constexprs, num_warps, num_stages, num_ctas."""
        return {**self.dims(size), **cfg.meta, **self.constexprs(cfg, size),
                "num_warps": cfg.num_warps, "num_stages": cfg.num_stages, "num_ctas": cfg.num_ctas}

    def grid_dims(self, size: str, meta: Mapping[str, int]) -> tuple[int, int, int]:
        """Programs along x, y, z for ``size`` and meta-parameter values ``meta``.

        Raises:
            SpecError: a grid expression fails or gives a non-positive count.
        """
        env = {**self.dims(size), **meta}
        for p in self.params:
            if p.kind == "constexpr" and p.value is not None and p.name not in env:
                try:
                    env[p.name] = evaluate(p.value, env)
                except ExprError:
                    continue  # not needed unless the grid names it; then the grid error says so
        vals = []
        for e in self.grid:
            try:
                v = evaluate(e, env)
            except ExprError as exc:
                raise SpecError("grid", str(exc)) from None
            if not math.isfinite(v) or int(v) != v or v < 1 or v >= 2**31:
                raise SpecError("grid", f"{e!r} gave {v}; need a positive integer below 2**31")
            vals.append(int(v))
        return tuple(vals + [1] * (3 - len(vals)))  # type: ignore[return-value]

    def written_region(self, p: Param, size: str) -> tuple[slice, ...] | None:
        """The region of output ``p`` the kernel writes at ``size`` (``p.written``), as slices;
        None when the kernel writes all of it.

        Raises:
            SpecError: a bound is not an integer in ``[0, extent]`` or start > stop.
        """
        if p.written is None:
            return None
        shape = self.shape(p, size)
        dims = self.dims(size)
        out = []
        for axis, ((lo_e, hi_e), extent) in enumerate(zip(p.written, shape)):
            lo, hi = evaluate(lo_e, dims), evaluate(hi_e, dims)
            if int(lo) != lo or int(hi) != hi or not 0 <= lo <= hi <= extent:
                raise SpecError(f"params.{p.name}.written[{axis}]",
                                f"[{lo_e}, {hi_e}) gave [{lo}, {hi}) at size {size!r}; need "
                                f"0 <= start <= stop <= {extent} (the shape)")
            out.append(slice(int(lo), int(hi)))
        return tuple(out)

    def checked(self, p: Param, size: str, arr: np.ndarray) -> np.ndarray:
        """The part of output array ``arr`` (of ``p`` at ``size``) that correctness checks compare:
        the written region, or all of it."""
        region = self.written_region(p, size)
        return arr if region is None else arr[region]

    def shape(self, p: Param, size: str) -> tuple[int, ...]:
        """The concrete shape of tensor parameter ``p`` at ``size``."""
        dims = self.dims(size)
        out = []
        for e in p.shape or ():
            v = evaluate(e, dims)
            if not math.isfinite(v) or int(v) != v or v < 0:
                raise SpecError(f"params.{p.name}.shape", f"{e!r} gave {v}; need an integer >= 0")
            out.append(int(v))
        return tuple(out)

    def scalar_value(self, p: Param, cfg: Config, size: str) -> Num:
        """The runtime value of scalar parameter ``p``."""
        return evaluate(p.value, self.env(cfg, size))  # type: ignore[arg-type]

    def tolerance(self, dtype_name: str) -> Tolerance:
        """Tolerance for outputs of ``dtype_name`` (spec override, else the default)."""
        if dtype_name in self.tolerances:
            return self.tolerances[dtype_name]
        if dtype_name in DEFAULT_TOLERANCES:
            return DEFAULT_TOLERANCES[dtype_name]
        return Tolerance(rtol=0.0, atol=0.0, max_norm_err=1e-30)  # integers: exact

    def flop_count(self, size: str, cfg: Config | None = None) -> float:
        """FLOPs of one launch at ``size``."""
        cfg = cfg or self.configs()[0]
        return float(evaluate(self.flops, self.env(cfg, size)))

    def byte_count(self, size: str, cfg: Config | None = None) -> float:
        """Minimum DRAM bytes of one launch at ``size``."""
        cfg = cfg or self.configs()[0]
        return float(evaluate(self.bytes, self.env(cfg, size)))

    def tensors(self) -> list[Param]:
        """Tensor parameters (pointers and descriptors), in order."""
        return [p for p in self.params if p.is_tensor]

    def outputs(self) -> list[Param]:
        """Out and inout tensor parameters."""
        return [p for p in self.tensors() if p.role in ("out", "inout")]

    def signature(self, cfg: Config | None = None, size: str = "bench") -> dict[str, str]:
        """The ``ASTSource`` signature: parameter name -> Triton type string. Tensor descriptors
        need ``cfg`` (their block shapes are evaluated with its meta-parameters at ``size``).

        Raises:
            SpecError: a tensordesc parameter and no ``cfg``.
        """
        env = self.env(cfg, size) if cfg is not None and any(
            p.kind == "tensordesc" for p in self.params) else None
        return {p.name: p.triton_type(None if env is None or p.block_shape is None else
                                      tuple(int(evaluate(e, env)) for e in p.block_shape))
                for p in self.params}

    def attrs(self) -> dict[tuple[int, ...], list[list[Any]]]:
        """``ASTSource`` attrs: ``tt.divisibility`` 16 on pointers, declared hints on scalars."""
        out: dict[tuple[int, ...], list[list[Any]]] = {}
        for i, p in enumerate(self.params):
            div = p.divisibility or (16 if p.kind == "pointer" else None)
            if div and p.kind in ("pointer", "scalar"):
                out[(i,)] = [["tt.divisibility", div]]
        return out

    def check_function(self, fn: Any) -> None:
        """Check that ``params`` name the jit function's parameters, in order.

        Raises:
            SpecError: the names differ (both lists are given).
        """
        want = list(getattr(fn, "arg_names", []))
        have = [p.name for p in self.params]
        if want != have:
            raise SpecError("params", f"the spec's parameters {have} differ from the parameters "
                                      f"of {self.source.function}(): {want}")

    def load_reference(self) -> Callable[..., dict[str, np.ndarray]] | None:
        """Import the float64 reference function, or None when the spec has none.

        Raises:
            SpecError: the reference cannot be imported.
        """
        if not self.reference:
            return None
        if "::" in self.reference:
            path, fn = self.reference.split("::", 1)
            src = SourceRef(path=path, function=fn)
            try:
                ispec = importlib.util.spec_from_file_location(
                    f"_ailower_ref_{hashlib.sha256(path.encode()).hexdigest()[:12]}", path)
                mod = importlib.util.module_from_spec(ispec)  # type: ignore[arg-type]
                ispec.loader.exec_module(mod)  # type: ignore[union-attr]
            except Exception as exc:  # the user's module ran and raised: report it, naming the file
                raise SpecError("reference", f"cannot import {src.path}: {type(exc).__name__}: {exc}"
                                ) from None
        elif ":" in self.reference:
            modname, fn = self.reference.split(":", 1)
            try:
                mod = importlib.import_module(modname)
            except Exception as exc:  # as above: user code
                raise SpecError("reference", f"cannot import {modname}: {type(exc).__name__}: {exc}"
                                ) from None
        else:
            raise SpecError("reference", "use 'module:function' or 'file.py::function'")
        ref = getattr(mod, fn, None)
        if not callable(ref):
            raise SpecError("reference", f"{fn!r} not found or not callable")
        return ref

    def identity(self) -> str:
        """A content hash of the spec and its kernel source (sha256 hex, 16 digits).

        Keys caches, results and the database; never derived from Python object identity.
        """
        h = hashlib.sha256()
        h.update(_canonical_json(self).encode())
        h.update(self.source.source_text().encode())
        return h.hexdigest()[:16]


_LATER_FIELDS = {"params": ("init", "written"), "configs": ("maxnreg",)}
"""Fields added after specs were first stored, with defaults that change nothing: left out of the
identity while they hold their default, so existing specs keep their ids (caches, results and the
leaderboard key on them)."""


def _canonical_json(spec: "KernelSpec") -> str:
    """The JSON the identity hashes: ``model_dump_json()`` minus later fields at their defaults."""
    data = spec.model_dump(mode="json")
    for p in data["params"]:
        if p.get("init") == "sentinel":
            del p["init"]
        if p.get("written") is None:
            p.pop("written", None)
    at = data["autotune"]
    if at.get("maxnreg") == [None]:
        del at["maxnreg"]
    for cfg in at.get("configs", []):
        if cfg.get("maxnreg") is None:
            cfg.pop("maxnreg", None)
    return to_json(data).decode()  # pydantic's own JSON writer, as model_dump_json()


_INT_RANGES = {"i1": (0, 1), "i8": (-2**7, 2**7 - 1), "i16": (-2**15, 2**15 - 1),
               "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1), "u8": (0, 2**8 - 1),
               "u16": (0, 2**16 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1)}


def _check_scalar_range(p: Param, v: Num) -> None:
    """A scalar must fit its dtype: the launcher packs it into exactly that many bits."""
    rng = _INT_RANGES.get(p.dtype or "")
    if rng is not None:
        if int(v) != v or not rng[0] <= v <= rng[1]:
            raise ValueError(f"scalar {p.name}={v} does not fit {p.dtype} [{rng[0]}, {rng[1]}]")
    elif not math.isfinite(v):
        raise ValueError(f"scalar {p.name}={v} is not finite")


def load_spec(path: str | Path, *, source: str | None = None) -> KernelSpec:
    """Read a spec from a JSON or YAML file.

    Relative ``source.path`` / ``reference`` file paths resolve against the spec file's folder.
    ``source`` (``file.py::function``) overrides the file's ``source``.

    Raises:
        SpecError: the file cannot be read or parsed, or the spec is invalid (message lists the
            offending fields).
    """
    p = Path(path)
    try:
        raw = p.read_text()
    except OSError as exc:
        raise SpecError(str(p), f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(str(p), "not a text file (UTF-8 expected)") from None
    try:
        data = json.loads(raw) if p.suffix == ".json" else yaml.safe_load(raw)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecError(str(p), f"not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(str(p), "the top level must be a mapping")
    if source is not None:
        file, _, fn = source.partition("::")
        if not fn:
            raise SpecError("KERNEL", f"{source!r}: use path.py::function")
        data["source"] = {"path": str(Path(file).resolve()), "function": fn}
    src = data.get("source")
    if isinstance(src, dict) and src.get("path") and not Path(src["path"]).is_absolute():
        src["path"] = str((p.parent / src["path"]).resolve())
    ref = data.get("reference")
    if isinstance(ref, str) and "::" in ref and not Path(ref.split("::")[0]).is_absolute():
        data["reference"] = str((p.parent / ref.split("::")[0]).resolve()) + "::" + ref.split("::")[1]
    try:
        return KernelSpec.model_validate(data)
    except ValidationError as exc:
        lines = [f"{'.'.join(str(x) for x in e['loc']) or '(spec)'}: {e['msg']}" for e in exc.errors()]
        raise SpecError(str(p), "invalid spec:\n  " + "\n  ".join(lines)) from None
