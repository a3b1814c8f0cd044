"""The kernel suite: one module per kernel, each defining ``SPEC`` and a float64 ``reference``."""
