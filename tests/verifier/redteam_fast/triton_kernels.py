"""Red-team corpus (issue 18): correct fast Triton kernels written in the styles of public repos.

Each kernel here is correct code; `gen.py` compiles it with the installed Triton (3.9 when this
was written) for sm_90a and sm_100a without a GPU and writes the PTX under ``triton/``. Any
verifier *error* on these files is a false alarm. Written for measurement, not for CI.
"""
import triton
import triton.language as tl


@triton.jit
def persistent_desc_subtile(a_ptr, b_ptr, c_ptr, M, N, K,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                            NUM_SMS: tl.constexpr):
    """Persistent C = A @ B with device-side descriptors and a two-way epilogue subtile."""
    a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // 2])
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(pid, n_m * n_n, NUM_SMS):
        om = (tile // n_n) * BM
        on = (tile % n_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(k_tiles):
            a = a_d.load([om, kk * BK])
            b = b_d.load([on, kk * BK])
            acc = tl.dot(a, b.T, acc)
        acc = tl.reshape(acc, (BM, 2, BN // 2))
        acc = tl.permute(acc, (0, 2, 1))
        c0, c1 = tl.split(acc)
        c_d.store([om, on], c0.to(tl.float16))
        c_d.store([om, on + BN // 2], c1.to(tl.float16))


@triton.jit
def ws_gemm_kloop(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    """Non-persistent GEMM whose K loop alone is warp-specialized (host descriptors)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True, num_stages=3):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def softmax_tma(x_ptr, y_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    """Row softmax; rows loaded and stored through device-side TMA descriptors."""
    x_d = tl.make_tensor_descriptor(x_ptr, shape=[n_rows, n_cols], strides=[n_cols, 1],
                                    block_shape=[BR, BC])
    y_d = tl.make_tensor_descriptor(y_ptr, shape=[n_rows, n_cols], strides=[n_cols, 1],
                                    block_shape=[BR, BC])
    pid = tl.program_id(0)
    for r in tl.range(pid * BR, n_rows, tl.num_programs(0) * BR, num_stages=2):
        x = x_d.load([r, 0]).to(tl.float32)
        x = x - tl.max(x, axis=1)[:, None]
        e = tl.exp(x)
        y = e / tl.sum(e, axis=1)[:, None]
        y_d.store([r, 0], y.to(tl.float16))


@triton.jit
def fp8_rowscale_gemm(a_desc, b_desc, c_ptr, sa_ptr, sb_ptr, M, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp8 e4m3 GEMM with per-row A scales and per-column B scales, plain global store."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=4):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([pid_n * BN, k])
        acc = tl.dot(a, b.T, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
    sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
    acc = acc * sa[:, None] * sb[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def splitk_atomic(a_desc, b_desc, c_ptr, M, N, K, SPLIT: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Split-K GEMM: each program reduces a K slice with TMA loads, then atomically adds."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    k_per = tl.cdiv(K, SPLIT * BK) * BK
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(pid_k * k_per, tl.minimum((pid_k + 1) * k_per, K), BK, num_stages=3):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.atomic_add(c_ptr + rm[:, None] * N + rn[None, :], acc,
                  mask=(rm[:, None] < M) & (rn[None, :] < N), sem="relaxed")


@triton.jit
def flash_fwd_tma(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, S, H: tl.constexpr,
                  D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Flash-attention forward (non-causal), Q/K/V/O through device-side descriptors,
    online softmax with exp2; layout [B*H*S, D]."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rows = tl.num_programs(1) * S
    q_d = tl.make_tensor_descriptor(q_ptr, shape=[rows, D], strides=[D, 1], block_shape=[BM, D])
    k_d = tl.make_tensor_descriptor(k_ptr, shape=[rows, D], strides=[D, 1], block_shape=[BN, D])
    v_d = tl.make_tensor_descriptor(v_ptr, shape=[rows, D], strides=[D, 1], block_shape=[BN, D])
    o_d = tl.make_tensor_descriptor(o_ptr, shape=[rows, D], strides=[D, 1], block_shape=[BM, D])
    base = bh * S
    q = q_d.load([base + pid_m * BM, 0])
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start in tl.range(0, S, BN, num_stages=2):
        k = k_d.load([base + start, 0])
        s = tl.dot(q, k.T) * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_d.load([base + start, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    o_d.store([base + pid_m * BM, 0], acc.to(tl.float16))
