"""GPU against GPU, for any runs: the GPU is the board the runs' metadata names, never their folder or run id."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from records.catalog import load_catalog
from records.loading import load_runs
from report import gpu_compare
from report.cli import main

REFERENCE = Path(__file__).resolve().parents[2] / "logs" / "reference"
H100_DIRS = ("NVIDIA-H100/gpu-repeats-h100-1c83db", "NVIDIA-H100/gpu-repeats-h100-a1bed2")
H200_DIRS = tuple(f"NVIDIA-H200/gpu-repeats-h200-x2-{m}-{g}" for m in ("5cd374", "f33702") for g in ("g0", "g1"))


def _copy_runs(logs: Path, platform: str, sources: tuple[str, ...], pattern: str) -> None:
    """The committed runs under a platform of the user's naming: only the GPU's own name in the metadata says
    which GPU they ran on."""
    for i, source in enumerate(sources):
        target = logs / platform / f"session-{i}"
        target.mkdir(parents=True)
        for path in sorted((REFERENCE / source).glob(pattern)):
            if path.suffix == ".json":
                meta = json.loads(path.read_text())
                (target / path.name).write_text(json.dumps({**meta, "platform": platform, "run_id": f"user-{i}"}))
            else:
                shutil.copy(path, target / path.name)


@pytest.fixture(scope="module")
def user_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The H200's runs under a folder named for the other GPU: a folder's name says nothing.
    logs = tmp_path_factory.mktemp("gpu") / "logs"
    _copy_runs(logs, "my-rented-box", H100_DIRS, "resnet50_torch_*")
    _copy_runs(logs, "NVIDIA-H100", H200_DIRS, "resnet50_torch_*")
    return logs


def test_the_committed_resnet50_torch_runs_decide_h200_faster_and_cheaper_whatever_their_folders(
    user_logs: Path,
) -> None:
    section = gpu_compare.section(load_runs(user_logs).complete_runs, load_catalog())
    assert section is not None
    [pair] = section.pairs
    assert (pair.a.gpu, pair.b.gpu) == ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
    assert (pair.key.workload, pair.key.backend, pair.key.data_source) == ("resnet50", "torch", "synthetic")
    # 4 repeats from 2 machines on each side; the H200's steady epoch is about 0.84x the H100's.
    assert (len(pair.a.steady), pair.a.machine_count, len(pair.b.steady), pair.b.machine_count) == (4, 2, 4, 2)
    assert pair.faster == "H200" and pair.caveats == []
    assert 0.80 < pair.b.estimate().value / pair.a.estimate().value < 0.88
    # Each provider that offers both is set side by side: one H200 GPU hour costs more than one H100's at AWS
    # (its 8-GPU share) and RunPod, which the H200's speed just pays for; at Google Cloud the H200 is cheaper.
    assert [(a.profile, b.profile, c) for a, b, c in pair.cheaper] == [
        ("aws-p5.4xlarge", "aws-p5en.48xlarge", gpu_compare.NEITHER),
        ("gce-h100", "gce-a3-ultragpu-8g", "H200"),
        ("runpod-h100", "runpod-h200", gpu_compare.NEITHER),
    ]
    assert set(section.costs["prices"]) == {"same provider"}
    assert section.summary.startswith("H100 80GB HBM3 against H200, 1 (workload, backend) compared")
    assert "H200 faster beyond noise in 1;" in section.summary


def test_the_report_carries_the_section_and_its_csv(user_logs: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    assert main([str(user_logs), "--markdown", str(target)]) == 0
    text = target.read_text()
    assert f"## {gpu_compare.TITLE}" in text and "| resnet50 | torch |" in text
    assert "- **GPU against GPU**: H100 80GB HBM3 against H200" in text  # in the summary at the top
    assert main([str(user_logs), "--out", str(tmp_path / "page")]) == 0
    table = pd.read_csv(tmp_path / "page" / "gpu_compare.csv")
    assert list(table["faster"]) == ["H200"] * 3 and list(table["a_runs"]) == [4] * 3
    page = (tmp_path / "page" / "index.html").read_text()
    assert 'id="gpu-compare"' in page and "<strong>GPU against GPU</strong>: H100 80GB HBM3 against H200" in page


def test_a_side_on_one_machine_is_said_so_and_never_crowned_silently(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _copy_runs(logs, "box-a", H100_DIRS[:1], "resnet50_torch_*")  # 3 repeats, one machine
    _copy_runs(logs, "box-b", H200_DIRS, "resnet50_torch_*")
    section = gpu_compare.section(load_runs(logs).complete_runs, load_catalog())
    assert section is not None
    [pair] = section.pairs
    assert pair.caveats == ["H100 80GB HBM3 on one machine"]
    assert section.times.loc[0, "rests on"] == "H100 80GB HBM3 on one machine"
    assert section.times.loc[0, "A runs/machines"] == "3/1"


def test_the_summary_says_when_a_win_rests_on_one_machine() -> None:
    key = gpu_compare.Key("my_model", "jax", "real", 1000)
    one = gpu_compare.Side("NVIDIA L4", [1.0, 1.01, 0.99, 1.02, 1.0], ["m1"] * 5, [False] * 5)
    two = gpu_compare.Side("Tesla T4", [2.0, 2.1, 1.9, 2.05, 1.95], ["m1", "m1", "m2", "m2", "m2"], [False] * 5)
    faster = gpu_compare.verdict(one, two, one.steady, two.steady)
    pair = gpu_compare.Pair(key, one, two, faster, [], gpu_compare.caveats(one, two))
    assert faster == "L4" and pair.caveats == ["L4 on one machine"]
    assert "L4 faster beyond noise in 1 (1 on one run or one machine of a side)" in gpu_compare.summary_line([pair])


def test_offers_are_the_cheapest_gpu_hour_of_the_model_per_provider() -> None:
    catalog = load_catalog()
    assert gpu_compare.model_of("NVIDIA H100 80GB HBM3") == gpu_compare.model_of("nvidia-h100-80gb") == "h100"
    assert gpu_compare.model_of("Tesla T4") == gpu_compare.model_of("nvidia-tesla-t4") == "t4"
    h100 = gpu_compare.offers_of("NVIDIA H100 80GB HBM3", catalog)
    # p5.48xlarge's GPU hour costs what p5.4xlarge's does: the one-GPU machine is offered
    assert [(o.provider, o.profile) for o in h100] == [
        ("aws", "aws-p5.4xlarge"),
        ("gce", "gce-h100"),
        ("ssh", "runpod-h100"),
    ]
    h200 = gpu_compare.offers_of("NVIDIA H200", catalog)
    assert [(o.profile, o.gpus) for o in h200] == [
        ("aws-p5en.48xlarge", 8),
        ("gce-a3-ultragpu-8g", 8),
        ("runpod-h200", 1),
    ]
    assert h200[0].usd_per_hour == catalog["aws-p5en.48xlarge"].on_demand.usd_per_hour / 8
    pairs = gpu_compare.pairings(h100, h200)
    assert [(a.provider, b.provider) for a, b in pairs] == [("aws", "aws"), ("gce", "gce"), ("ssh", "ssh")]
    assert gpu_compare.offers_of("Some Accelerator", catalog) == []
