"""An importable module with a kernel that is a @staticmethod (test data)."""
import triton
import triton.language as tl


class Ops:
    @staticmethod
    @triton.jit
    def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
