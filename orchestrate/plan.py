"""What one orchestrated run will do, decided and validated before anything starts (see orchestrate.cli): the
machine profile, the work items (`benchmarks.work.WorkItem`: workload x backend x repeat, in the order of
`benchmarks.repeats.planned_rounds`), the image, the limits, and the runner's command line for each item."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.command import RunnerCommand
from benchmarks.work import WorkItem, item_command
from benchmarks.workload_set import Workloads, built_in
from orchestrate.data_dir import CONTAINER_DIR as DATA_IN_CONTAINER
from orchestrate.data_dir import DataDir
from orchestrate.images import BuildSpec
from orchestrate.workload_files import WorkloadFile, workload_files
from records.catalog import Profile


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
    epochs: int | None = None  # runner flags; None: the suite's
    train_limit: int | None = None
    val_limit: int | None = None
    gpus: str | None = None  # runner --gpus: a count or "all"
    batch_policy: str | None = None  # runner --batch-policy
    repeats: int = 1  # with more than one, each item carries its repeat index (see WorkItem)
    allow_synthetic: bool = True
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
    def workload_files(self) -> tuple[WorkloadFile, ...]:
        """The user's workload files, carried to the machine and mounted at /workloads."""
        return workload_files(self.workloads)

    @property
    def run_logs(self) -> Path:
        return self.logs_dir / self.platform / self.run_id

    @property
    def orchestrator_dir(self) -> Path:
        return self.run_logs / "orchestrate"

    def runner_command(self, item: WorkItem) -> RunnerCommand:
        """The runner invocation of one container run (the image entrypoint form)."""
        shared = RunnerCommand(
            workloads=(item.workload,),
            backend=item.backend,
            platform=self.platform,
            suite=self.suite,
            run_id=self.run_id,
            out="/logs",
            allow_synthetic=self.allow_synthetic,
            epochs=self.epochs,
            train_limit=self.train_limit,
            val_limit=self.val_limit,
            gpus=self.gpus,
            batch_policy=self.batch_policy,
            workload_files=tuple(f.in_container for f in self.workload_files),
            data_dir=DATA_IN_CONTAINER if self.data_dir is not None else None,
        )
        return item_command(shared, item, self.repeats)
