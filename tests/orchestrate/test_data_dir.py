"""A user's data folder through the orchestrator (`run --data-dir`): a bad one stops the run in one line before
anything is launched, a batch profile refuses it, a fan-out's children get it by its absolute path, and a detached
machine's spec and agent carry it (the end-to-end runs: tests/orchestrate/test_workload_files.py over SSH,
tests/clouds/test_detached.py through the bucket)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrate.cli import build_parser
from orchestrate.cli.request import AttachedRun, Fanout, request_of
from orchestrate.data_dir import archive_file, read_data_dir
from orchestrate.detached import DetachedError, DetachedSpec, boot_script
from orchestrate.plan import WorkItem
from tests.orchestrate.orchestrate_helpers import ROOT, Workspace, orchestrate
from tests.support.datasets import tiny_mlp_data


def _run(ws: Workspace, data: Path, *extra: str) -> list[str]:
    return [
        "run", "--profile", "local", "--logs", str(ws.logs), "--ledger", str(ws.ledger), "--remote-dir",
        str(ws.remote_dir), "--run-id", "20260101T000000Z-dd00", "--plain", "--data-dir", str(data), *extra,
    ]  # fmt: skip


def _bad(tmp_path: Path, kind: str) -> tuple[Path, str]:
    folder = tmp_path / "given"
    if kind == "missing":
        return folder, "no such folder"
    if kind == "file":
        folder.write_text("x")
        return folder, "not a folder"
    folder.mkdir()
    if kind == "empty":
        return folder, "the folder holds no files"
    if kind == "dangling link":
        (folder / "x.npz").symlink_to(tmp_path / "gone.npz")
        return folder, "x.npz is not a regular file (or a link to one)"
    (tmp_path / "elsewhere").mkdir()
    (folder / "linked").symlink_to(tmp_path / "elsewhere")
    return folder, "linked links to a folder; copy it in"


@pytest.mark.parametrize("kind", ["missing", "file", "empty", "dangling link", "folder link"])
def test_a_bad_data_dir_stops_the_run_in_one_line_before_anything_starts(tmp_path: Path, kind: str) -> None:
    ws = Workspace(tmp_path / "ws")
    given, why = _bad(tmp_path, kind)
    done = orchestrate(*_run(ws, given, "--backends", "jax"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [f"error: --data-dir {given}: {why}"]
    assert not ws.ledger.exists() and not ws.remote_dir.exists() and not ws.logs.exists()


def test_the_plan_and_the_estimate_count_what_is_carried_for_every_kind_of_profile(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    data = tiny_mlp_data(tmp_path / "data")
    planned = orchestrate(*_run(ws, data, "--backends", "jax", "--workloads", "mnist_mlp", "--dry-run"))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    assert f"data         {data}: 2 file(s), {size / 1024:.1f} KiB, read-only at /data/offline" in planned.stdout
    assert "data folder (" not in planned.stdout  # a host of one's own: no transfer counted, as for the image
    rented = orchestrate(
        "run", "--profile", "gce-t4", "--data-dir", str(data), "--ledger", str(ws.ledger), "--logs", str(ws.logs),
        "--backends", "jax", "--workloads", "mnist_mlp", "--dry-run",
    )  # fmt: skip
    assert rented.returncode == 0, rented.stdout + rented.stderr
    assert f"image pull (10 GB at 60 MB/s) 167 s, data folder ({size / 1e6:.3g} MB at 60 MB/s)" in rented.stdout
    catalog = tmp_path / "slurm.toml"
    catalog.write_text(
        '[profiles.hpc]\nprovider = "slurm"\ndocker_image = "cpu"\n'
        'on_demand = { usd_per_hour = 1.0, date = "2026-11-28", source = "test rate" }\n'
        '[profiles.hpc.extra]\nlogin = "login.example"\npartition = "cpu"\nshared_dir = "/shared"\n'
    )
    batch = orchestrate(
        "run", "--profile", "hpc", "--catalog", str(catalog), "--data-dir", str(data), "--ledger", str(ws.ledger),
        "--backends", "jax", "--workloads", "mnist_mlp", "--dry-run",
    )  # fmt: skip
    assert batch.returncode == 0, batch.stdout + batch.stderr  # a Slurm job's tasks mount it too (tests/slurm)
    assert f"data         {data}: 2 file(s), {size / 1024:.1f} KiB, read-only at /data/offline" in batch.stdout


def test_fanout_children_get_the_data_dir_by_its_absolute_path() -> None:
    os.chdir(ROOT)
    args = build_parser().parse_args(["run", "--profiles", "local,ssh", "--data-dir", "examples/workloads"])
    request = request_of(args)
    assert isinstance(request, Fanout)
    argv = request.child("local", request.options).argv()
    assert argv[argv.index("--data-dir") + 1] == str(ROOT / "examples" / "workloads")
    assert request_of(build_parser().parse_args(["run", *argv])) == AttachedRun("local", request.options)


def test_the_archive_holds_every_file_readable_by_any_user(tmp_path: Path) -> None:
    data = tiny_mlp_data(tmp_path / "data")
    (data / "tiny_mlp.npz").chmod(0o600)  # the container's user need not be its owner
    with archive_file(read_data_dir(data)) as handle, tarfile.open(fileobj=handle) as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert sorted(members) == ["notes/README.txt", "tiny_mlp.npz"]
        assert members["tiny_mlp.npz"].mode & 0o444 == 0o444
        extracted = archive.extractfile("tiny_mlp.npz")
        assert extracted is not None and extracted.read() == (data / "tiny_mlp.npz").read_bytes()


def test_a_detached_machine_fetches_the_data_folder_and_mounts_it(tmp_path: Path) -> None:
    from orchestrate import machine_agent

    data = read_data_dir(tiny_mlp_data(tmp_path / "data"))
    items = (WorkItem("tiny_mlp", "jax"),)
    spec = DetachedSpec(
        "aws", "s3://bucket/p/", "aws-e2e", "quick", items, "registry.example/kcb:cpu", run_id="r1", endpoints={},
        data_files=len(data.files), data_bytes=data.size,
    )  # fmt: skip
    assert "--data-dir /data/offline" in " ".join(spec.runner_argv(items[0]))
    assert spec.to_json()["data"] == {"key": "p/runs/r1/data.tar", "files": 2, "bytes": data.size}
    assert DetachedSpec.from_json(spec.to_json()) == spec
    boot_script(spec)  # within EC2's user-data limit with the agent's data step
    with pytest.raises(DetachedError, match="a run named at boot cannot be sent a data folder"):
        boot_script(DetachedSpec(**{**spec.__dict__, "run_id": None}))
    with archive_file(data) as handle:
        bucket = {"p/runs/r1/data.tar": handle.read()}
    work = tmp_path / "machine"
    cloud = SimpleNamespace(instance_id="i-1", open=lambda key: io.BytesIO(bucket[key]) if key in bucket else None)
    run = machine_agent.Run(spec.to_json(), cloud, str(work))
    run.fetch_data()
    assert (work / "data" / "tiny_mlp.npz").read_bytes() == (data.path / "tiny_mlp.npz").read_bytes()
    run.status = {"image_digest": "sha256:abc"}
    command = run._docker_run(spec.to_json()["items"][0], {"keras_home": "/data/keras", "baked": False})
    assert command[command.index(f"{work}/data:/data/offline:ro") - 1] == "-v"
    bucket.clear()  # a relaunch whose data.tar is gone fails in one line, before any item
    with pytest.raises(machine_agent.RunFailed, match=r"^--data-dir: p/runs/r1/data.tar is not in the bucket$"):
        machine_agent.Run(spec.to_json(), cloud, str(tmp_path / "second")).fetch_data()
