"""Shared builders for sandbox tests: the softmax spec as a client uploads it, with extra lines
injected at the top of the kernel body."""

from __future__ import annotations

import ast
import inspect

from kernels import get


def suite_source_text(module: str) -> str:
    """A suite module reduced to its triton imports and @triton.jit functions (valid for upload)."""
    tree = ast.parse(inspect.getsource(__import__(module, fromlist=["SPEC"])))
    keep = [n for n in tree.body
            if (isinstance(n, ast.Import) and n.names[0].name.startswith("triton"))
            or (isinstance(n, ast.FunctionDef) and n.decorator_list)]
    return "\n".join(ast.unparse(n) for n in keep) + "\n"


def softmax_with(body_lines: list[str], *, name: str = "my_softmax") -> dict:
    """The uploaded softmax spec whose kernel body starts with ``body_lines`` (4-space indented)."""
    text = suite_source_text("kernels.suite.softmax")
    head, sep, rest = text.partition("def softmax_kernel(")
    sig, colon, body = rest.partition(":\n")
    # the signature may contain 'tl.constexpr' colons; split at the first '):\n' instead
    sig_end = rest.index("):\n") + 3
    inject = "".join(f"    {ln}\n" for ln in body_lines)
    text = head + sep + rest[:sig_end] + inject + rest[sig_end:]
    d = get("softmax").model_dump(mode="json")
    d["source"] = {"function": "softmax_kernel", "text": text}
    d["reference"] = None
    d["name"] = name
    return d
