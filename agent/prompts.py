"""Prompts for the LLM providers: the system prompt, the first user turn and feedback turns.

Every function is a pure function of its inputs (no timestamps, no randomness, dicts rendered in
their defined order), so the same task gives byte-identical prompts: transcripts diff cleanly
and prompt caches hit.
"""

from __future__ import annotations

from typing import Any

from agent.tools import MAX_THREADS, tool_names

__all__ = ["system_prompt", "initial_prompt", "feedback_prompt", "NO_SUBMIT_NOTE"]

NO_SUBMIT_NOTE = (
    "Your previous turn ended without a valid submit call, so no candidate was evaluated. "
    "Every turn must end with exactly one call to the submit tool."
)
"""Told to the model at the start of the next turn after a turn without a usable submit."""

_TOOL_HELP = {
    "compile": "compile(ptx): assemble with ptxas for the target; returns errors/warnings, or "
               "registers, spills and shared memory.",
    "verify": "verify(ptx, threads?): ailower's static verifier (signature, launch contract, PTX "
              "rules); returns findings.",
    "evaluate": "evaluate(ptx, threads, meta, dynamic_smem?): run on the GPU, check against the "
                "float64 reference and time it next to Triton.",
    "submit": "submit(ptx, threads, meta?, dynamic_smem?, cluster_dims?, global_scratch_size?, "
              "notes?): hand in this turn's candidate; ends the turn.",
    "patch": "patch(edits=[{search, replace}], base?): edit the current candidate in place with "
             "exact search/replace pairs (each search must match once); compile/verify/evaluate/"
             "submit without ptx then use it. Prefer it to resending a large module.",
    "show": "show(what, start_line?, max_lines?): numbered lines of ttgir, llir, ptx (Triton's), "
            "sass (where cuobjdump exists), source, or your current candidate.",
}


def system_prompt(ctx: Any) -> str:
    """The system prompt: role, rules of the game and the tools.

    Args:
        ctx: the :class:`~agent.providers.base.ProposalContext` (uses ``arch``, ``abi``,
            ``gpu_available``, ``max_tool_calls``).

    Returns:
        The prompt text (deterministic for a given ``ctx``).
    """
    tools = tool_names(ctx.gpu_available)
    gpu = ("A GPU is available: `evaluate` runs your PTX on it, checks the results against the "
           "float64 reference and times it next to Triton's kernel."
           if ctx.gpu_available else
           "No GPU is available in this run: `evaluate` is not offered. Rely on `compile` and "
           "`verify`; the harness checks what you submit as far as it can without a GPU.")
    lines = [
        f"You are an expert NVIDIA GPU compiler engineer. You lower Triton kernels by hand to PTX "
        f"for {ctx.arch}, aiming for kernels that are correct first and then faster than Triton's "
        f"own PTX.",
        "",
        "Rules:",
        f"1. Keep the entry signature exactly: `.entry {ctx.abi.entry}` with the same parameters "
        f"in the same order and with the same types, including the two trailing scratch pointers "
        f"Triton appends (global_scratch, profile_scratch), even if you do not use them.",
        f"2. A `ptx` argument is always a complete PTX module: `.version`, `.target {ctx.arch}`, "
        f"`.address_size 64`, then the `.visible .entry`; never a fragment. To change only part "
        f"of a large module, use `patch` on the current candidate (it starts as Triton's PTX) and "
        f"omit `ptx` from the next tool calls.",
        f"3. The launch: threads per CTA is what you submit as `threads` (reference: "
        f"{ctx.abi.threads}; at most {MAX_THREADS}; it must equal `.reqntid` if you declare one). "
        f"The grid comes from the spec's grid expression evaluated with the `meta` you submit "
        f"(default: the reference meta). Launch settings you omit from submit take the "
        f"reference contract's values.",
        "4. Every turn: use the tools as needed, then call `submit` exactly once. The turn ends "
        "at submit; put the PTX in the tool arguments, not in plain text.",
        f"5. You may make at most {ctx.max_tool_calls} tool calls (other than submit) per turn.",
        "6. After each submission you receive its outcome (ptxas diagnostics, verifier findings, "
        "correctness and timings). Fix what failed; otherwise try to make it faster. A "
        "candidate that is incorrect or does not assemble scores nothing.",
        *_variant_rules(ctx),
        "",
        "Tools: " + ", ".join(f"`{t}`" for t in tools) + ".",
        *(f"- {_TOOL_HELP[t]}" for t in tools),
        "",
        gpu,
    ]
    return "\n".join(lines)


def _variant_rules(ctx: Any) -> list[str]:
    k = getattr(ctx, "max_variants", 1)
    if k <= 1:
        return []
    return [
        f"7. Plan, then variants: a submit may carry a one-line `plan` (the bottleneck you "
        f"diagnosed and the change) and up to {k} `variants`, each a full module (`ptx`) or "
        "`edits` on a base (`best`: the best valid candidate so far, the default; `current`; "
        "`reference`), with its own launch settings if they differ. Each is assembled and "
        "verified; the survivors are evaluated together against the baseline; the best valid "
        "one becomes the next turn's `best`, and you get every variant's outcome.",
    ]


def _fmt_value(v: Any) -> str:
    return "-" if v is None else str(v)


def _spec_section(ctx: Any) -> list[str]:
    spec = ctx.spec
    desc = f": {spec.description}" if spec.description else ""
    out = [f"Kernel `{spec.name}`{desc}.", ""]
    out.append("Parameters (in order):")
    for p in spec.params:
        bits = [f"kind={p.kind}"]
        if p.dtype:
            bits.append(f"dtype={p.dtype}")
        if p.shape is not None:
            bits.append("shape=(" + ", ".join(str(e) for e in p.shape) + ")")
        if p.role:
            bits.append(f"role={p.role}")
        if p.value is not None:
            bits.append(f"value={p.value}")
        if p.kind == "constexpr" and p.name in ctx.constexprs:
            bits.append(f"= {ctx.constexprs[p.name]}")
        if p.divisibility:
            bits.append(f"divisible by {p.divisibility}")
        if p.block_shape is not None:
            bits.append("block_shape=(" + ", ".join(str(e) for e in p.block_shape) + ")")
        out.append(f"- `{p.name}`: " + ", ".join(bits))
    out.append("")
    out.append("Constexpr values (fixed; your PTX is for exactly these): "
               + (", ".join(f"{k}={v}" for k, v in ctx.constexprs.items()) or "none") + ".")
    cfg = ctx.config
    meta = ", ".join(f"{k}={v}" for k, v in cfg.meta.items()) or "none"
    out.append(f"Reference config: meta {meta}; num_warps={cfg.num_warps}, "
               f"num_stages={cfg.num_stages}, num_ctas={cfg.num_ctas}.")
    out.append("Grid expression (programs along x, y, z): ("
               + ", ".join(str(e) for e in spec.grid) + ").")
    out.append("")
    out.append("Problem sizes (the grid shown is for the reference meta):")
    for name, dims in spec.sizes.items():
        d = ", ".join(f"{k}={v}" for k, v in dims.items())
        try:
            g = spec.grid_dims(name, cfg.meta)
            grid = f"grid = ({g[0]}, {g[1]}, {g[2]})"
        except ValueError as exc:
            grid = f"grid: cannot evaluate ({exc})"
        role = {"verify": " (checked against the float64 reference)",
                "bench": " (timed)"}.get(name, "")
        out.append(f"- `{name}`{role}: {d}; {grid}")
    return out


def _abi_section(ctx: Any) -> list[str]:
    abi = ctx.abi
    out = ["Entry signature (keep it exactly):", "```", abi.signature_text(), "```", "",
           "Parameters as the launcher passes them:"]
    for i, p in enumerate(abi.params):
        if p.source == "global_scratch":
            size = (f"{abi.global_scratch_size} bytes per CTA, aligned to "
                    f"{abi.global_scratch_align}" if abi.global_scratch_size else "NULL (size 0)")
            what = f"`global_scratch` pointer, appended by Triton; {size}"
        elif p.source == "profile_scratch":
            what = ("`profile_scratch` pointer, appended by Triton; "
                    + (f"{abi.profile_scratch_size} bytes per CTA" if abi.profile_scratch_size
                       else "NULL (size 0)"))
        else:
            what = f"{p.source} `{p.spec_param}`" if p.spec_param else p.source
        out.append(f"{i}. `{p.name}` ({p.signature()}): {what}")
    out += [
        "",
        f"Threads per CTA: {abi.threads} ({abi.threads // 32} warps).",
        f"Dynamic shared memory: {abi.dynamic_smem} bytes.",
        f"CTAs per cluster: {abi.num_ctas}"
        + (" (the grid's x extent is multiplied by it)." if abi.num_ctas > 1 else "."),
        f"Global scratch: {abi.global_scratch_size} bytes per CTA"
        + (f" (align {abi.global_scratch_align})." if abi.global_scratch_size
           else " (pointer is NULL)."),
    ]
    if abi.tmem_size:
        out.append(f"Tensor memory: {abi.tmem_size} columns.")
    return out


def initial_prompt(ctx: Any) -> str:
    """The first user turn: the task, the contract and Triton's output as a starting point.

    Args:
        ctx: the :class:`~agent.providers.base.ProposalContext`.

    Returns:
        The prompt text (deterministic for a given ``ctx``): Triton source, spec (parameters,
        constexprs, sizes, grid expression and the grid at each size), target, exact entry
        signature and launch contract, the knowledge-base section (``ctx.knowledge``: target
        facts with sources, matching transformations), Triton's TTGIR and PTX, and what to do.
    """
    parts = [
        f"# Task: lower `{ctx.spec.name}` to PTX for {ctx.arch}",
        "",
        f"Target architecture: {ctx.arch} (`.target {ctx.arch}`).",
        "",
        "## Triton source",
        "```python",
        ctx.triton_source.rstrip("\n"),
        "```",
        "",
        "## Spec",
        *_spec_section(ctx),
        "",
        "## Launch contract",
        *_abi_section(ctx),
        "",
        *([ctx.knowledge.rstrip("\n"), ""] if getattr(ctx, "knowledge", "") else []),
        "## Triton TTGIR (for the reference config)",
        "```mlir",
        ctx.ttgir.rstrip("\n"),
        "```",
        "",
        "## Triton PTX (a valid starting point: it assembles and is correct)",
        "```ptx",
        ctx.reference_ptx.rstrip("\n"),
        "```",
        "",
        "## Your turn",
        "Write a complete PTX module that keeps the entry signature above and computes the same "
        "results, ideally faster than Triton's PTX. Check it with the tools, then call `submit` "
        "exactly once. Submitting Triton's PTX unchanged is a valid (baseline) first move.",
    ]
    return "\n".join(parts)


def feedback_prompt(text: str) -> str:
    """A later user turn: the outcome of the previous candidate and what to do next.

    Args:
        text: the loop's rendering of the outcome (diagnostics, findings, timings).

    Returns:
        The prompt text.
    """
    return ("## Outcome of your previous submission\n\n"
            f"{text.strip()}\n\n"
            "Write the next candidate: fix what failed, or make it faster if it passed. Keep the "
            "entry signature, check with the tools, then call `submit` exactly once.")
