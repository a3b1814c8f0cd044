"""Compile every kernel of the set with the installed Triton for sm_90a and sm_100a (no GPU
needed) into ``ptx/<name>_<arch>.ptx`` plus ``.json`` launch metadata.

Usage: ``python -m tests.emulator.realk.build [name ...]``
"""

from __future__ import annotations

import json
import sys

from harness import ReferenceCompileError, compile_reference
from tests.emulator.realk import ARCHS, PTX_DIR, specs


def main(names: list[str]) -> None:
    PTX_DIR.mkdir(exist_ok=True)
    for name, spec in specs().items():
        if names and name not in names:
            continue
        for arch in ARCHS:
            try:
                art = compile_reference(spec, arch, spec.configs()[0])
            except ReferenceCompileError as exc:
                print(f"{name} {arch}: {str(exc)[:200]}")
                continue
            (PTX_DIR / f"{name}_{arch}.ptx").write_text(art.ptx)
            meta = {"config": art.config.model_dump(mode="json"),
                    "dynamic_smem": art.abi.dynamic_smem,
                    "global_scratch_size": art.abi.global_scratch_size,
                    "triton_version": art.triton_version}
            (PTX_DIR / f"{name}_{arch}.json").write_text(json.dumps(meta, indent=1) + "\n")
            print(f"{name} {arch}: {len(art.ptx)} chars, triton {art.triton_version}")


if __name__ == "__main__":
    main(sys.argv[1:])
