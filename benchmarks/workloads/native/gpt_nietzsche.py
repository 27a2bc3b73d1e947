"""The GPT of `gpt_nietzsche` in plain PyTorch: the same model, data, hyperparameters and precision as the Keras
workload, written as nanoGPT writes its model.

Model: token and learned position embeddings (65 x 384, 256 x 384), dropout 0.2, 6 pre-norm blocks of causal
self-attention (6 heads of 64, query/key/value and output projections without biases, dropout 0.2 on the attention
weights and after the projection) and a 4x GELU MLP (exact GELU, as Keras's "gelu"), layer norms with a scale and
no bias (epsilon 1e-5), the logits a bias-free projection; every weight drawn from N(0, 0.02) as the Keras model
draws them, the layer norms' scales 1. Attention is `torch.nn.functional.scaled_dot_product_attention` with
`is_causal=True` and the dropout inside it: the same computation as Keras's MultiHeadAttention with
use_causal_mask=True, which PyTorch runs as its fused (flash) kernel where the GPU has one.

Optimizer: AdamW, learning rate 1e-3, betas (0.9, 0.99), epsilon 1e-7 (Keras's default; PyTorch's is 1e-8), weight
decay 0.1 on every weight except the layer norms' scales (the Keras workload excludes its "gamma" variables),
gradients clipped to a global norm of 1 (the harness clips). PyTorch's fused AdamW kernel on GPUs.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.data.types import Data
from benchmarks.workloads.gpt_nietzsche import CONTEXT, DROPOUT, HEADS, INIT, LAYERS, SPEC, WIDTH, load_data
from benchmarks.workloads.native import Training

__all__ = ["SPEC", "build_training", "load_data"]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH, eps=1e-5, bias=False)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.project = nn.Linear(WIDTH, WIDTH, bias=False)
        self.norm2 = nn.LayerNorm(WIDTH, eps=1e-5, bias=False)
        self.expand = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.contract = nn.Linear(4 * WIDTH, WIDTH, bias=False)
        self.dropout = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, steps, HEADS, width // HEADS).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(
            q, k, v, dropout_p=DROPOUT if self.training else 0.0, is_causal=True, scale=1 / math.sqrt(width // HEADS)
        )
        x = x + self.dropout(self.project(attended.transpose(1, 2).reshape(batch, steps, width)))
        out: torch.Tensor = x + self.dropout(self.contract(F.gelu(self.expand(self.norm2(x)))))
        return out


class GPT(nn.Module):
    def __init__(self, vocabulary: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, WIDTH)
        self.positions = nn.Parameter(torch.empty(CONTEXT, WIDTH))
        self.dropout = nn.Dropout(DROPOUT)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH, eps=1e-5, bias=False)
        self.logits = nn.Linear(WIDTH, vocabulary, bias=False)
        for name, parameter in self.named_parameters():
            if "norm" not in name:
                nn.init.normal_(parameter, std=INIT)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.tokens(tokens) + self.positions)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.logits(self.norm(x))
        return logits


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def _batch(batch: tuple[object, object]) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = batch
    return torch.as_tensor(x, dtype=torch.long), torch.as_tensor(y, dtype=torch.long)


def build_training(data: Data, device: torch.device) -> Training:
    model = GPT(len(data.extras["chars"])).to(device)
    decayed = [p for name, p in model.named_parameters() if "norm" not in name]
    kept = [p for name, p in model.named_parameters() if "norm" in name]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": 0.1}, {"params": kept, "weight_decay": 0.0}],
        lr=1e-3,
        betas=(0.9, 0.99),
        eps=1e-7,
        fused=device.type == "cuda",
    )
    return Training(model, optimizer, _loss, _batch, clip_norm=1.0)
