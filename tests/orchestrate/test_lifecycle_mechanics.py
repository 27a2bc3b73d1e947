"""The lifecycle's spot and capacity logic: relaunch after preemption with only the unfinished runs, the retry cap,
the next zone on a capacity error.

Cloud preemption cannot happen on loopback, so these tests use a TEST DOUBLE of a spot provider and say so:
`SpotDouble` hands out the test sshd (real SSH, real Docker engine) as a new "instance" per launch, and imitates
what a cloud does to a spot VM: it kills the running container and reports the instance PREEMPTED. Zones it is
told are full raise CapacityError. The containers are the purpose-built mechanics image (it sleeps; it
benchmarks nothing). The real clouds' preemption signals are exercised by the AWS/GCE provider tests.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import ClassVar

import pytest

import orchestrate.lifecycle as lifecycle
from orchestrate.lifecycle import Lifecycle
from orchestrate.plan import WorkItem
from orchestrate.progress import Reporter
from orchestrate.provider import Capability, CapacityError, Instance, InstanceState, LaunchRequest, ProviderError
from orchestrate.providers.ssh import SSHProvider
from orchestrate.testing.sshd import SSHServer
from records.catalog import Price, Profile
from records.ledger import Ledger
from tests.orchestrate.orchestrate_helpers import plan_on_image
from tests.support.docker import build_mechanics_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.docker, pytest.mark.sshd]

PRICE = Price(0.36, "2026-01-01", "test double: no real price")
PROFILE = Profile(
    name="spot-double",
    provider="ssh",
    machine_type=None,
    zones=("zone-a", "zone-b"),
    on_demand=PRICE,
    spot=PRICE,
    use_spot=True,
)


class SpotDouble(SSHProvider):
    """Test double (see the module docstring): the test sshd as a spot 'cloud'."""

    host_capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.BILLABLE, Capability.FRESH_HOST, Capability.LEFTOVERS}
    )

    def __init__(
        self,
        server: SSHServer,
        preempt_on: set[int],
        full_zones: set[str],
        preempt_at_boot: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(server.target())
        self.preempt_on = preempt_on  # launch numbers (1-based) whose machine is taken back mid-workload
        self.preempt_at_boot = preempt_at_boot  # launch numbers whose machine is taken back before it runs
        self.full_zones = full_zones
        self.launches = 0
        self.states: dict[str, InstanceState] = {}
        self.run_id = ""

    def launch(self, request: LaunchRequest) -> Instance:
        if request.zone in self.full_zones:
            raise CapacityError(f"ZONE_RESOURCE_POOL_EXHAUSTED in {request.zone}")
        self.launches += 1
        self.run_id = request.run_id
        instance = super().launch(request)
        instance.instance_id = f"double-{self.launches}"
        instance.zone, instance.spot = request.zone, request.spot
        self.states[instance.instance_id] = InstanceState.RUNNING
        return instance

    def wait_until_running(self, instance: Instance, timeout_s: float) -> Instance:
        if int(instance.instance_id.split("-")[1]) in self.preempt_at_boot:
            self.states[instance.instance_id] = InstanceState.PREEMPTED
            raise ProviderError(f"{instance.instance_id} ended before it ran (Server.SpotInstanceTermination)")
        return super().wait_until_running(instance, timeout_s)

    def state(self, instance: Instance) -> InstanceState:
        number = int(instance.instance_id.split("-")[1])
        running = containers_of_run(self.run_id)
        # preempt once a second workload's container runs on this machine (the first has finished)
        if number in self.preempt_on and any(not name.endswith("mnist_mlp-torch") for name in running):
            for name in running:  # the machine goes with its containers: gone at once, as on a real reclaim
                subprocess.run(["docker", "rm", "--force", name], capture_output=True)
            self.states[instance.instance_id] = InstanceState.PREEMPTED
        return self.states[instance.instance_id]

    def terminate(self, instance: Instance) -> None:
        if self.states.get(instance.instance_id) == InstanceState.RUNNING:
            self.states[instance.instance_id] = InstanceState.TERMINATED

    def list_instances(self) -> list[Instance]:
        return []  # nothing outlives terminate here


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_mechanics_image(tmp_path_factory.mktemp("mechanics"))


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "PULL_INTERVAL_S", 0.5)
    monkeypatch.setattr(lifecycle, "STATE_POLL_INTERVAL_S", 0.5)


def run(tmp_path: Path, provider: SpotDouble, image: str, run_id: str, max_preemptions: int = 3, spot: bool = True):
    items = (WorkItem("mnist_mlp", "torch"), WorkItem("imdb_fasttext", "torch"))
    plan = plan_on_image(
        tmp_path,
        image,
        run_id,
        items,
        profile=PROFILE,
        platform="spot-double",
        spot=spot,
        max_preemptions=max_preemptions,
    )
    messages = io.StringIO()
    try:
        outcome = Lifecycle(plan, provider, Ledger(tmp_path / "ledger.jsonl"), Reporter(messages)).run()
    finally:
        remove_containers_of_run(run_id)
    return outcome, messages.getvalue()


def test_preemption_relaunches_and_reruns_only_the_unfinished(sshd: SSHServer, image: str, tmp_path: Path) -> None:
    provider = SpotDouble(sshd, preempt_on={1}, full_zones=set())
    outcome, messages = run(tmp_path, provider, image, "20260101T000000Z-pre1")
    record = outcome.record
    assert record.status == "complete", record.message
    assert record.preemptions == 1 and provider.launches == 2
    assert [(i.workload, i.status, i.attempt) for i in record.items] == [
        ("mnist_mlp", "complete", 1),
        ("imdb_fasttext", "preempted", 1),
        ("imdb_fasttext", "complete", 2),  # mnist_mlp did not run again
    ]
    assert [(i.instance_id, i.preempted) for i in record.instances] == [("double-1", True), ("double-2", False)]
    assert all(i.terminated_at and i.billed_seconds and i.cost_usd for i in record.instances)
    assert record.estimated_cost_usd == pytest.approx(sum(i.cost_usd for i in record.instances))
    assert [s.name for s in record.stages].count("launch") == 2
    assert "relaunching for the 1 container runs not yet finished" in messages


def test_a_preemption_during_boot_relaunches(sshd: SSHServer, image: str, tmp_path: Path) -> None:
    provider = SpotDouble(sshd, preempt_on=set(), full_zones=set(), preempt_at_boot=frozenset({1}))
    outcome, messages = run(tmp_path, provider, image, "20260101T000000Z-boot")
    record = outcome.record
    assert record.status == "complete", record.message
    assert record.preemptions == 1 and provider.launches == 2
    assert [(i.instance_id, i.preempted) for i in record.instances] == [("double-1", True), ("double-2", False)]
    assert [(i.workload, i.status, i.attempt) for i in record.items] == [
        ("mnist_mlp", "complete", 2),
        ("imdb_fasttext", "complete", 2),
    ]
    assert "relaunching for the 2 container runs not yet finished" in messages


def test_an_on_demand_rented_machine_has_its_logs_pulled_while_a_workload_runs(
    sshd: SSHServer, image: str, tmp_path: Path
) -> None:
    """A rented machine can vanish (or the orchestrator die) on demand too: partial logs come back meanwhile."""
    provider = SpotDouble(sshd, preempt_on=set(), full_zones=set())
    outcome, _ = run(tmp_path, provider, image, "20260101T000000Z-pull", spot=False)
    assert outcome.record.status == "complete", outcome.record.message
    pulls = [s for s in outcome.record.stages if s.name == "pull_logs" and s.detail == "imdb_fasttext [torch]"]
    assert len(pulls) >= 3  # the 6 s workload, pulled every 0.5 s, then once at its end


def test_too_many_preemptions_stop_the_run(sshd: SSHServer, image: str, tmp_path: Path) -> None:
    provider = SpotDouble(sshd, preempt_on={1, 2}, full_zones=set())
    outcome, _ = run(tmp_path, provider, image, "20260101T000000Z-pre2", max_preemptions=1)
    record = outcome.record
    assert record.status == "failed" and outcome.exit_code == 1
    assert record.message.startswith("preempted 2 times (limit --max-preemptions 1); 1 of 2 container runs finished")
    assert all(state != InstanceState.RUNNING for state in provider.states.values())


def test_capacity_error_moves_to_the_next_zone(sshd: SSHServer, image: str, tmp_path: Path) -> None:
    provider = SpotDouble(sshd, preempt_on=set(), full_zones={"zone-a"})
    outcome, messages = run(tmp_path, provider, image, "20260101T000000Z-cap1")
    assert outcome.record.status == "complete"
    assert [i.zone for i in outcome.record.instances] == ["zone-b"]
    assert "no capacity in zone-a: ZONE_RESOURCE_POOL_EXHAUSTED in zone-a; trying the next zone" in messages


def test_no_capacity_anywhere_fails_clearly(sshd: SSHServer, image: str, tmp_path: Path) -> None:
    provider = SpotDouble(sshd, preempt_on=set(), full_zones={"zone-a", "zone-b"})
    outcome, _ = run(tmp_path, provider, image, "20260101T000000Z-cap2")
    record = outcome.record
    assert record.status == "failed" and record.instances == [] and record.items == []
    assert record.message.startswith("no capacity for spot-double in any of its zones (zone-a: ZONE_RESOURCE")
    assert record.message.endswith("try later, another profile, or --on-demand")


def test_an_image_with_baked_datasets_seeds_the_host_cache(sshd: SSHServer, tmp_path: Path) -> None:
    """The cache mounted at KERAS_HOME would hide datasets baked into the image: they are copied out once.
    Mechanics image: its entrypoint succeeds only if the baked file is visible through the mounted cache."""
    from tests.support.docker import BASE_IMAGE

    context = tmp_path / "baked"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nENV KERAS_HOME=/data/keras\nLABEL io.keras-cloud-bench.datasets=keras\n"
        "RUN mkdir -p /data/keras/datasets && echo baked > /data/keras/datasets/baked.txt\n"
        'ENTRYPOINT ["sh", "-c", "grep -q baked /data/keras/datasets/baked.txt"]\n'
    )
    image = "kcb-test/baked-datasets-mechanics:latest"
    subprocess.run(["docker", "build", "-q", "-t", image, str(context)], check=True, capture_output=True)
    plan = plan_on_image(tmp_path, image, "20260101T000000Z-seed", (WorkItem("mnist_mlp", "jax"),), "ssh")
    outcome = Lifecycle(plan, SSHProvider(sshd.target()), Ledger(tmp_path / "l.jsonl"), Reporter(io.StringIO())).run()
    assert outcome.record.status == "complete", outcome.record.message
    cache = tmp_path / "host" / "cache" / "keras"
    assert (cache / "datasets" / "baked.txt").read_text() == "baked\n"
    assert list(cache.glob(".seeded-*"))  # once per image: the next run skips the copy


def test_repeats_run_round_robin_each_in_a_fresh_container(sshd: SSHServer, image: str, tmp_path: Path) -> None:
    """--repeats 2: repeat 1 of every item, then repeat 2; the runner gets --repeat-index/--repeat-group and its
    repeat files (<stem>.rII.csv) come back. Mechanics image: it writes the runner's file names."""
    run_id = "20260101T000000Z-reps"
    items = tuple(WorkItem("mnist_mlp", b, r) for r in (1, 2) for b in ("jax", "torch"))
    plan = plan_on_image(tmp_path, image, run_id, items, "ssh", repeats=2)
    provider = SSHProvider(sshd.target())
    outcome = Lifecycle(plan, provider, Ledger(tmp_path / "l.jsonl"), Reporter(io.StringIO())).run()
    assert outcome.record.status == "complete", outcome.record.message
    assert [(i.backend, i.repeat, i.status) for i in outcome.record.items] == [
        ("jax", 1, "complete"),
        ("torch", 1, "complete"),
        ("jax", 2, "complete"),
        ("torch", 2, "complete"),
    ]
    pulled = sorted(p.name for p in plan.run_logs.glob("*.csv"))
    assert pulled == [f"mnist_mlp_{b}.r0{r}.csv" for b in ("jax", "torch") for r in (1, 2)]
    consoles = sorted(p.name for p in plan.orchestrator_dir.glob("*.console.log"))
    assert consoles == [f"mnist_mlp_{b}.r0{r}.console.log" for b in ("jax", "torch") for r in (1, 2)]
