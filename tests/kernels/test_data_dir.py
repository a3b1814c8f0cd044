"""Issue 21 defect 9: extracted kernel sources go to the data directory, never straight to ~."""

from __future__ import annotations

import os
from pathlib import Path

KERNEL = '''import torch  # never imported: the source is parsed, not run
import triton
import triton.language as tl


@triton.jit
def twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


def test_path_sources_are_extracted_under_the_data_dir(tmp_path, monkeypatch):
    from kernels import load_spec

    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AILOWER_DATA_DIR", str(data))
    assert Path.home() == home
    (tmp_path / "mykernel.py").write_text(KERNEL)
    (tmp_path / "spec.yaml").write_text(
        "name: twice\nsource: {path: mykernel.py, function: twice}\n"
        "params:\n"
        "  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [N], role: in}\n"
        "  - {name: y_ptr, kind: pointer, dtype: fp32, shape: [N], role: out}\n"
        "  - {name: n, kind: scalar, dtype: i32, value: N}\n"
        "  - {name: BLOCK, kind: constexpr}\n"
        "sizes: {verify: {N: 1000}, bench: {N: 4096}}\n"
        "grid: ['cdiv(N, BLOCK)']\n"
        "autotune: {meta: {BLOCK: [256]}}\n")
    spec = load_spec(tmp_path / "spec.yaml")
    fn = spec.source.load()  # no cache_dir: the data directory's cache
    assert fn is not None
    written = [p for p in data.rglob("mykernel_*.py")]
    assert written and all(p.is_relative_to(data) for p in written)
    assert not any(home.rglob("*")), list(home.rglob("*"))


def test_the_suite_never_uses_the_users_data_dir():
    d = Path(os.environ["AILOWER_DATA_DIR"])
    assert not d.is_relative_to(Path.home() / ".ailower") and d.name.startswith("ailower-test-data-")
