"""The ``fast`` family: kernels written with Triton's Hopper/Blackwell features (TMA descriptors,
persistent and warp-specialized loops, fp8 and block-scaled MMA, clusters, attention with TMA).

They are the verifier's false-alarm and mutation corpus (issue 18); ``kernels.registry.FAST``
lists them and ``ailower kernels --family fast`` prints them.
"""
