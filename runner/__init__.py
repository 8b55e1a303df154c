"""kbench: a reproducible benchmark runner for GPU kernels.

This package root imports nothing heavy: the worker (``runner.worker``) runs inside the
sandbox with only torch, triton and the standard library, so no module it imports may pull
in Hydra, MLflow or Docker.
"""

__version__ = "0.1.0"
