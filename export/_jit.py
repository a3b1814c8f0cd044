"""What Triton's JIT builds for one launch, found without a GPU.

Triton's kernel override (``TRITON_KERNEL_OVERRIDE=1``, ``TRITON_OVERRIDE_DIR``) looks for
``<override dir>/<base32(ASTSource.hash())>/<kernel name>.<stage>`` (``triton/compiler/compiler.py``,
``get_override_manager``; the same in Triton 3.6 and 3.9). ``ASTSource.hash()`` covers the jit
function's ``cache_key`` (its source, its first line number and its dependencies), the signature
the JIT derives from the argument *values* (``i32`` vs ``i64``), the constexpr values, and the
``attrs`` of the launch's specialisation (``tt.divisibility`` 16 on 16-byte-aligned pointers and
on integers divisible by 16). Its exact form differs between versions (3.9 adds an empty attrs
entry per constexpr), so it is not re-implemented here: :func:`jit_source` runs the function's
own binder behind a stand-in driver that reports the target arch, and catches the ``ASTSource``
the JIT hands to ``triton.compiler.compile``. No kernel is compiled or launched.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

__all__ = ["FakeTensor", "jit_source", "override_folder_name"]

_LOCK = threading.Lock()


class FakeTensor:
    """Stands in for a torch tensor in the JIT's argument specialisation: it has only a
    ``data_ptr()`` (an address, which decides the 16-byte-alignment attribute) and a ``dtype``
    (Triton's type name, e.g. ``fp16``, which Triton canonicalises to itself)."""

    def __init__(self, ptr: int, dtype: str):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        """The address (bytes)."""
        return self.ptr


class _StandInDriver:
    """Answers the three questions the JIT asks before compiling: target, device, stream."""

    def __init__(self, capability: int):
        self.capability = capability

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.capability, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


class _Caught(Exception):
    def __init__(self, src: Any):
        super().__init__("caught")
        self.src = src


def jit_source(fn: Any, args: list[Any], kwargs: dict[str, Any], capability: int) -> Any:
    """The ``ASTSource`` Triton's JIT would compile for ``fn[grid](*args, **kwargs)``.

    Args:
        fn: a ``triton.runtime.JITFunction``.
        args: positional arguments as a launch would pass them (:class:`FakeTensor` for tensors,
            Python ints/floats for scalars, constexpr values).
        kwargs: keyword arguments (constexprs, ``num_warps`` ...).
        capability: the target's compute capability (90 for sm_90a).

    Returns:
        The ``triton.compiler.ASTSource`` (``.signature``, ``.constants``, ``.attrs``, ``.hash()``).

    Raises:
        RuntimeError: the JIT did not reach the compile step (the message says what it raised).
    """
    import triton.compiler as tc
    from triton.runtime.driver import driver

    with _LOCK:
        saved_active = driver._active  # private: set_active/reset_active would create the real driver
        saved_compile = tc.compile

        def catch(src: Any, *a: Any, **k: Any) -> Any:
            raise _Caught(src)

        driver.set_active(_StandInDriver(capability))
        tc.compile = catch
        try:
            with warnings.catch_warnings():
                # Triton 3.9 warns that TRITON_DEFAULT_FP_FUSION is unset when its JIT reads the
                # option; the hash does not depend on it and the user's launch reads it anyway
                warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION is unset",
                                        category=UserWarning)
                fn.warmup(*args, grid=(1,), **kwargs)
        except _Caught as c:
            return c.src
        finally:
            tc.compile = saved_compile
            driver._active = saved_active
            fn.device_caches.clear()  # forget the stand-in binder (real launches make their own)
    raise RuntimeError(f"Triton's JIT did not compile {getattr(fn, '__name__', fn)} (a kernel "
                       "already in its in-memory cache?)")


def override_folder_name(src: Any) -> str:
    """The override sub-folder Triton reads for ``src``: base32 of ``src.hash()`` without
    padding (``triton.runtime.cache._base32``)."""
    import base64

    return base64.b32encode(bytes.fromhex(src.hash())).decode().rstrip("=")
