"""Where the time goes, for any runs: a run's GPU is the datasheet whose board its metadata names, never its folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from benchmarks.metadata import RunMetadata
from report import roofline
from report.cli import main
from report.model_costs import load_costs

REFERENCE = Path(__file__).resolve().parents[2] / "logs" / "reference"


def _meta(gpu: str, platform: str, workload: str = "mnist_mlp", **extra: Any) -> RunMetadata:
    return RunMetadata.from_dict(
        {
            "run_id": "20260101T000000Z-0001",
            "workload": workload,
            "backend": "jax",
            "platform": platform,
            "hardware": {"accelerator": "gpu", "gpus": [{"name": gpu}] if gpu else []},
            "data": {"train_samples": 6000},
            "settings": {"float32_matmul": "tf32"},
            "stability": {"host_share": 0.2},
            "fingerprint": {
                "device": "gpu",
                "backend": "jax",
                "host_single_thread_score": 1.0,
                "host_single_thread_unit": "x",
                "seconds": 1.0,
                "gemm_tflops": 300.0,
                "device_memory_gbps": 3000.0,
            },
            **extra,
        }
    )


def test_a_run_is_placed_on_the_gpu_its_metadata_names_whatever_its_folder() -> None:
    sheets = roofline.load_datasheets()
    runs = [
        (_meta("NVIDIA H100 80GB HBM3", "my-rented-box"), [1.0, 1.1]),
        (_meta("NVIDIA H200", "gce-a3"), [0.9]),
        (_meta("NVIDIA H200", "NVIDIA-H100"), [0.8]),  # a folder's name says nothing
        (_meta("Tesla K80", "old-box"), [5.0]),  # no datasheet: left out
        (_meta("", "laptop"), [3.0]),  # no GPU
    ]
    found = roofline.measured(runs, sheets)
    assert {key: len(value) for key, value in found.items()} == {
        ("H100", "mnist_mlp", "jax"): 1,
        ("H200", "mnist_mlp", "jax"): 2,
    }
    table = roofline.rows_of(found, load_costs(), sheets)
    [h200] = [row for row in table if row.gpu == "H200"]
    assert h200.runs == 2 and round(h200.epoch_s, 9) == 0.85 and h200.bound in (roofline.MEMORY, roofline.COMPUTE)
    cells = roofline.cells(h200)
    assert cells["GPU"] == "H200" and cells["bound by"] == h200.bound


def test_make_report_places_a_users_gpu_runs_on_their_rooflines_whatever_their_folder(tmp_path: Path) -> None:
    """The product's report of the user's own runs carries the section, from the GPU the runs' metadata names: here
    the committed H200 runs, copied under a platform folder of the user's naming."""
    logs = tmp_path / "logs" / "my-gpu-box" / "run-1"
    source = REFERENCE / "NVIDIA-H200" / "gpu-repeats-a"
    logs.mkdir(parents=True)
    for path in sorted(source.glob("mnist_mlp_*")):
        shutil.copy(path, logs / path.name)
        if path.suffix == ".json":  # a platform of the user's naming: nothing says H200 but the GPU's own name
            meta = json.loads(path.read_text())
            (logs / path.name).write_text(json.dumps({**meta, "platform": "my-gpu-box"}))
    target = tmp_path / "out.md"
    assert main([str(tmp_path / "logs"), "--markdown", str(target)]) == 0
    text = target.read_text()
    assert f"## {roofline.TITLE}" in text and "| my-gpu-box-jax" in text
    assert (tmp_path / "out_charts" / "gpu_roofline.png").is_file() and "- **mnist_mlp**:" in text
    assert main([str(tmp_path / "logs"), "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page" / "index.html").read_text()
    assert '<h2 id="roofline">' in page and (tmp_path / "page" / "charts" / "gpu_roofline.png").is_file()
