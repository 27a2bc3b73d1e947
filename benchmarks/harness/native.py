"""The torch-native backend's training loop: a native workload's model, optimizer and loss (benchmarks.workloads.
native) trained epoch by epoch, with the callbacks the runner gives a Keras `fit` (the epoch timer first).

One step: the batch moved to the device (pinned host memory, copied while the previous step runs), the forward
pass and the loss under autocast to the run's precision, backward (through a dynamic loss scale in float16),
gradient clipping where the workload asks for it, the optimizer's update. With `compile`, the model is
`torch.compile`d (the first epoch pays for it, as Keras's first epoch pays for XLA). With several processes
(benchmarks.harness.processes), the model is wrapped in DistributedDataParallel (NCCL on GPUs, gloo on CPUs): each
process trains on its share of every global batch and the gradients are averaged, so a step is the one-process
step of the same global batch. Losses and accuracy are averaged over the epoch's steps as Keras reports them.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from benchmarks.data.types import Data
from benchmarks.harness.backends import Settings, dtype_policy
from benchmarks.harness.distribution import Distribution
from benchmarks.harness.processes import Place, job_fields, node_name
from benchmarks.harness.trainee import Trainee
from benchmarks.plugins import BadWorkload, step, trial_data
from benchmarks.workloads import WorkloadSpec
from benchmarks.workloads.native import Training

PRECISIONS = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": None}
PREFETCH = 2  # batches made ready on the host ahead of the step that takes them


def device_for(place: Place) -> torch.device:
    return torch.device("cuda", place.local_rank) if torch.cuda.is_available() else torch.device("cpu")


def start_process_group(place: Place, device: torch.device) -> None:
    """Join the job's process group (NCCL between GPUs, gloo between CPU processes); one process joins none."""
    if not place.several:
        return
    import torch.distributed as dist

    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        init_method=f"tcp://{place.master_addr}:{place.master_port}",
        rank=place.rank,
        world_size=place.world,
        device_id=device if device.type == "cuda" else None,
    )


def job_record(place: Place, device: torch.device) -> dict[str, Any] | None:
    """The job's processes, nodes (each process's, in rank order) and collectives; None for one process."""
    if not place.several:
        return None
    import torch.distributed as dist

    nodes: list[str] = [""] * place.world
    dist.all_gather_object(nodes, node_name())
    return job_fields(nodes, "nccl" if device.type == "cuda" else "gloo")


def end_process_group() -> None:
    """Leave the job's process group together: every process waits for the others first, so that none tears down
    the coordinator's store (rank 0 holds it) while another still talks to it."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


@dataclass
class EpochSums:
    """An epoch's running sums, kept on the device so that no step waits for the host."""

    loss: torch.Tensor
    steps: torch.Tensor
    correct: torch.Tensor
    samples: torch.Tensor

    @classmethod
    def zeros(cls, device: torch.device) -> EpochSums:
        return cls(*(torch.zeros((), dtype=torch.float64, device=device) for _ in range(4)))

    def add(self, loss: torch.Tensor, correct: torch.Tensor | None, samples: int) -> None:
        self.loss += loss.detach()
        self.steps += 1
        if correct is not None:
            self.correct += correct
        self.samples += samples

    def totals(self, place: Place) -> tuple[float, float, float, float]:
        """Summed over the job's processes: (loss sum, steps, correct, samples)."""
        stacked = torch.stack([self.loss, self.steps, self.correct, self.samples])
        if place.several:
            import torch.distributed as dist

            dist.all_reduce(stacked)
        loss, steps, correct, samples = (float(v) for v in stacked.cpu())
        return loss, steps, correct, samples


class NativeTrainer:
    """A native workload set up for one run on this process's device."""

    def __init__(
        self, training: Training, device: torch.device, precision: str, compile_model: bool, place: Place
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: choose from {', '.join(PRECISIONS)}")
        self.training, self.device, self.precision, self.place = training, device, precision, place
        self.autocast_dtype = PRECISIONS[precision] if device.type == "cuda" else None
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.autocast_dtype == torch.float16)
        model: torch.nn.Module = training.model
        if place.several:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        self.compiled = compile_model
        self.model: Callable[[Any], Any] = torch.compile(model) if compile_model else model
        self.parameters = [p for p in training.model.parameters() if p.requires_grad]

    @property
    def parameter_count(self) -> int:
        """Weights and buffers (batch-norm statistics), as Keras's count_params counts a model's variables."""
        model = self.training.model
        return sum(p.numel() for p in model.parameters()) + sum(
            b.numel() for name, b in model.named_buffers() if not name.endswith("num_batches_tracked")
        )

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def _forward(self, x: Any, y: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        with self._autocast():
            outputs = self.model(self.training.on_device(x))
            loss = self.training.loss(outputs, y)
        correct = (outputs.argmax(dim=-1) == y).sum() if self.training.accuracy else None
        return loss, correct

    def step(self, x: Any, y: Any, sums: EpochSums) -> None:
        loss, correct = self._forward(x, y)
        optimizer = self.training.optimizer
        self.scaler.scale(loss).backward()
        if self.training.clip_norm is not None:
            self.scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(self.parameters, self.training.clip_norm)
        self.scaler.step(optimizer)
        self.scaler.update()
        optimizer.zero_grad(set_to_none=True)
        sums.add(loss, correct, len(y))

    def fit(
        self,
        data: Data,
        epochs: int,
        callbacks: Sequence[Any],
        batch_size: int,
        validates: bool,
        seed: int,
    ) -> None:
        """Train `epochs` epochs, calling each callback's on_train_begin, on_epoch_begin and on_epoch_end (with the
        epoch's logs) as Keras's fit does."""
        rng = np.random.default_rng(seed)
        for callback in callbacks:
            callback.on_train_begin()
        for epoch in range(epochs):
            for callback in callbacks:
                callback.on_epoch_begin(epoch)
            logs = self._train_epoch(data, batch_size, rng)
            if validates and data.has_validation:
                logs |= {f"val_{k}": v for k, v in self._validate(data, batch_size).items()}
            for callback in callbacks:
                callback.on_epoch_end(epoch, logs)

    def _train_epoch(self, data: Data, batch_size: int, rng: np.random.Generator) -> dict[str, float]:
        self.training.model.train()
        sums = EpochSums.zeros(self.device)
        for x, y in self._on_device(batches(data.x_train, data.y_train, batch_size, rng, self.place)):
            self.step(x, y, sums)
        return self._logs(sums)

    @torch.no_grad()
    def _validate(self, data: Data, batch_size: int) -> dict[str, float]:
        self.training.model.eval()
        sums = EpochSums.zeros(self.device)
        for x, y in self._on_device(batches(data.x_val, data.y_val, batch_size, None, self.place)):
            loss, correct = self._forward(x, y)
            sums.add(loss, correct, len(y))
        return self._logs(sums)

    def _logs(self, sums: EpochSums) -> dict[str, float]:
        loss, steps, correct, samples = sums.totals(self.place)
        # each process's loss is the mean over its share of a batch: the job's is their mean
        logs = {"loss": loss / max(steps, 1.0)}
        if self.training.accuracy:
            logs["accuracy"] = correct / max(samples, 1.0)
        return logs

    def _on_device(self, host_batches: Iterator[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        """Batches as device tensors; on a GPU, pinned on a helper thread and copied without blocking the host."""
        tensors = (self.training.batch(batch) for batch in host_batches)
        if self.device.type != "cuda":
            yield from tensors
            return
        for x, y in _prefetched(((_pinned(x), _pinned(y)) for x, y in tensors), PREFETCH):
            yield _to(x, self.device), _to(y, self.device)


def _pinned(value: Any) -> Any:
    return torch.utils._pytree.tree_map(lambda t: t.pin_memory() if isinstance(t, torch.Tensor) else t, value)


def _to(value: Any, device: torch.device) -> Any:
    return torch.utils._pytree.tree_map(
        lambda t: t.to(device, non_blocking=True) if isinstance(t, torch.Tensor) else t, value
    )


_DONE = object()


def _prefetched(items: Iterator[Any], depth: int) -> Iterator[Any]:
    """`items`, produced on a helper thread up to `depth` ahead (an error there is raised here)."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)

    def produce() -> None:
        try:
            for item in items:
                ready.put(item)
            ready.put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            ready.put(exc)

    threading.Thread(target=produce, daemon=True, name="native-prefetch").start()
    while (item := ready.get()) is not _DONE:
        if isinstance(item, BaseException):
            raise item
        yield item


def batches(
    x: Any, y: Any, batch_size: int, rng: np.random.Generator | None, place: Place
) -> Iterator[tuple[Any, Any]]:
    """The global batches of an epoch as this process's shares: a PyDataset's batches in order (it batches
    itself), or arrays in batches of `batch_size`, shuffled each epoch where `rng` is given (as Keras's fit
    shuffles arrays); each process takes its contiguous share of every batch."""
    if y is None:  # a PyDataset (benchmarks.data.images): it batches itself
        for index in range(len(x)):
            yield _share(x[index], place)
        x.on_epoch_end()
        return
    count = len(x)
    order = rng.permutation(count) if rng is not None else None
    for start in range(0, count, batch_size):
        rows = order[start : start + batch_size] if order is not None else slice(start, start + batch_size)
        yield _share((x[rows], y[rows]), place)


def _share(batch: tuple[Any, Any], place: Place) -> tuple[Any, Any]:
    if not place.several:
        return batch
    size = len(batch[1]) // place.world
    rows = slice(place.rank * size, (place.rank + 1) * size)
    return batch[0][rows], batch[1][rows]


def trainee(
    module: Any,
    data: Data,
    spread: Distribution,
    settings: Settings,
    spec: WorkloadSpec,
    seed: int,
    place: Place,
) -> tuple[Trainee, Distribution]:
    """A native workload set up for the runner: this process's device and process group, the model built, the
    learning rate scaled by the batch policy, autocast, torch.compile and DDP as the settings say."""
    device = device_for(place)
    start_process_group(place, device)
    torch.manual_seed(seed)  # every process builds the same model; DDP checks it starts from rank 0's anyway
    torch.backends.cudnn.benchmark = True  # fixed shapes: cuDNN times its algorithms once and keeps the fastest
    training = module.build_training(data, device)
    torch.manual_seed(seed + place.rank)  # dropout masks differ between processes, as between devices
    spread = scale_learning_rate(training.optimizer, spread)
    precision = settings.precision if spec.mixed_precision and device.type == "cuda" else "float32"
    trainer = NativeTrainer(training, device, precision, settings.jit_compile is True, place)

    def train(epochs: int, callbacks: list[Any]) -> None:
        trainer.fit(data, epochs, callbacks, spread.global_batch_size, spec.validates, seed)

    def gather(times: list[float]) -> list[list[float]] | None:
        if not place.several:
            return None
        import torch.distributed as dist

        everyone: list[list[float]] = [[] for _ in range(place.world)]
        dist.all_gather_object(everyone, [round(t, 4) for t in times])
        return everyone

    def after() -> dict[str, Any] | None:
        return None

    found = Trainee(
        jit_compile=trainer.compiled,
        dtype_policy=dtype_policy(precision),
        lstm_kernel=None,
        parameters=trainer.parameter_count,
        sync=trainer.synchronize,
        train=train,
        after_training=after,
        gather=gather,
        close=end_process_group,
        cudnn_benchmark=True if device.type == "cuda" else None,
        job=job_record(place, device),
    )
    return found, replace(spread, replicas=place.world)


def scale_learning_rate(optimizer: torch.optim.Optimizer, spread: Distribution) -> Distribution:
    """The batch policy's learning-rate factor applied to every parameter group; `spread` with the rates."""
    published = float(f"{float(optimizer.param_groups[0]['lr']):.7g}")
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * spread.learning_rate_factor
    return replace(spread, published_learning_rate=published, learning_rate=published * spread.learning_rate_factor)


def trial_step(module: Any, label: str, sha256: str, where: Any, samples: int = 4) -> str:
    """`check-workload` for a native file (`label`: its name): its training built on the CPU and one step trained
    through the harness's own step; BadWorkload names the step that failed. Returns a one-line account."""
    from benchmarks.data.loaders import SYNTHETIC_NAME
    from benchmarks.data.types import DataRequest, head

    spec = module.SPEC
    dataset = SYNTHETIC_NAME if spec.shapes is not None else spec.datasets[0]
    request = DataRequest(dataset=dataset, train_limit=samples, val_limit=samples, batch_size=samples)
    data = trial_data(module, label, request, where)
    device = torch.device("cpu")
    training = step(label, "build_training", lambda: module.build_training(data, device))
    for name, kind in (("model", torch.nn.Module), ("optimizer", torch.optim.Optimizer)):
        if not isinstance(getattr(training, name, None), kind):
            raise BadWorkload(f"{label}: build_training's {name} is not a {kind.__module__}.{kind.__name__}")
    trainer = NativeTrainer(training, device, "float32", False, Place())
    sums = EpochSums.zeros(device)
    x, y = training.batch((head(data.x_train, samples), head(data.y_train, samples)))
    step(label, "one training step", lambda: trainer.step(x, y, sums))
    loss = float(sums.loss)
    if not np.isfinite(loss):
        raise BadWorkload(f"{label}: one training step gave loss={loss}")
    parameters = sum(p.numel() for p in training.model.parameters())
    return (
        f"{label}: workload {spec.name}, sha256 {sha256[:12]}: imports, SPEC complete, native model built "
        f"({parameters:,} parameters), one step on {samples} {data.info.dataset} samples trained on the CPU "
        f"(torch-native), loss {loss:.4g}"
    )
