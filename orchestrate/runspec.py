"""One run as every mode delivers it: the `RunSpec`, planned once (`run` in orchestrate.cli.planning, `schedule
create` in orchestrate.schedule) and then only delivered and executed, attached over SSH (orchestrate.lifecycle),
detached through a bucket (orchestrate.detached), queued on Slurm (orchestrate.providers.slurm) or started by a
cloud's scheduler.

A spec holds, per work item, the runner's arguments (the image entrypoint form); the container's mounts (by
place: `logs`, `cache`, `workloads`, `data`, which each mode puts where its host keeps them), environment and
labels; and the payload, the user's files the run carries (workload files, data folder) as one archive with its
manifest. Its JSON is versioned and its sha256 names it: the ledger records it, and so does every run's metadata
(the runner reads BENCH_RUN_SPEC).

A runner option is a field of `benchmarks.command.RunnerCommand`, an option of `run` and `schedule create`
(`orchestrate.cli.request.add_runner_options`) and a name in RUNNER_OPTIONS here; the modes never name one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from benchmarks.command import RunnerCommand, repeat_stem
from benchmarks.harness.distribution import SINGLE_DEVICE_BACKENDS, TORCH_SINGLE_DEVICE
from benchmarks.work import WorkItem, item_command
from benchmarks.workload_set import Workload, Workloads
from estimator.suite import Shape
from orchestrate.container_command import PROJECT_TAG, SUMS, container_argv
from orchestrate.data_dir import CONTAINER_DIR as DATA_IN_CONTAINER
from orchestrate.data_dir import BadDataDir, DataDir
from orchestrate.private_files import carried_mode
from orchestrate.workload_files import CONTAINER_DIR as WORKLOADS_IN_CONTAINER
from records.catalog import Profile

SPEC_VERSION = 1
RUN_ID_TOKEN = "{run_id}"  # a run named at boot (a schedule's): the machine puts its run id in the argv
LOGS_IN_CONTAINER = "/logs"
KERAS_HOME = "/data/keras"  # the dataset cache's place in every container (the project's images' KERAS_HOME)
PAYLOAD_FOLDER = "payload"  # beside a run's logs on its host: the unpacked archive
PAYLOAD_ARCHIVE = "payload.tar"
# The runner's own options among `run`'s, by their RunnerCommand and RunOptions field name (allow_synthetic: the
# opposite of `--strict-data`).
RUNNER_OPTIONS = ("epochs", "train_limit", "val_limit", "gpus", "batch_policy", "allow_synthetic")
CHUNK_BYTES = 1 << 20


class SpecError(ValueError):
    """A run option the spec cannot hold; the one-line message names it."""


@dataclass(frozen=True)
class PayloadFile:
    path: str  # in the archive: workloads/<file>.py or data/<relative path>
    size: int
    sha256: str
    source: Path | None = field(default=None, compare=False)  # on this machine (planning's side only)


@dataclass(frozen=True)
class Payload:
    """The user's files a run carries, as one archive: its manifest's sha256 (the `SHA256SUMS` member, which lists
    every file's sha256), file count and bytes. `files` are the manifest's entries on the planning side."""

    sha256: str
    count: int
    size: int
    files: tuple[PayloadFile, ...] = field(default=(), compare=False)

    def describe(self) -> str:
        return f"{self.count} file(s), {self.size} bytes, manifest sha256 {self.sha256[:12]}"


@dataclass(frozen=True)
class Mount:
    place: str  # logs, cache, workloads or data: the folder each mode keeps it in
    target: str  # in the container
    read_only: bool = False


@dataclass(frozen=True)
class SpecItem(WorkItem):
    argv: tuple[str, ...] = ()  # the runner's arguments, image entrypoint form

    def to_json(self) -> dict[str, Any]:
        # the runner's file names for this item, real data or synthetic (WorkItem.owns_log's rule)
        stems = (self.stem, repeat_stem(f"{self.base_stem}_synthetic", self.repeat))
        files = [f"{stem}.{ext}" for stem in stems for ext in ("csv", "json")]
        item = {"workload": self.workload, "backend": self.backend, "repeat": self.repeat, "argv": list(self.argv)}
        return item | {"stem": self.stem, "container": self.container_name(RUN_ID_TOKEN), "files": files}


@dataclass(frozen=True)
class RunSpec:
    run_id: str | None  # None: named at boot by the machine (RUN_ID_TOKEN stands in for it)
    platform: str
    suite: str
    image: str
    gpus: bool  # the containers see the machine's (or the allocation's) GPUs
    items: tuple[SpecItem, ...]
    mounts: tuple[Mount, ...]
    env: Mapping[str, str]
    labels: Mapping[str, str]
    payload: Payload | None = None
    # A batch scheduler's job per item (`--nodes`): that many nodes with that many processes each, every process
    # running the item's container, which trains across all of them (orchestrate.providers.slurm.nodes)
    nodes: int = 1
    processes_per_node: int = 1
    version: int = SPEC_VERSION

    @property
    def processes(self) -> int:
        return self.nodes * self.processes_per_node

    def to_json(self, manifest: bool = False) -> dict[str, Any]:
        """What the machine reads; with `manifest`, every payload file too (the record beside the run's logs)."""
        data: dict[str, Any] = {
            "version": self.version,
            "run_id": self.run_id,
            "platform": self.platform,
            "suite": self.suite,
            "image": self.image,
            "gpus": self.gpus,
            "items": [item.to_json() for item in self.items],
            "mounts": [[m.place, m.target, m.read_only] for m in self.mounts],
            "env": dict(self.env),
            "labels": dict(self.labels),
            "payload": None,
            "nodes": self.nodes,
            "processes_per_node": self.processes_per_node,
        }
        if self.payload is not None:
            data["payload"] = {"sha256": self.payload.sha256, "files": self.payload.count, "bytes": self.payload.size}
            if manifest:
                data["manifest"] = [[f.path, f.size, f.sha256] for f in self.payload.files]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        if data.get("version") != SPEC_VERSION:
            raise SpecError(f"run spec version {data.get('version')}: this orchestrator reads version {SPEC_VERSION}")
        payload = data.get("payload")
        files = tuple(PayloadFile(path, size, sha) for path, size, sha in data.get("manifest", []))
        return cls(
            run_id=data["run_id"],
            platform=data["platform"],
            suite=data["suite"],
            image=data["image"],
            gpus=bool(data["gpus"]),
            items=tuple(SpecItem(i["workload"], i["backend"], i["repeat"], tuple(i["argv"])) for i in data["items"]),
            mounts=tuple(Mount(place, target, bool(ro)) for place, target, ro in data["mounts"]),
            env=dict(data["env"]),
            labels=dict(data["labels"]),
            payload=Payload(payload["sha256"], payload["files"], payload["bytes"], files) if payload else None,
            nodes=int(data.get("nodes", 1)),
            processes_per_node=int(data.get("processes_per_node", 1)),
        )

    @property
    def sha256(self) -> str:
        """The spec's name: the sha256 of its JSON (the payload by its manifest's sha256, which names each file's)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def runner_env(self, image_digest: str) -> dict[str, str]:
        """The container's environment: the spec's, the image's digest, and what the run carried, for its metadata
        (`<spec sha256>[ <payload manifest sha256> <files> <bytes>]`)."""
        carried = [self.sha256] + ([self.payload.sha256, str(self.payload.count), str(self.payload.size)]
                                   if self.payload else [])  # fmt: skip
        return {**self.env, "BENCH_IMAGE_DIGEST": image_digest, "BENCH_RUN_SPEC": " ".join(carried)}

    def container(
        self, item: SpecItem, runtime: str, places: Mapping[str, str], image_digest: str, **how: Any
    ) -> list[str]:
        """The words that run `item` in `runtime` (orchestrate.container_command), each mount at the folder its
        place has on this host; `how`: the engine, user, extra labels (the machine), extra environment and another
        name (a process of a job of several nodes) a mode adds."""
        labels = {**self.labels, **how.pop("labels", {})}
        mounts = [(places[m.place], m.target, m.read_only) for m in self.mounts]
        name = how.pop("name", None) or item.container_name(self.run_id or RUN_ID_TOKEN)
        env = {**self.runner_env(image_digest), **how.pop("env", {})}
        return container_argv(
            runtime, self.image, item.argv, mounts=mounts, env=env, labels=labels, name=name, gpus=self.gpus,
            processes=self.processes > 1, **how,
        )  # fmt: skip


def runner_options(options: Any) -> dict[str, Any]:
    """The runner options set in `options` (RunOptions, or `schedule create`'s namespace), by RunnerCommand field."""
    given = {name: getattr(options, name, None) for name in RUNNER_OPTIONS}
    given["allow_synthetic"] = not getattr(options, "strict_data", False)
    return {name: value for name, value in given.items() if value is not None}


def check_runner_options(
    runner: Mapping[str, Any], profile: Profile, backends: Sequence[str], exact: bool, nodes: int = 1
) -> None:
    """Runner options a machine or a backend cannot honour fail here, not on a machine already paid for. A rented
    profile's GPU count is its shape (`exact`); an SSH profile's only what its catalog entry says of the box. On
    several `nodes` a batch policy splits over their processes, CPUs' too."""
    gpus, policy = runner.get("gpus"), runner.get("batch_policy")
    if gpus is not None and not profile.has_gpu:
        raise SpecError(f"--gpus applies to GPU profiles; {profile.name} has no accelerator")
    if policy is not None and not profile.has_gpu and nodes == 1:
        raise SpecError(f"--batch-policy applies to GPU profiles and --nodes N; {profile.name} has no accelerator")
    if gpus is None:
        return
    known = profile.accelerator_count if exact else None
    if known is not None and gpus != "all" and int(gpus) > known:
        raise SpecError(f"--gpus {gpus}: {profile.name} has {known} GPU(s)" + (" per node" if nodes > 1 else ""))
    if nodes > 1:  # one process per GPU: the backends are those that train across processes (checked with --nodes)
        return
    devices = known if gpus == "all" else int(gpus)
    if SINGLE_DEVICE_BACKENDS & set(backends) and devices is not None and devices > 1:
        raise SpecError(f"--gpus {gpus}: {TORCH_SINGLE_DEVICE}; choose --backends jax,tensorflow")


def estimate_shape(runner: Mapping[str, Any], profile: Profile, nodes: int = 1, processes_per_node: int = 1) -> Shape:
    """The runner options that change a run's time: epochs, sample cap, devices and batch policy; on several
    `nodes`, the devices per node (one process each)."""
    gpus = runner.get("gpus")
    devices = profile.accelerator_count if gpus == "all" else int(gpus or 1)
    per_device = runner.get("batch_policy") == "per-device"
    if nodes > 1:
        return Shape(runner.get("epochs"), runner.get("train_limit"), processes_per_node, per_device, nodes)
    return Shape(runner.get("epochs"), runner.get("train_limit"), max(devices, 1), per_device)


def plan_spec(
    run_id: str | None,
    platform: str,
    suite: str,
    image: str,
    gpus: bool,
    items: Sequence[WorkItem],
    repeats: int = 1,
    runner: Mapping[str, Any] | None = None,
    workloads: Workloads | None = None,
    data_dir: DataDir | None = None,
    nodes: int = 1,
    processes_per_node: int = 1,
) -> RunSpec:
    """The spec of a run: each item's runner arguments from the run's runner options, and its payload (the files of
    `workloads`, the user's workload files, and the data folder); on several nodes, the job's shape."""
    files = workloads.files if workloads is not None else ()
    shared = RunnerCommand(
        ("-",), "-", platform=platform, suite=suite, run_id=run_id or RUN_ID_TOKEN, out=LOGS_IN_CONTAINER,
        workload_files=tuple(f"{WORKLOADS_IN_CONTAINER}/{f.path.name}" for f in files),
        data_dir=DATA_IN_CONTAINER if data_dir is not None else None, **{"allow_synthetic": True, **(runner or {})},
    )  # fmt: skip
    mounts = [Mount("logs", LOGS_IN_CONTAINER), Mount("cache", KERAS_HOME)]
    mounts += [Mount("workloads", WORKLOADS_IN_CONTAINER, True)] if files else []
    mounts += [Mount("data", DATA_IN_CONTAINER, True)] if data_dir is not None else []
    planned = tuple(
        SpecItem(i.workload, i.backend, i.repeat, tuple(item_command(shared, i, repeats).argv(entrypoint=True)))
        for i in items
    )
    return RunSpec(
        run_id, platform, suite, image, gpus, planned, tuple(mounts),
        env={"HOME": "/tmp", "KERAS_HOME": KERAS_HOME},  # HOME: the container's user has none in the image
        labels={"project": PROJECT_TAG, "run-id": run_id or RUN_ID_TOKEN},
        payload=make_payload(files, data_dir), nodes=nodes, processes_per_node=processes_per_node,
    )  # fmt: skip


# ---- the payload ---------------------------------------------------------------------------------------------------


def make_payload(workload_files: Sequence[Workload], data_dir: DataDir | None) -> Payload | None:
    """The manifest of the user's files: each workload file (hashed when its SPEC was read) and every file of the
    data folder, hashed here. None when the run carries none."""
    files = [PayloadFile(f"workloads/{f.path.name}", f.path.stat().st_size, f.sha256, f.path)
             for f in workload_files]  # fmt: skip
    if data_dir is not None:
        files += [_hashed(f"data/{relative}", data_dir.path / relative) for relative in data_dir.files]
    if not files:
        return None
    return Payload(hashlib.sha256(_sums(files)).hexdigest(), len(files), sum(f.size for f in files), tuple(files))


def _hashed(path: str, source: Path) -> PayloadFile:
    digest, size = hashlib.sha256(), 0
    try:
        with source.open("rb") as handle:
            for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
                digest.update(chunk)
                size += len(chunk)
    except OSError as error:
        raise BadDataDir(f"--data-dir: {source} cannot be read ({error.strerror or error})") from None
    return PayloadFile(path, size, digest.hexdigest(), source)


def _sums(files: Sequence[PayloadFile]) -> bytes:
    """The manifest as `sha256sum -c` reads it (a file name with a newline or backslash is refused when read)."""
    return "".join(f"{f.sha256}  {f.path}\n" for f in files).encode()


@contextmanager
def payload_archive(payload: Payload) -> Iterator[BinaryIO]:
    """The payload as one uncompressed tar (data files are mostly compressed already) in a file without a name
    (freed however this process ends), rewound: the manifest first, then each file with its own mode, never widened
    (`private_files.carried_mode`: the container reads it as its owner, or as root). BadDataDir when a file changed
    since it was hashed."""
    with tempfile.TemporaryFile(suffix=".tar") as handle:
        with tarfile.open(fileobj=handle, mode="w", format=tarfile.PAX_FORMAT) as archive:
            sums = _sums(payload.files)
            archive.addfile(_member(SUMS, len(sums)), io.BytesIO(sums))
            for file in payload.files:
                assert file.source is not None  # a payload planned here
                try:
                    with file.source.open("rb") as source:
                        mode = carried_mode(os.fstat(source.fileno()).st_mode)
                        archive.addfile(_member(file.path, file.size, mode), _Checked(source, file))
                except OSError as error:
                    raise BadDataDir(f"{file.source}: it changed since it was checked ({error}); run again") from None
        handle.flush()
        handle.seek(0)
        yield handle


def _member(path: str, size: int, mode: int = 0o600) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.size, info.mode = size, mode
    return info


class _Checked:
    """A file's bytes as tar reads them (its planned size), checked against the manifest once all are read."""

    def __init__(self, source: BinaryIO, file: PayloadFile) -> None:
        self.source, self.file, self.digest, self.seen = source, file, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.digest.update(data)
        self.seen += len(data)
        if self.seen >= self.file.size and self.digest.hexdigest() != self.file.sha256:
            raise BadDataDir(f"{self.file.source}: it changed since it was checked; run again")
        return data
