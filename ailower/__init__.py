"""ailower: an AI-lowering service that translates Triton kernels straight into NVIDIA PTX.

This package holds the command line (:mod:`ailower.cli`) and the settings (:mod:`ailower.settings`)
only; the work happens in ``kernels``, ``harness``, ``verifier`` and ``agent``.
"""

__version__ = "0.1.0"
