"""What one orchestrated run will do, decided and validated before anything starts (see orchestrate.cli): the
machine profile, the work items (`benchmarks.work.WorkItem`: workload x backend x repeat, in the order of
`benchmarks.repeats.planned_rounds`), the image, the limits, and the run's spec (orchestrate.runspec), which every
mode delivers."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from benchmarks.work import WorkItem
from benchmarks.workload_set import Workloads, built_in
from orchestrate.data_dir import DataDir
from orchestrate.images import BuildSpec
from orchestrate.runspec import RunSpec, plan_spec
from records.catalog import Profile
from records.ledger import RunRecord

__all__ = ["RunPlan", "WorkItem"]


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, validated before anything starts (see orchestrate.cli)."""

    run_id: str
    profile: Profile
    platform: str  # the log folder name: the profile's name unless the user named the host
    suite: str
    items: tuple[WorkItem, ...]
    spot: bool
    image_ref: str
    image_source: str
    build: BuildSpec | None
    logs_dir: Path
    owner: str
    remote_dir: str = "~/keras-cloud-bench"
    runner: Mapping[str, Any] = field(default_factory=dict)  # the runner options given (orchestrate.runspec)
    # a batch scheduler's job of several nodes per work item (`--nodes`): P processes on each, one per GPU (one
    # per node on CPUs), which train across all; the runner's `gpus` counts them all
    nodes: int = 1
    processes_per_node: int = 1
    repeats: int = 1  # with more than one, each item carries its repeat index (see WorkItem)
    ssh_config: Path | None = None
    ssh_timeout_s: float = 300.0
    boot_timeout_s: float = 600.0
    max_lifetime_s: int = 4 * 3600
    max_preemptions: int = 3
    install_host_software: bool = False
    validated_at: tuple[float, float] | None = None  # (started, ended) of the CLI's validation
    workloads: Workloads = field(default_factory=built_in)  # the built-in ones and the user's files, checked
    data_dir: DataDir | None = None  # the user's data folder, checked; mounted at /data/offline

    @property
    def run_logs(self) -> Path:
        return self.logs_dir / self.platform / self.run_id

    @property
    def orchestrator_dir(self) -> Path:
        return self.run_logs / "orchestrate"

    def record(self, provider: str, **more: Any) -> RunRecord:
        """The run's ledger entry as it starts: this orchestrator's pid, the spec's sha256."""
        started = self.validated_at[0] if self.validated_at else time.time()
        return RunRecord(
            run_id=self.run_id, profile=self.profile.name, provider=provider, platform=self.platform, suite=self.suite,
            owner=self.owner, pid=os.getpid(), started_at=started, spot=self.spot, image=self.image_ref,
            logs_dir=str(self.run_logs), spec=self.spec.sha256, nodes=self.nodes, **more,
        )  # fmt: skip

    def write_spec(self) -> None:
        """The spec, every payload file listed, beside the run's logs: what ran, for whoever reads them later."""
        self.orchestrator_dir.mkdir(parents=True, exist_ok=True)
        (self.orchestrator_dir / "spec.json").write_text(json.dumps(self.spec.to_json(manifest=True), indent=1))

    @cached_property
    def spec(self) -> RunSpec:
        """The run as every mode delivers it: planned once (its payload's files hashed once)."""
        return plan_spec(
            self.run_id, self.platform, self.suite, self.image_ref, self.profile.has_gpu, self.items, self.repeats,
            self.runner, self.workloads, self.data_dir, self.nodes, self.processes_per_node,
        )  # fmt: skip

    @property
    def processes(self) -> int:
        return self.nodes * self.processes_per_node
