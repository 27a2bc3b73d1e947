"""Native PyTorch workloads: the `torch-native` backend's twins of Keras workloads, and the contract a user's own
native training file keeps.

A native workload module defines:
- `SPEC` and `load_data(request, where) -> Data`, as a Keras workload (benchmarks.workloads): a twin imports both
  from its Keras workload, so it trains on the same data with the same published hyperparameters;
- `build_training(data: Data, device: torch.device) -> Training`: the model (float32 weights, on `device`), its
  optimizer, and the workload's part of one training step: how a batch becomes tensors and the loss of the model's
  output.

The harness (benchmarks.harness.native) does the rest of the step the same way for every native workload: the
device, autocast to the run's precision (float16 with a dynamic loss scale, or bfloat16), backward, gradient
clipping, the optimizer's update, `torch.compile` where the run asks for it (`--jit-compile on`) and
DistributedDataParallel over `--gpus N` processes. So precision, compilation and data parallelism are settings of
the run, recorded beside its times, not something each workload reimplements.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from benchmarks.workloads import UnknownWorkload

if TYPE_CHECKING:
    import torch

# The built-in twins: the same workload names as their Keras originals.
NATIVE_WORKLOADS: tuple[str, ...] = ("resnet50", "gpt_nietzsche")


@dataclass
class Training:
    """What a native workload hands the harness."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    # The loss of one batch: (model outputs, targets) -> a scalar tensor. Runs under autocast; compute it in float32
    # where it reduces (cross-entropy does under autocast).
    loss: Callable[[Any, Any], torch.Tensor]
    # One batch as the data gives it (NumPy arrays) -> (inputs, targets) as CPU tensors; the harness moves them.
    batch: Callable[[Any], tuple[Any, Any]]
    # Tensors on the device -> what the model takes (e.g. uint8 NHWC images to float NCHW in channels-last memory).
    on_device: Callable[[Any], Any] = lambda x: x
    clip_norm: float | None = None  # gradients clipped to this global norm before the update
    accuracy: bool = False  # the fraction of targets the output's argmax hits, as Keras's "accuracy" metric
    notes: str = ""  # what differs from the Keras twin, recorded with the run


class UnknownNativeWorkload(UnknownWorkload):
    pass


def load(name: str) -> ModuleType:
    if name not in NATIVE_WORKLOADS:
        raise UnknownNativeWorkload(
            f"no native twin of {name!r} for --backend torch-native; choose from {', '.join(NATIVE_WORKLOADS)}, "
            "or give your own with --workload-file (docs/workloads.md)"
        )
    return importlib.import_module(f"benchmarks.workloads.native.{name}")
