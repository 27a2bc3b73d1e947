"""One work item (a workload on a backend, and which repeat of it) and the runner command that measures it: the one
place both are defined, for the runner's own repeats, the orchestrator's container runs, detached runs and the GPU
session tool. Importable without Keras or any framework.

    shared = RunnerCommand(("mnist_mlp",), "jax", platform="gce-t4", run_id="r1", out="/logs")
    item_command(shared, WorkItem("imdb_fasttext", "torch", repeat=2), planned=3).argv()
    # ['run', '--workload', 'imdb_fasttext', '--backend', 'torch', ..., '--repeat-index', '2', '--repeat-group', 'r1',
    #  '--repeat-planned', '3']
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from benchmarks.command import RunnerCommand, repeat_stem


@dataclass(frozen=True)
class WorkItem:
    workload: str
    backend: str
    repeat: int | None = None  # 1-based for one of several repeats; None: one measurement, the plain file names

    @property
    def label(self) -> str:
        return f"{self.workload} [{self.backend}]" + (f" #{self.repeat}" if self.repeat is not None else "")

    @property
    def base_stem(self) -> str:
        """The runner's file stem without the repeat suffix: `mnist_mlp_jax`."""
        return f"{self.workload}_{self.backend}"

    @property
    def stem(self) -> str:
        return repeat_stem(self.base_stem, self.repeat)

    def container_name(self, run_id: str) -> str:
        return f"{run_id}-{self.workload}-{self.backend}" + (f"-r{self.repeat}" if self.repeat is not None else "")

    def owns_log(self, name: str) -> bool:
        """Whether a file the runner wrote is this item's: `<workload>_<backend>[_synthetic][.rII].csv|.json`."""
        return name.endswith((".csv", ".json")) and name.rsplit(".", 1)[0] in (
            repeat_stem(self.base_stem, self.repeat),
            repeat_stem(f"{self.base_stem}_synthetic", self.repeat),
        )

    def at_repeat(self, repeat: int) -> WorkItem:
        return replace(self, repeat=repeat)


def item_command(shared: RunnerCommand, item: WorkItem, planned: int | None) -> RunnerCommand:
    """The runner command of one work item: the options every item of a run shares (`shared`, whose workloads and
    backend are replaced) with the item's workload, backend and repeat. A repeat's group is the run id, so that the
    repeats of one measurement pool; `planned` is how many repeats were planned (None: adaptive)."""
    repeated = item.repeat is not None
    return replace(
        shared,
        workloads=(item.workload,),
        backend=item.backend,
        repeat_index=item.repeat,
        repeat_group=shared.run_id if repeated else None,
        repeat_planned=planned if repeated else None,
    )
