"""A fan-out over three profiles where one fails to launch: `python -m orchestrate run --profiles
local,ssh,aws-e2e` runs the CPU image's containers on this machine and over the test sshd while moto answers
every RunInstances with no capacity. The two that can run finish, the third fails alone, one table and one
report cover all three, and nothing is left in the fake cloud."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrate.testing.sshd import SSHServer
from tests.clouds.aws_faults import Fault, FaultyMotoServer
from tests.clouds.environments import aws_environment
from tests.clouds.guests import GuestKeys, ec2_running_instance_keys
from tests.clouds.test_cloud_runs import (
    AWS_REGIONS,
    Bench,
    assert_nothing_left_in_aws,
    cpu_image,
    finish,
    make_bench,
    wait_for,
)
from tests.support.docker import build_mechanics_image, containers_of_run, remove_containers_of_run

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.sshd]
__all__ = ["cpu_image"]  # the module-scoped image fixture, shared with test_cloud_runs

PROFILES = ("local", "ssh", "aws-e2e")
# A retired profile whose replacement is aws-e2e: the fan-out runs aws-e2e in its place and names the mapping.
RETIRED = """\
[profiles.aws-e2e-2017]
provider = "aws"
machine_type = "p2.xlarge"
zones = ["us-east-1a"]
image = "resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"
retired = true
retired_on = "2024-06-10"
replacement = "aws-e2e"
on_demand = { usd_per_hour = 0.9, date = "2017-11-01", source = "test catalog" }
"""


@pytest.fixture
def fan_bench(aws: FaultyMotoServer, sshd: SSHServer, cpu_image: str, tmp_path: Path) -> Iterator[Bench]:
    yield make_bench(tmp_path, sshd, cpu_image, aws_environment(aws.url, tmp_path))


def test_fanout_survives_a_profile_without_capacity_and_reports_across_the_others(
    fan_bench: Bench, aws: FaultyMotoServer
) -> None:
    base = "20250101T000000Z-fan0"
    no_capacity = aws.injector.add(
        Fault("RunInstances", "InsufficientInstanceCapacity",
              "We currently do not have sufficient c7i.large capacity in the Availability Zone you requested.",
              times=None)
    )  # fmt: skip
    report = fan_bench.tmp / "report"
    args = fan_bench.run_args("aws-e2e", base, "--backends", "jax")  # aws-e2e's options; --profile swapped below
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", "local,ssh,aws-e2e-2017"]
    args += ["--host", fan_bench.server.alias, "--ssh-config", str(fan_bench.server.config_path)]
    (fan_bench.tmp / "retired.toml").write_text(RETIRED)
    args += ["--catalog", str(fan_bench.tmp / "retired.toml"), "--report-out", str(report), "--max-cost", "1"]
    try:
        done = fan_bench.call(args, timeout=600)
    finally:
        for profile in PROFILES:
            remove_containers_of_run(f"{base}-{profile}")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # one profile failed; the others' results are kept
    runs = {p: fan_bench.record(f"{base}-{p}") for p in PROFILES}
    assert runs["local"].status == "complete" and runs["ssh"].status == "complete", out
    assert runs["aws-e2e"].status == "failed" and "capacity" in runs["aws-e2e"].message
    assert no_capacity.hits >= 2  # both zones were tried
    for profile in ("local", "ssh"):
        assert (fan_bench.logs / profile / f"{base}-{profile}" / "mnist_mlp_jax_synthetic.csv").is_file()
    table = out[out.index(f"Fan-out {base}: 3 profiles") :].splitlines()
    rows = {line.split()[0]: line.split() for line in table[2:5]}
    # profile, status, duration, spent $, epochs, s/epoch, $/epoch, extrapolated time and $
    assert rows["local"][1:2] + rows["local"][3:5] == ["complete", "-", "1"]  # this machine: nothing billed
    assert rows["ssh"][1] == "complete" and rows["ssh"][5].endswith("s") and rows["ssh"][7].endswith("min")
    assert rows["aws-e2e"][1] == "failed" and rows["aws-e2e"][4:6] == ["0", "-"]
    assert "[aws-e2e" in out and "[local" in out  # each profile's own progress, prefixed
    mapping = "aws-e2e-2017 (retired 2024-06-10) -> aws-e2e"
    assert f"aws-e2e  1 runs, image {fan_bench.image}; stands in for {mapping}" in out
    html = (report / "index.html").read_text()
    assert f"{base}-local" in html and f"{base}-ssh" in html
    assert "aws-e2e ran in place of aws-e2e-2017" in html  # the page names the mapping too
    markdown = (report / "report.md").read_text()  # the same report as a document, after the fan-out summary
    assert markdown.startswith("# Fan-out") and f"- {mapping}" in markdown, markdown
    assert "local-jax" in markdown and "ssh-jax" in markdown, markdown
    assert_nothing_left_in_aws(fan_bench, f"{base}-aws-e2e")
    assert all(containers_of_run(f"{base}-{p}") == [] for p in PROFILES)


def test_sigterm_reaches_every_profiles_run_which_tears_itself_down(fan_bench: Bench) -> None:
    base = "20250101T000000Z-fan1"
    args = fan_bench.run_args("local", base, "--backends", "jax", "--epochs", "50", "--train-limit", "2048")
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", "local,ssh"]
    args += ["--host", fan_bench.server.alias, "--ssh-config", str(fan_bench.server.config_path)]
    args += ["--report-out", str(fan_bench.tmp / "report")]
    args.remove("--provider-setting")
    args.remove(next(a for a in args if a.startswith("ssh_address=")))  # no profile here has that setting
    process = fan_bench.start(args)
    run_ids = [f"{base}-local", f"{base}-ssh"]
    try:
        both_running = lambda: all(containers_of_run(r) for r in run_ids)  # noqa: E731
        wait_for(both_running, 300, "both profiles' containers", fan_bench)
        process.send_signal(signal.SIGTERM)
        assert finish(process, fan_bench, timeout_s=120) == 130, fan_bench.output()[-4000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        for run_id in run_ids:
            remove_containers_of_run(run_id)
    for run_id in run_ids:
        record = fan_bench.record(run_id)
        assert record.status == "interrupted" and record.message == "interrupted by SIGTERM", fan_bench.output()
        assert containers_of_run(run_id) == []


def test_a_killed_fanout_over_a_cloud_and_this_machine_leaves_both_runs_to_finish(
    aws: FaultyMotoServer, sshd: SSHServer, tmp_path: Path
) -> None:
    """`kill -9` of a fan-out over aws-e2e and local once both run their first workload: each run (a session and
    an output file of its own) finishes its suite, terminates its machine, releases its key pair, security group
    and local key, and ends complete and billed in the ledger; `collect <base>` then makes the table. Mechanics
    image (it sleeps)."""
    image = build_mechanics_image(tmp_path / "mechanics")
    bench = make_bench(tmp_path, sshd, image, aws_environment(aws.url, tmp_path))
    base = "20250101T000000Z-fkl"
    args = bench.run_args("local", base, "--backends", "torch", "--image-source", "present")
    args[args.index("--profile") : args.index("--profile") + 2] = ["--profiles", "aws-e2e,local"]
    args[args.index("--workloads") + 1] = "mnist_mlp,imdb_fasttext"
    args += ["--report-out", str(tmp_path / "report")]
    run_ids = [f"{base}-aws-e2e", f"{base}-local"]
    with GuestKeys(sshd, ec2_running_instance_keys(AWS_REGIONS)):
        process = bench.start(args)
        try:
            both_running = lambda: all(containers_of_run(r) for r in run_ids)  # noqa: E731
            wait_for(both_running, 300, "both profiles' containers", bench)
            process.kill()  # the fan-out process alone: its children are in sessions of their own
            process.wait(timeout=30)
            ended = lambda: all(bench.record(r).final for r in run_ids)  # noqa: E731
            wait_for(ended, 300, "both runs to end", bench)
        finally:
            if process.poll() is None:
                process.kill()
            for run_id in run_ids:
                remove_containers_of_run(run_id)
    for run_id in run_ids:
        record = bench.record(run_id)
        assert record.status == "complete", record.message
        assert [i.status for i in record.latest_items()] == ["complete", "complete"]
    [machine] = bench.record(run_ids[0]).instances
    assert machine.terminated_at is not None and machine.cost_usd is not None
    assert_nothing_left_in_aws(bench, run_ids[0])
    collected = bench.call(bench.command("collect", base, "--ledger", str(bench.ledger)))
    table = collected.stdout[collected.stdout.index(f"Fan-out {base}: 2 profiles") :]
    assert [line.split()[:2] for line in table.splitlines()[2:4]] == [["aws-e2e", "complete"], ["local", "complete"]]
