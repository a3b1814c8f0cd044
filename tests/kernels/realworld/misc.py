"""Reductions, gathers, layout changes and scans in the styles of public repositories
(torch inductor-like generated reductions with atomics, embedding lookup, tiled transpose,
tl.cumsum, a module-level constexpr and helpers in the same file). Read with ast only."""

import torch
import triton
import triton.language as tl

TILE = tl.constexpr(32)


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4),
                          triton.Config({"BLOCK": 2048}, num_warps=8)], key=["n"])
@triton.jit
def sum_atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@triton.jit
def embedding_kernel(ids_ptr, weight_ptr, out_ptr, n_tokens, dim, BLOCK_T: tl.constexpr,
                     BLOCK_D: tl.constexpr):
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    toks = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    tm = toks < n_tokens
    ids = tl.load(ids_ptr + toks, mask=tm, other=0)
    m = tm[:, None] & (cols[None, :] < dim)
    rows = tl.load(weight_ptr + ids[:, None] * dim + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + toks[:, None] * dim + cols[None, :], rows, mask=m)


@triton.jit
def _tile_offsets(pid, n):
    return pid * TILE + tl.arange(0, TILE)


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N):
    """y[N, M] = x[M, N]^T, TILE x TILE tiles (TILE a module-level constexpr)."""
    rm = _tile_offsets(tl.program_id(0), M)
    rn = _tile_offsets(tl.program_id(1), N)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=m)
    tl.store(y_ptr + rn[None, :] * M + rm[:, None], tile, mask=m)


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, tl.cumsum(x, axis=0), mask=m)
