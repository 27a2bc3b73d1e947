"""tiny_mlp as a native PyTorch workload of one's own: the same data and shapes, a plain training loop's parts.

    python -m benchmarks check-workload --workload-file examples/workloads/tiny_mlp_torch.py
    python -m benchmarks run --workload-file examples/workloads/tiny_mlp_torch.py --backend torch-native \\
        --suite quick --allow-synthetic

A native workload defines SPEC and load_data as a Keras one, and `build_training(data, device)` instead of
build_model and compile_args: the model on `device`, its optimizer, how a batch becomes tensors, and the loss. The
harness does the step (autocast, backward, update, torch.compile with --jit-compile on, DistributedDataParallel
with --gpus N). Without tiny_mlp.npz in --data-dir it trains on synthetic data of the shapes SPEC.shapes declares.
"""

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.data.types import Data
from benchmarks.workloads import Cut, Shapes, WorkloadSpec
from benchmarks.workloads.native import Training

SPEC = WorkloadSpec(
    name="tiny_mlp_torch",
    epochs=10,
    batch_size=64,
    datasets=("tiny_mlp_npz",),
    hyperparameters={"optimizer": "Adam", "learning_rate": 0.001, "hidden_units": 64},
    quick=Cut(epochs=3, train_limit=2048, val_limit=512),
    short=Cut(epochs=5, train_limit=None, val_limit=None),
    shapes=Shapes(inputs=(32,), classes=4, train_samples=8192, val_samples=1024),
    reference="examples/workloads/tiny_mlp.py, in plain PyTorch",
)


def _batch(batch: tuple[Any, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = batch
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long).flatten()


def build_training(data: Data, device: torch.device) -> Training:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)  # Keras's epsilon
    return Training(model, optimizer, F.cross_entropy, _batch, accuracy=True)
