"""Without a float64 reference, emulated correctness compares every candidate with Triton's own
kernel emulated on the same inputs: a search arm whose output depends on its meta-parameters
(issue 23: a BLOCK_SIZE=128 arm differing from the baseline in 65,531 of 65,536 elements was
written as the best PTX) is rejected; Triton's own PTX passes."""

from __future__ import annotations

from agent.loop import _emulate
from harness.reference import compile_reference
from kernels import Config, load_spec

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def center_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    """y = x minus the mean of its block: the output depends on BLOCK_SIZE."""
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, x - tl.sum(x, axis=0) / BLOCK_SIZE, mask=m)
'''

SPEC = '''
name: center
source: {path: k.py, function: center_kernel}
params:
  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [N], role: in}
  - {name: y_ptr, kind: pointer, dtype: fp32, shape: [N], role: out}
  - {name: n, kind: scalar, dtype: i32, value: N}
  - {name: BLOCK_SIZE, kind: constexpr}
sizes: {verify: {N: 1024}, bench: {N: 65536}}
grid: ["cdiv(N, BLOCK_SIZE)"]
autotune: {meta: {BLOCK_SIZE: [256]}, num_warps: [4]}
'''


def test_a_search_arm_must_agree_with_tritons_emulated_output(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "s.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "s.yaml")
    assert spec.reference is None
    base = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path / "c")
    arm = compile_reference(spec, "sm_90a", Config(meta={"BLOCK_SIZE": 128}, num_warps=4),
                            cache_dir=tmp_path / "c")
    cache: dict = {}
    own = _emulate(spec, "sm_90a", base, base.ptx, {"threads": base.abi.threads},
                   ref_outputs=cache)
    assert own.status == "ok", own.message
    assert own.message == "outputs match Triton's own kernel (emulated on the same inputs)"
    bad = _emulate(spec, "sm_90a", base, arm.ptx,
                   {"threads": arm.abi.threads, "meta": {"BLOCK_SIZE": 128}},
                   ref_outputs=cache)
    assert bad.status == "mismatch", bad.message
    assert bad.outputs["y_ptr"].n_bad > 900  # nearly every element differs
    assert len(cache) == 1  # Triton's kernel was emulated once for both candidates
