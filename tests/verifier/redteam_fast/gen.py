"""Compile triton_kernels.py for sm_90a / sm_100a with the installed Triton (no GPU) into triton/.

Run: python tests/verifier/redteam_fast/gen.py   (writes triton/<kernel>_<arch>.ptx)
"""
import sys
import warnings
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import triton_kernels as tk  # noqa: E402

CC = {"sm_90a": 90, "sm_100a": 100}
D16 = "tensordesc<fp16[{}]>"

KERNELS = {
    "persistent_desc_subtile": (tk.persistent_desc_subtile,
        {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
         "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "NUM_SMS": "constexpr"},
        {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132}, dict(num_warps=8, num_stages=3)),
    "ws_gemm_kloop": (tk.ws_gemm_kloop,
        {"a_desc": D16.format("128, 64"), "b_desc": D16.format("64, 128"),
         "c_desc": D16.format("128, 128"), "K": "i32",
         "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
        {"BM": 128, "BN": 128, "BK": 64}, dict(num_warps=8, num_stages=3)),
    "softmax_tma": (tk.softmax_tma,
        {"x_ptr": "*fp16", "y_ptr": "*fp16", "n_rows": "i32", "n_cols": "i32",
         "BR": "constexpr", "BC": "constexpr"},
        {"BR": 4, "BC": 256}, dict(num_warps=4, num_stages=2)),
    "fp8_rowscale_gemm": (tk.fp8_rowscale_gemm,
        {"a_desc": "tensordesc<fp8e4nv[128, 128]>", "b_desc": "tensordesc<fp8e4nv[128, 128]>",
         "c_ptr": "*bf16", "sa_ptr": "*fp32", "sb_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
         "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
        {"BM": 128, "BN": 128, "BK": 128}, dict(num_warps=8, num_stages=4)),
    "splitk_atomic": (tk.splitk_atomic,
        {"a_desc": D16.format("64, 64"), "b_desc": D16.format("64, 128"), "c_ptr": "*fp32",
         "M": "i32", "N": "i32", "K": "i32", "SPLIT": "constexpr",
         "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
        {"SPLIT": 4, "BM": 64, "BN": 128, "BK": 64}, dict(num_warps=4, num_stages=3)),
    "flash_fwd_tma": (tk.flash_fwd_tma,
        {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16",
         "sm_scale": "fp32", "S": "i32", "H": "constexpr", "D": "constexpr",
         "BM": "constexpr", "BN": "constexpr"},
        {"H": 4, "D": 64, "BM": 128, "BN": 64}, dict(num_warps=4, num_stages=2)),
}


def main() -> int:
    out = HERE / "triton"
    out.mkdir(exist_ok=True)
    fails = 0
    for name, (fn, sig, cx, opts) in KERNELS.items():
        for arch, cc in CC.items():
            src = ASTSource(fn=fn, signature=sig, constexprs=cx)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    k = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=opts)
            except Exception as e:  # report and continue: a compile failure is a finding too
                print(f"{name} {arch}: COMPILE FAILED {type(e).__name__}: {str(e)[:300]}")
                fails += 1
                continue
            warps = int(getattr(k.metadata, "num_warps", opts["num_warps"]))
            p = out / f"{name}_{arch}.ptx"
            p.write_text(k.asm["ptx"])
            print(f"{p.name}: {len(k.asm['ptx'].splitlines())} lines, {32 * warps} threads")
    return 1 if fails else 0


if __name__ == "__main__":
    raise SystemExit(main())
