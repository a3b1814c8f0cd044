"""A kernel the installed Triton cannot compile because of a version difference gets a message
naming the construct, the file line, the installed Triton, the supported range and a pin."""

from __future__ import annotations

import pytest

from harness import _triton_compat as compat
from harness.errors import ReferenceCompileError
from harness.reference import compile_reference
from kernels import load_spec

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def bp_kernel(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    # a comment naming make_block_ptr( is not the use
    xb = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(pid * BLOCK, 0),
                           block_shape=(BLOCK, BLOCK), order=(1, 0))
    x = tl.load(xb, boundary_check=(0, 1))
    yb = tl.make_block_ptr(y_ptr, shape=(M, N), strides=(N, 1), offsets=(pid * BLOCK, 0),
                           block_shape=(BLOCK, BLOCK), order=(1, 0))
    tl.store(yb, x, boundary_check=(0, 1))
'''

SPEC = """
name: bp
source: {path: bp.py, function: bp_kernel}
params:
  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [M, N], role: in}
  - {name: y_ptr, kind: pointer, dtype: fp32, shape: [M, N], role: out}
  - {name: M, kind: scalar, dtype: i32, value: M}
  - {name: N, kind: scalar, dtype: i32, value: N}
  - {name: BLOCK, kind: constexpr}
sizes: {verify: {M: 64, N: 64}, bench: {M: 256, N: 64}}
grid: ["cdiv(M, BLOCK)"]
autotune: {meta: {BLOCK: [64]}}
"""


def _removed_in_installed_triton() -> bool:
    import inspect

    import triton.language as tl

    return "have been removed" in inspect.getsource(tl.make_block_ptr)


def test_block_pointers_on_a_triton_without_them(tmp_path):
    (tmp_path / "bp.py").write_text(KERNEL)
    (tmp_path / "s.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "s.yaml")
    if not _removed_in_installed_triton():
        art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path / "c")
        assert art.abi.entry == "bp_kernel"  # an older Triton (3.6) compiles them
        return
    with pytest.raises(ReferenceCompileError) as info:
        compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path / "c")
    msg = str(info.value)
    assert f"{tmp_path / 'bp.py'}:9 uses tl.make_block_ptr" in msg  # the use, not the comment
    assert f"Triton {compat.triton_version()} no longer compiles" in msg
    assert "ailower supports Triton 3.6 (the GPU device's) through 3.9" in msg
    assert "pip install 'triton==3.6.*'" in msg


def test_unknown_language_member_and_unrelated_errors():
    class Wrapped(Exception):
        pass

    try:
        try:
            raise AttributeError("module 'triton.language' has no attribute 'fancy_op'")
        except AttributeError as inner:
            raise Wrapped("at 3:4: ...") from inner
    except Wrapped as exc:
        msg = compat.explain_compile_error(exc, "x = 1\ny = tl.fancy_op(x)\n", "k.py")
    assert msg is not None and msg.startswith("k.py:2 uses tl.fancy_op, which Triton")
    assert "does not have" in msg and compat.SUPPORTED_TRITON[0] in msg
    # the kernel's own mistakes are not blamed on the version
    assert compat.explain_compile_error(ValueError("incompatible shapes"), "", "k.py") is None


def test_an_error_inside_a_called_helper_is_shown(tmp_path):
    # Triton's outer CompilationError shows only the call site; the reason is in the helper
    (tmp_path / "bp.py").write_text('''import triton
import triton.language as tl

TILE: tl.constexpr = 32


@triton.jit
def _offsets(pid):
    return pid * TILE + tl.arange(0, TILE)


@triton.jit
def bp_kernel(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    o = _offsets(tl.program_id(0))
    tl.store(y_ptr + o, tl.load(x_ptr + o))
''')
    (tmp_path / "s.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "s.yaml")
    with pytest.raises(ReferenceCompileError) as info:
        compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path / "c")
    msg = str(info.value)
    assert "o = _offsets(tl.program_id(0))" in msg  # the call site
    assert "which failed inside: CompilationError" in msg and "return pid * TILE" in msg
    assert "Cannot access global variable TILE" in msg  # the reason
    assert msg.count("Cannot access global variable TILE") == 1
