"""ResNet-50 in plain PyTorch: the same network as `keras.applications.ResNet50(weights=None)`, with the Keras
workload's data, hyperparameters and precision.

Network: Keras's ResNet50 (v1, as He et al. 2015 and Keras build it): a 7x7 stride-2 convolution after 3 pixels of
zero padding, a 3x3 stride-2 max pool after 1 pixel of padding, then 3, 4, 6 and 3 bottleneck blocks of 64, 128, 256
and 512 filters (x4 out), the stride of a stage's first block on its first 1x1 convolution (torchvision's
"v1.5" puts it on the 3x3), every convolution with a bias, batch normalisation with epsilon 1.001e-5 and momentum
0.99 (PyTorch counts momentum the other way: 0.01), global average pooling and a 1,000-way linear layer giving logits.
Weights: Glorot-uniform kernels and zero biases, Keras's defaults. 25.6 M parameters, as Keras counts them.

Data: the Keras workload's uint8 NHWC batches; on the device they become float NCHW tensors in channels-last
memory (the same bytes, no copy), the layout cuDNN's tensor-core convolutions prefer.

Optimizer: SGD with momentum 0.9, learning rate 0.1 and Keras's decoupled weight decay of 1e-4 (each weight shrunk
by lr x 1e-4 before the update, on every variable, as Keras's SGD does; PyTorch's own `weight_decay` adds the decay
to the gradient instead); PyTorch's fused SGD kernel on GPUs, which also takes the float16 loss scale's overflow
check without waiting for the host.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.data.types import Data
from benchmarks.workloads.native import Training
from benchmarks.workloads.resnet50 import SPEC, load_data

__all__ = ["SPEC", "build_training", "load_data"]

EPSILON = 1.001e-5
MOMENTUM = 0.01  # Keras's 0.99
WEIGHT_DECAY = 1e-4


def _conv_bn(inputs: int, outputs: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, kernel, stride, padding), nn.BatchNorm2d(outputs, EPSILON, MOMENTUM)
    )


class Bottleneck(nn.Module):
    def __init__(self, inputs: int, filters: int, stride: int, project: bool) -> None:
        super().__init__()
        self.shortcut = _conv_bn(inputs, 4 * filters, 1, stride) if project else None
        self.reduce = _conv_bn(inputs, filters, 1, stride)
        self.conv = _conv_bn(filters, filters, 3, padding=1)
        self.expand = _conv_bn(filters, 4 * filters, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.shortcut(x) if self.shortcut is not None else x
        h = F.relu(self.reduce(x))
        h = F.relu(self.conv(h))
        return F.relu(self.expand(h) + shortcut)


class ResNet50(nn.Module):
    STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 64, 7, stride=2, padding=3)
        blocks: list[nn.Module] = []
        inputs = 64
        for filters, count, stride in self.STAGES:
            for index in range(count):
                blocks.append(Bottleneck(inputs, filters, stride if index == 0 else 1, project=index == 0))
                inputs = 4 * filters
        self.blocks = nn.Sequential(*blocks)
        self.classifier = nn.Linear(inputs, classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear) and module.bias is not None:
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.stem(x)), 3, stride=2, padding=1)
        x = self.blocks(x)
        logits: torch.Tensor = self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return logits


class DecoupledSGD(torch.optim.SGD):
    """SGD with Keras's weight decay: every weight multiplied by 1 - lr x decay before the momentum update."""

    def __init__(self, params: list[nn.Parameter], lr: float, momentum: float, decay: float, fused: bool) -> None:
        super().__init__(params, lr=lr, momentum=momentum, fused=fused)
        self.decay = decay

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            torch._foreach_mul_(group["params"], 1 - group["lr"] * self.decay)
        super().step()


def _loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


def _batch(batch: tuple[object, object]) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = batch
    return torch.as_tensor(images), torch.as_tensor(labels, dtype=torch.long).flatten()


def _on_device(images: torch.Tensor) -> torch.Tensor:
    # NHWC bytes seen as NCHW: a channels-last tensor, no copy; the cast to float happens on the device
    return images.permute(0, 3, 1, 2).float()


def build_training(data: Data, device: torch.device) -> Training:
    model = ResNet50(data.extras["classes"]).to(device)
    model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = DecoupledSGD(
        list(model.parameters()), lr=0.1, momentum=0.9, decay=WEIGHT_DECAY, fused=device.type == "cuda"
    )
    return Training(model, optimizer, _loss, _batch, on_device=_on_device, accuracy=True)
