"""Verifier rules, one function per rule, grouped by family in one module each.

Every rule is a pure ``(ctx: Context) -> list[Finding]`` function whose docstring has the fixed
sections *What it checks*, *Why it is bad*, *Example*, *Use instead*, *ptxas*, *References*. Ids are
assigned only in :mod:`verifier.registry`.
"""
