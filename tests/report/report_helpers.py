"""Logs for the report tests, written in the documented format by benchmarks.logs' own writer."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.logs import EpochLogWriter, EpochRecord, write_metadata

REPO = Path(__file__).resolve().parents[2]
# The reference data lives beside the checkout (../shared/reference), or under KCB_SHARED_DIR (which .ci/run sets);
# REFERENCE_DIR overrides both.
SHARED = Path(os.environ.get("KCB_SHARED_DIR", REPO.parent / "shared"))
REFERENCE = Path(os.environ.get("REFERENCE_DIR", SHARED / "reference"))


@dataclass(frozen=True)
class RunSpec:
    platform: str = "local"
    run_id: str = "20260101T000000Z-0001"
    workload: str = "mnist_mlp"
    backend: str = "jax"
    elapsed: Sequence[float] = (5.0, 2.0, 2.2)
    status: str = "complete"
    source: str = "real"
    image: str | None = None
    train_samples: int = 60000
    val_acc: float = 0.97
    cut_down: bool = False
    epochs_planned: int | None = None
    gpu_util: float | None = None
    repeat: int | None = None  # index of a repeat: the file is named `<stem>.rNN.csv`
    schema2: dict[str, Any] | None = None  # metadata schema 2 sections (stability, energy, fingerprint...)
    host_id: str | None = None

    @property
    def stem(self) -> str:
        stem = f"{self.workload}_{self.backend}" + ("_synthetic" if self.source == "synthetic" else "")
        return stem if self.repeat is None else f"{stem}.r{self.repeat:02d}"


def write_run(root: Path, **fields: Any) -> Path:
    """One run's CSV and metadata under `root/<platform>/<run_id>/`, as the runner lays them out."""
    spec = RunSpec(**fields)
    path = root / spec.platform / spec.run_id / f"{spec.stem}.csv"
    writer = EpochLogWriter(path)
    for epoch, seconds in enumerate(spec.elapsed):
        writer.append(
            EpochRecord(
                epoch=epoch,
                elapsed=seconds,
                loss=1.0 / (epoch + 1),
                acc=spec.val_acc - 0.01,
                val_loss=1.1 / (epoch + 1),
                val_acc=spec.val_acc,
                samples_per_sec=spec.train_samples / seconds,
                compiled=epoch == 0,
                train_samples=spec.train_samples,
                started_at=sum(spec.elapsed[:epoch]),
            )
        )
    writer.close()
    write_metadata(path, metadata(spec) | (spec.schema2 or {}))
    return path


def metadata(spec: RunSpec) -> dict[str, Any]:
    """Every key of the documented metadata schema (docs/architecture.md)."""
    epochs = len(spec.elapsed)
    synthetic = spec.source == "synthetic"
    gpus = [{"name": "Tesla K80", "driver": "470", "memory_bytes": 2**33}] if spec.gpu_util else []
    return {
        "run_id": spec.run_id,
        "workload": spec.workload,
        "backend": spec.backend,
        "platform": spec.platform,
        "suite": None,
        "status": spec.status,
        "epochs_planned": spec.epochs_planned or epochs,
        "epochs_completed": epochs,
        "seed": 1337,
        "started_at": "2026-01-01T00:00:00+00:00",
        "ended_at": "2026-01-01T00:01:00+00:00",
        "git_commit": None,
        "cut_down": spec.cut_down,
        "hyperparameters": {"epochs": epochs, "batch_size": 128},
        "data": {
            "dataset": "synthetic" if synthetic else "fashion_mnist",
            "source": spec.source,
            "synthetic_reason": "dataset file missing" if synthetic else None,
            "files": [],
            "train_samples": spec.train_samples,
            "val_samples": 10000,
        },
        "timing": {
            "first_epoch_s": spec.elapsed[0],
            "steady_median_s": None,
            "steady_epochs": epochs - 1,
            "total_s": sum(spec.elapsed),
        },
        "final": {"loss": None, "acc": None, "val_loss": None, "val_acc": spec.val_acc},
        "settings": {
            "jit_compile": True,
            "steps_per_execution": 1,
            "dtype_policy": "float32",
            "lstm_kernel": None,
            "use_cudnn": None,
        },
        "software": {
            "python": "3.11.7",
            "keras": "3.15.1",
            "framework": spec.backend,
            "framework_version": "9.9.9",
            "numpy": "2.4.6",
            "cuda": None,
            "cudnn": None,
        },
        "hardware": {
            "cpu_model": "Test CPU 3000",
            "cpu_flags": ["avx2"],
            "cpu_cores_logical": 2,
            "cpu_cores_physical": 1,
            "memory_bytes": 2**34,
            "accelerator": "gpu" if gpus else "cpu",
            "gpus": gpus,
            **({"host_id": spec.host_id} if spec.host_id else {}),
        },
        "container": {"image": spec.image, "digest": None} if spec.image else None,
        "gpu_utilization": (
            {"mean_pct": spec.gpu_util, "max_pct": 100, "samples": 10, "interval_s": 1} if spec.gpu_util else None
        ),
        "error": None if spec.status == "complete" else "KeyboardInterrupt: interrupted",
    }


def compiled_and_pip_runs(logs: Path, repeats: int, compiled_seconds: float) -> None:
    """`make reproduce STUDY=cpu-or-gpu-2017-07 PROFILE=local` run in the pip image and in the compiled one."""
    for i in range(repeats):
        jitter = 0.05 * i
        for image, seconds in (
            ("keras-cloud-bench:cpu", 2.0),
            ("keras-cloud-bench:cpu-compiled-haswell", compiled_seconds),
        ):
            run_id = f"20260101T00{i:02d}{int(seconds * 10):02d}Z-{i:04x}"
            elapsed = (seconds + 1 + jitter, seconds + jitter, seconds + jitter)
            write_run(logs, run_id=run_id, workload="mnist_mlp", backend="tensorflow", image=image, elapsed=elapsed)
