"""Scheduled runs without a cloud: cron expressions as each cloud's scheduler takes them, the inputs refused before
anything is created, the least-privilege policies, and the monthly cost: the 2018 study's $0.76 recomputed line by
line from its inputs and 2018 prices, and today's estimate, which has no functions line. The clouds' side (moto's
EventBridge Scheduler and EC2, the Cloud Scheduler fake) is in tests/clouds/test_schedules.py."""

from __future__ import annotations

import base64
import random
import re
from pathlib import Path

import pytest

from estimator.suite import machine_start
from orchestrate.cli import main
from orchestrate.cron import CronError, check_time_zone, parse_cron
from orchestrate.providers.aws.iam import schedule_machine_policy, scheduler_policy
from orchestrate.schedule import NO_FUNCTIONS_NOTE, ScheduleError, check_spec, estimate
from orchestrate.schedule_cost import ITEMS, PriceDataError, UnitPrice, cloud_prices, load_study, study_cost, total
from records.catalog import load_catalogs


@pytest.mark.parametrize(
    ("cron", "eventbridge", "per_month"),
    [
        ("0 4 * * 1", "cron(0 4 ? * MON *)", 208 / 48),  # 208 Mondays in 2025-2028
        ("30 2 * * *", "cron(30 2 * * ? *)", 1461 / 48),
        ("*/20 6-8 * * MON-FRI", "cron(0,20,40 6-8 ? * MON-FRI *)", 1043 * 9 / 48),
        ("0 0 1,15 * *", "cron(0 0 1,15 * ? *)", 2.0),
        ("0 12 * 1-3 0,7", "cron(0 12 ? 1-3 SUN *)", None),  # 7 is Sunday too
    ],
)
def test_unix_cron_becomes_eventbridge_cron_and_counts_its_runs(
    cron: str, eventbridge: str, per_month: float | None
) -> None:
    parsed = parse_cron(cron)
    assert parsed.eventbridge() == eventbridge
    if per_month is not None:
        assert parsed.runs_per_month() == pytest.approx(per_month)


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 4 * *", "expected 5 fields"),
        ("0 4 1 * MON", "day-of-month and day-of-week are both restricted"),
        ("61 4 * * *", "minute field '61': 61 is outside 0-59"),
        ("0 4 ? * 1", "'?' is not a number"),
        ("0 0 30 2 *", "day-of-month 30 never occurs in month(s) 2"),
        ("0 9-5 * * *", "the range 9-5 runs backwards"),
    ],
)
def test_bad_cron_is_named(cron: str, message: str) -> None:
    with pytest.raises(CronError, match=re.escape(message)):
        parse_cron(cron)


def test_time_zone_must_be_an_iana_name() -> None:
    assert check_time_zone("Europe/Berlin") == "Europe/Berlin"
    with pytest.raises(CronError, match="did you mean Europe/Berlin"):
        check_time_zone("europe/berlin")
    with pytest.raises(CronError, match="not an IANA time zone name"):
        check_time_zone("CET+1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--profile", "gce-t5", "--cron", "0 4 * * 1"], "error: unknown profile 'gce-t5'"),
        (["--profile", "gce-k80", "--cron", "0 4 * * 1"], "error: profile 'gce-k80' is retired"),
        (["--profile", "local", "--cron", "0 4 * * 1"], "error: profile local is a local host"),
        (["--profile", "gce-t4", "--cron", "0 4 * *"], "error: cron '0 4 * *': expected 5 fields"),
        (["--profile", "gce-t4", "--cron", "0 4 * * 1", "--time-zone", "Mars/Olympus"], "error: time zone 'Mars"),
        (["--profile", "gce-t4", "--cron", "0 * * * *"], "error: cron '0 * * * *' fires 60 min apart"),
        (["--profile", "gce-t4", "--cron", "0 4 * * 1", "--name", "Bad_Name"], "error: --name 'Bad_Name'"),
        (["--profile", "gce-t4", "--cron", "0 4 * * 1", "--suite", "nope"], "error: unknown suite"),
        (["--profile", "gce-t4", "--cron", "0 4 * * 1", "--backends", "cntk"], "error: unknown backend cntk"),
        (
            ["--profile", "aws-g4dn.xlarge", "--cron", "0 4 * * 1", "--bucket", "gs://kcb-b"],
            "error: --bucket gs://kcb-b",
        ),
    ],
)
def test_bad_inputs_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before the first cloud call: these run with no credentials at all and create nothing."""
    code = main(["schedule", "create", *argv, "--image", "ghcr.io/me/keras-cloud-bench:gpu"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err


def test_an_image_every_run_pulls_must_name_a_registry(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["schedule", "create", "--profile", "gce-t4", "--cron", "0 4 * * 1", "--image", "kcb:gpu"])
    assert code == 2 and "every run pulls it, so name a registry" in capsys.readouterr().err


def test_the_2018_study_is_recomputed_line_by_line_from_its_inputs() -> None:
    study = load_study("cron-2018")
    lines = {line.item: line for line in study_cost(study)}
    assert list(lines) == list(ITEMS)
    for item in ("compute", "disk", "scheduler", "functions"):
        assert round(lines[item].usd or 0.0, 2) == study.published[item], item
    assert lines["compute"].usd == pytest.approx(1461 / 48 * 12 / 60 * 0.01)  # daily, 12 billed minutes, $0.01/h
    assert lines["disk"].usd == pytest.approx(10 * 0.04)  # kept all month: the VM is stopped, not deleted
    assert lines["scheduler"].usd == pytest.approx(2 * 0.10)
    assert lines["storage"].usd is None and lines["requests"].usd is None  # not in the study's design
    assert round(total(list(lines.values())), 2) == study.published["total"] == 0.76


def test_the_2018_reproduction_prints_beside_the_published_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedule", "published"]) == 0
    out = capsys.readouterr().out
    table = out[: out.index("  prices:")].splitlines()
    rows = {line.split()[0]: line.split()[1:3] for line in table if line.startswith("  ")}
    assert rows["compute"] == ["0.0609", "0.06"] and rows["disk"] == ["0.4000", "0.40"]
    assert rows["scheduler"] == ["0.2000", "0.20"] and rows["functions"] == ["0.1000", "0.10"]
    assert rows["total"] == ["0.7609", "0.76"]
    assert NO_FUNCTIONS_NOTE in out


def test_todays_estimate_is_itemised_from_catalog_and_dated_prices(tmp_path) -> None:
    profile = load_catalogs([])["gce-n1-highcpu-8"]  # spot $0.063642/h, 50 GB disk
    spec = check_spec("cpu-weekly", profile, "0 4 * * 1", "UTC", "quick", "jax", "mnist_mlp", None, 60, "me@box")
    found = estimate(spec, tmp_path / "no-logs", [])
    lines = {line.item: line for line in found.lines}
    assert list(lines) == list(ITEMS)
    assert lines["functions"].usd is None and "calls the compute API directly" in lines["functions"].working
    runs = spec.cron.runs_per_month()
    billed = lines["compute"].usd / runs / 0.063642 * 3600
    # The machine's start (jax on a CPU has nothing comparable to estimate its run from), under the 60 min cap.
    assert machine_start(profile, 1).seconds <= billed <= 3600
    assert lines["disk"].usd == pytest.approx(50 * 0.04 * runs * billed / 3600 / 730)  # only while it runs
    assert lines["scheduler"].usd == pytest.approx(0.10)  # one Cloud Scheduler job
    assert lines["scheduler"].price.source.startswith("https://cloud.google.com/scheduler/pricing")
    assert all(line.price.date for line in found.lines if line.price is not None)
    assert found.low <= total(found.lines) <= found.high <= found.cap


@pytest.mark.parametrize(
    ("disk", "message"),
    [
        ("nan", "usd must be a finite number > 0, got nan"),
        ("inf", "usd must be a finite number > 0, got inf"),
        ("-0.04", "usd must be a finite number > 0, got -0.04"),
        ("1e308", "usd 1e\\+308 is not plausible \\(at most 10\\)"),
    ],
)
def test_a_schedule_price_that_is_no_price_is_refused_naming_the_field(tmp_path: Path, disk: str, message: str) -> None:
    prices = tmp_path / "prices.toml"  # as a plug-in's scheduler brings its own (CloudScheduler.schedule_prices)
    prices.write_text(
        f'[clouds.mycloud]\ndisk = {{ usd = {disk}, unit = "GB-month", date = "2026-01-01", source = "s" }}\n'
    )
    compute = UnitPrice(0.5, "hour", "2026-01-01", "catalog")
    with pytest.raises(PriceDataError, match=f"^{re.escape(str(prices))}: clouds.mycloud: field 'disk': {message}$"):
        cloud_prices("mycloud", compute, prices)


def test_a_ledger_median_is_preferred_to_the_estimate(tmp_path) -> None:
    from records.ledger import RunRecord

    profile = load_catalogs([])["aws-g4dn.xlarge"]
    spec = check_spec("gpu-daily", profile, "0 3 * * *", "UTC", "quick", None, None, False, 240, "me@box")
    runs = [RunRecord(f"r{i}", profile.name, "aws", profile.name, "quick", "me@box", 1, 0.0) for i in range(3)]
    for run, seconds in zip(runs, (900, 1200, 1500), strict=True):
        run.status, run.billed_seconds = "complete", seconds
    found = estimate(spec, tmp_path, runs)
    assert "median of 3 earlier complete quick run(s)" in found.basis
    price = profile.on_demand.usd_per_hour
    assert found.lines[0].usd == pytest.approx(spec.cron.runs_per_month() * 1200 * price / 3600)
    scheduler = {line.item: line for line in found.lines}["scheduler"]
    assert scheduler.usd == pytest.approx(spec.cron.runs_per_month() / 1e6)  # EventBridge: per invocation


def test_the_schedules_role_may_only_run_its_template_and_pass_the_machine_role() -> None:
    policy = scheduler_policy("123456789012", "us-east-1", "lt-0abc", "keras-cloud-bench/kcb-schedule-x-machine")
    statements = {s["Sid"]: s for s in policy["Statement"]}
    template = "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-0abc"
    assert statements["RunThisTemplate"] == {
        "Sid": "RunThisTemplate", "Effect": "Allow", "Action": "ec2:RunInstances", "Resource": template,
    }  # fmt: skip
    assert statements["WhatTheTemplateLaunches"]["Condition"] == {"ArnLike": {"ec2:LaunchTemplate": template}}
    assert statements["TagAtLaunchOnly"]["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
    assert statements["PassTheMachineRole"]["Resource"] == (
        "arn:aws:iam::123456789012:role/keras-cloud-bench/kcb-schedule-x-machine"
    )
    assert {a for s in policy["Statement"] for a in [s["Action"]]} == {
        "ec2:RunInstances", "ec2:CreateTags", "iam:PassRole",
    }  # fmt: skip
    machine = schedule_machine_policy("kcb-b", "bench/schedules/x/", "x")
    objects = {s["Sid"]: s for s in machine["Statement"]}
    assert objects["RunObjects"]["Resource"] == "arn:aws:s3:::kcb-b/bench/schedules/x/runs/*"
    assert objects["ReadThePayload"] == {  # the schedule's payload, which its runs only read
        "Sid": "ReadThePayload", "Effect": "Allow", "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::kcb-b/bench/schedules/x/payload.tar",
    }  # fmt: skip
    assert objects["TerminateItself"]["Condition"]["StringEquals"]["aws:ResourceTag/schedule"] == "x"


def test_a_host_profile_or_a_schedule_firing_within_its_lifetime_is_refused() -> None:
    catalog = load_catalogs([])
    with pytest.raises(ScheduleError, match="need a cloud profile"):
        check_spec("x1", catalog["ssh"], "0 4 * * 1", "UTC", "quick", None, None, None, 60, "me")
    with pytest.raises(ScheduleError, match="fires 120 min apart, within --max-lifetime 240"):
        check_spec("x1", catalog["gce-t4"], "0 */2 * * *", "UTC", "quick", None, None, None, 240, "me")


def _estimate_block(out: str) -> list[str]:
    """A dry run's itemised estimate: from its `estimate` row through the price line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  estimate "))
    end = next(i for i, line in enumerate(lines) if line.strip().startswith(("about $", "at least $")) and i > start)
    return lines[start : end + 1]


@pytest.mark.parametrize("mode", ["detached", "scheduled"])
def test_detached_and_scheduled_dry_runs_print_the_attached_runs_estimate(
    tmp_path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    """Each once gave none: the detached run only its max-lifetime bound, the schedule a summary with
    "20 item(s) not estimated"."""
    suite = ["--suite", "quick", "--backends", "jax,tensorflow", "--workloads", "mnist_mlp,cifar10_cnn"]
    logs = str(Path(__file__).resolve().parents[2] / "logs")  # the committed reference runs
    common = ["--profile", "aws-g4dn.xlarge", "--on-demand", "--max-lifetime", "120", "--logs", logs, *suite]
    ledger = ["--ledger", str(tmp_path / "ledger.jsonl")]
    assert main(["run", *common, *ledger, "--dry-run"]) == 0
    attached = _estimate_block(capsys.readouterr().out)
    if mode == "detached":
        argv = ["run", *common, *ledger, "--detach", "--bucket", "s3://my-bucket/x", "--dry-run"]
    else:
        argv = ["schedule", "create", *common, *ledger, "--cron", "0 4 * * 1", "--image", "ghcr.io/me/kcb:gpu"]
        argv += ["--dry-run"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert _estimate_block(out) == attached
    assert len(attached) == 2 + 4 + 2 and attached[-1].strip().startswith("about $")  # 4 items, each estimated


def test_a_schedule_carries_its_checked_workload_file_in_its_payload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "tiny_mlp.py"
    argv = ["schedule", "create", "--profile", "aws-g4dn.xlarge", "--cron", "0 4 * * 1", "--backends", "jax"]
    argv += ["--image", "ghcr.io/me/keras-cloud-bench:gpu", "--logs", str(tmp_path), "--dry-run"]
    assert main([*argv, "--workload-file", str(example)]) == 0
    out = capsys.readouterr().out
    assert "workload: tiny_mlp.py: workload tiny_mlp" in out and "trained on the CPU" in out
    # a file beyond EC2's 16 KB of user data: it waits in the bucket with the data folder, not in the boot script
    big = tmp_path / "big_model.py"
    noise = base64.b64encode(random.Random(1).randbytes(30_000)).decode()
    big.write_text(example.read_text().replace('name="tiny_mlp"', 'name="big_model"') + f'\nNOISE = "{noise}"\n')
    data = tmp_path / "data"
    (data / "notes").mkdir(parents=True)
    (data / "notes" / "README.txt").write_text("a data folder\n")
    assert main([*argv, "--workload-file", str(big), "--data-dir", str(data), "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "payload      2 file(s)" in out and "payload.tar beside the runs, unpacked by each machine" in out
    assert re.search(r"spec +sha256 [0-9a-f]{12}: runner --backend jax .*--epochs 2 .*--data-dir /data/offline", out)
