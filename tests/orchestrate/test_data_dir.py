"""A user's data folder through the orchestrator (`run --data-dir`): a bad one stops the run in one line before
anything is launched, a batch profile refuses it, a fan-out's children get it by its absolute path, and a detached
machine's spec and agent carry it (the end-to-end runs: tests/orchestrate/test_workload_files.py over SSH,
tests/clouds/test_detached.py through the bucket)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrate.cli import build_parser
from orchestrate.cli.request import AttachedRun, Fanout, request_of
from orchestrate.container_command import unpack_payload
from orchestrate.data_dir import BadDataDir, read_data_dir
from orchestrate.detached import DetachedSpec, boot_script
from orchestrate.plan import WorkItem
from orchestrate.runspec import RunSpec, payload_archive, plan_spec
from orchestrate.workload_files import run_workloads
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


def _spec(tmp_path: Path, run_id: str | None = "r1") -> RunSpec:
    """A run of examples/workloads/tiny_mlp.py on its data folder, planned."""
    files = run_workloads([ROOT / "examples" / "workloads" / "tiny_mlp.py"])
    folder = tmp_path / "data"
    data = read_data_dir(folder if folder.exists() else tiny_mlp_data(folder))
    return plan_spec(run_id, "aws-e2e", "quick", "registry.example/kcb:cpu", False, (WorkItem("tiny_mlp", "jax"),),
                     workloads=files, data_dir=data)  # fmt: skip


def test_the_payload_is_one_archive_its_manifest_first_no_mode_widened(tmp_path: Path) -> None:
    (tiny_mlp_data(tmp_path / "data") / "tiny_mlp.npz").chmod(0o600)  # private: it stays so (read as its owner)
    payload = _spec(tmp_path).payload
    assert payload is not None and payload.count == 3
    assert [f.path for f in payload.files] == ["workloads/tiny_mlp.py", "data/notes/README.txt", "data/tiny_mlp.npz"]
    with payload_archive(payload) as handle, tarfile.open(fileobj=handle) as archive:
        members = archive.getmembers()
        assert [m.name for m in members] == ["SHA256SUMS", *(f.path for f in payload.files)]
        modes = {m.name: m.mode & 0o777 for m in members}
        assert modes["SHA256SUMS"] == modes["data/tiny_mlp.npz"] == 0o600
        sums = archive.extractfile("SHA256SUMS")
        assert sums is not None and hashlib.sha256(sums.read()).hexdigest() == payload.sha256
        extracted = archive.extractfile("data/tiny_mlp.npz")
        assert extracted is not None and extracted.read() == (tmp_path / "data" / "tiny_mlp.npz").read_bytes()


def test_a_payload_file_changed_since_planning_is_refused_and_a_changed_archive_does_not_unpack(tmp_path: Path) -> None:
    payload = _spec(tmp_path).payload
    assert payload is not None
    with payload_archive(payload) as handle:
        archive = handle.read()

    def unpack(data: bytes, folder: Path, sha256: str = payload.sha256) -> int:
        return subprocess.run(
            ["sh", "-c", unpack_payload(str(folder), sha256)], input=data, capture_output=True
        ).returncode

    assert unpack(archive, tmp_path / "ok") == 0
    assert (tmp_path / "ok" / "workloads" / "tiny_mlp.py").read_bytes() == (
        ROOT / "examples/workloads/tiny_mlp.py"
    ).read_bytes()
    assert unpack(archive, tmp_path / "other", "0" * 64) != 0  # not the manifest the spec names
    changed = archive.replace(b"where the arrays came from", b"where the arrays went to!!", 1)
    assert changed != archive and unpack(changed, tmp_path / "changed") != 0  # a file that is not its manifest's
    (tmp_path / "data" / "notes" / "README.txt").write_text("changed since the plan\n")
    with pytest.raises(BadDataDir, match=r"README\.txt: it changed since it was checked"), payload_archive(payload):
        pass


def test_a_detached_machine_fetches_the_payload_and_mounts_it(tmp_path: Path) -> None:
    from orchestrate import machine_agent

    spec = DetachedSpec("aws", "s3://bucket/p/", _spec(tmp_path), endpoints={})
    assert spec.payload_key == "p/runs/r1/payload.tar"
    assert DetachedSpec("aws", "s3://bucket/p/", _spec(tmp_path, None), endpoints={}).payload_key == "p/payload.tar"
    assert DetachedSpec.from_json(spec.to_json()) == spec
    boot_script(spec)  # within EC2's user-data limit: the manifest waits in the bucket with the files
    assert spec.run.payload is not None
    with payload_archive(spec.run.payload) as handle:
        bucket = {"p/runs/r1/payload.tar": handle.read()}
    work = tmp_path / "machine"
    cloud = SimpleNamespace(instance_id="i-1", open=lambda key: io.BytesIO(bucket[key]) if key in bucket else None)
    run = machine_agent.Run(spec.to_json(), cloud, str(work))
    run.fetch_payload()
    assert (work / "payload" / "data" / "tiny_mlp.npz").read_bytes() == (
        tmp_path / "data" / "tiny_mlp.npz"
    ).read_bytes()
    run.status = {"image_digest": "sha256:abc"}
    command = run.container(spec.to_json()["run"]["items"][0])
    assert command[command.index(f"{work}/payload/data:/data/offline:ro") - 1] == "-v"
    assert command[command.index(f"{work}/payload/workloads:/workloads:ro") - 1] == "-v"
    bucket.clear()  # a relaunch whose payload is gone fails in one line, before any item
    with pytest.raises(
        machine_agent.RunFailed, match=r"^the run's payload: p/runs/r1/payload.tar is not in the bucket$"
    ):
        machine_agent.Run(spec.to_json(), cloud, str(tmp_path / "second")).fetch_payload()
