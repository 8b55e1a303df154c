"""Importing task and candidate files and building models and inputs on a device.

Inputs and parameters are made on the target device from a seeded generator: the task's
``get_inputs`` runs under a default-device context, so ``torch.randn`` lands on the GPU
directly and nothing is copied from the host.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

import torch


def import_file(path: Path, module_name: str) -> ModuleType:
    """Import ``path`` as a fresh module called ``module_name``."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def call_with_dims(function, dims: dict[str, int]):
    """Call ``get_inputs``/``get_init_inputs`` with the shape dimensions it names."""
    params = inspect.signature(function).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return function(**dims)
    return function(**{name: value for name, value in dims.items() if name in params})


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)


def make_inputs(module: ModuleType, dims: dict[str, int], device: torch.device, seed: int | None) -> list:
    """The task's inputs for one shape, made on ``device`` from ``seed`` (None: the generator left as it is, for
    calls captured and never run, ``preload.py``)."""
    if seed is not None:
        seed_everything(seed)
    with torch.device(device):
        inputs = call_with_dims(module.get_inputs, dims)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def build_model(model_class, module: ModuleType, dims: dict[str, int], device: torch.device, seed: int | None):
    """Construct ``model_class`` from the task's init inputs after seeding, on ``device``.

    Reference and candidate are built from the same seed so that their parameters match. None: not seeded (a
    capture that is never run, ``preload.py``: seeding is no capturable call).
    """
    init_inputs = call_with_dims(module.get_init_inputs, dims)
    if seed is not None:
        seed_everything(seed)
    with torch.device(device):
        model = model_class(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return model


def as_output_list(output) -> list:
    """A forward's result as a flat list (a single tensor, or a tuple/list of them)."""
    if isinstance(output, (tuple, list)):
        return list(output)
    return [output]
