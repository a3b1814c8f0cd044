"""Compile triton_kernels.py for sm_90a with the installed Triton (no GPU) into triton_*.ptx."""
import sys
from pathlib import Path
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import triton_kernels as tk  # noqa: E402
KERNELS = {
    "ws_gemm_bias_relu": (tk.ws_gemm_bias_relu,
        {"a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp32", "c_ptr": "*fp16",
         "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
        {"BM": 128, "BN": 128, "BK": 64}, dict(num_warps=4, num_stages=3)),
    "tma_rowsum": (tk.tma_rowsum,
        {"x_desc": "tensordesc<fp16[8, 128]>", "y_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32",
         "BR": "constexpr", "BC": "constexpr"},
        {"BR": 8, "BC": 128}, dict(num_warps=4, num_stages=3)),
}
for name, (fn, sig, cx, opts) in KERNELS.items():
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx),
                       target=GPUTarget("cuda", 90, 32), options=opts)
    (HERE / f"triton_{name}_sm90a.ptx").write_text(k.asm["ptx"])
    print(name, "ok")
