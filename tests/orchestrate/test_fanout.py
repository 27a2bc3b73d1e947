"""`orchestrate run --profiles`: what is checked and printed before anything launches, and how each profile's
run is handed its own options. The fan-out's real runs are in tests/clouds/test_cloud_fanout.py."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from estimator.suite import machine_start
from orchestrate.cli import build_parser, main
from orchestrate.cli.request import AttachedRun, DetachedRun, Fanout, RunOptions, request_of
from orchestrate.cli.run_fanout import child_request
from orchestrate.fanout import Candidate, CandidateResult, resolve_candidates, results_table
from records.catalog import CatalogError, load_catalogs
from records.ledger import RunRecord

ROOT = Path(__file__).resolve().parents[2]


def test_retired_profiles_map_to_their_replacement_and_name_it() -> None:
    catalog = load_catalogs([])
    candidates = resolve_candidates(catalog, "gce-k80, gce-t4,aws-p2.xlarge", allow_retired=False)
    assert [c.profile.name for c in candidates] == ["gce-t4", "aws-g4dn.xlarge"]  # gce-t4 runs once
    assert candidates[0].mapping == "gce-k80 (retired 2024-05-01) -> gce-t4"
    kept = resolve_candidates(catalog, "gce-k80", allow_retired=True)
    assert [(c.profile.name, c.mapping) for c in kept] == [("gce-k80", None)]
    with pytest.raises(CatalogError, match="--profiles ' , '"):
        resolve_candidates(catalog, " , ", allow_retired=False)


def test_each_profile_gets_every_option_and_only_its_providers_settings(tmp_path: Path) -> None:
    argv = [
        "run", "--profiles", "ssh,aws-g4dn.xlarge", "--host", "me@box", "--port", "2222",
        "--provider-setting", "ssh_address=127.0.0.1:22", "--suite", "quick", "--backends", "jax",
        "--epochs", "1", "--on-demand", "--strict-data", "--logs", str(tmp_path), "--run-id", "fan0",
        "--catalog", str(tmp_path / "a.toml"), "--max-cost", "2",
    ]  # fmt: skip
    fanout = request_of(build_parser().parse_args(argv))
    assert isinstance(fanout, Fanout) and fanout.max_cost == 2
    candidates = resolve_candidates(load_catalogs([]), fanout.profiles, allow_retired=False)
    ssh, aws = (_reparsed(child_request(fanout, c, "fan0")) for c in candidates)
    assert isinstance(ssh, AttachedRun) and isinstance(aws, AttachedRun)
    assert (ssh.profile, ssh.options.run_id, ssh.options.host, ssh.options.port, ssh.options.provider_setting) == (
        "ssh", "fan0-ssh", "me@box", "2222", (),
    )  # fmt: skip
    assert (aws.profile, aws.options.run_id, aws.options.host, aws.options.provider_setting) == (
        "aws-g4dn.xlarge", "fan0-aws-g4dn.xlarge", None, ("ssh_address=127.0.0.1:22",),
    )  # fmt: skip
    for child in (ssh.options, aws.options):
        assert (child.backends, child.epochs, child.spot, child.strict_data, child.logs) == (
            "jax",
            1,
            False,
            True,
            tmp_path,
        )
        assert child.catalog == (tmp_path / "a.toml",)
        assert child.plain and not child.dry_run


def _reparsed(request: AttachedRun | DetachedRun) -> AttachedRun | DetachedRun | Fanout:
    """A child request through its own command line and back, as the child process reads it."""
    reparsed = request_of(build_parser().parse_args(["run", *request.argv()]))
    assert reparsed == request
    return reparsed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-cost", "0.01"], "error: --max-cost 0.01: the fan-out may cost up to $"),
        (["--provider-setting", "zone=x"], "error: setting 'zone' applies to none of the profiles local, gce-t4"),
        (["--platform", "box"], "error: --platform names one machine"),
        (["--run-id", "../x"], "error: --run-id '../x'"),
    ],
)
def test_bad_fanout_inputs_are_one_line_and_launch_nothing(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--profiles", "local,gce-t4", "--dry-run", "--logs", str(tmp_path / "logs"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "logs").exists()


def test_dry_run_prints_one_combined_estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--profiles", "local,gce-k80", "--dry-run", "--suite", "quick", "--workloads", "mnist_mlp"]
    code = main([*argv, "--backends", "jax", "--run-id", "fan1", "--logs", str(tmp_path), "--max-cost", "50"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("Fan-out (dry run: nothing is launched) of suite quick on 2 profiles, run ids fan1-<profile>")
    assert "gce-t4  1 runs, image keras-cloud-bench:gpu; stands in for gce-k80 (retired 2024-05-01) -> gce-t4" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    # The worst case is the high end of the range: below the $2.16 the machine costs at its max lifetime (240 min at
    # $0.54/h), when it ends itself; one column, explained once under the table.
    found = re.search(r"\(\$[\d.]+-(\$[\d.]+)\)", rows["gce-t4"])
    assert found is not None and rows["gce-t4"].split()[-1] == found.group(1) != "$2.16"
    assert rows["local"].split(" min ")[1].split()[:2] == ["-", "-"]  # a host of one's own costs nothing here
    assert rows["total"][81:91].strip() == found.group(1)  # the worst-case column
    assert rows["worst"].startswith("  worst case: the high end of the range; where runs are not estimated, the cost")
    assert "at most" not in out


SPOT_FANOUT = ["run", "--spot", "--dry-run", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax"]
NO_SPOT_PRICE = (
    "the catalog has no spot price for gce-t4, so the fan-out's cost is unknown; add the profile under a new name "
    "with a dated price to a catalog of your own (docs/estimate.md) or drop --spot; nothing launched\n"
)


def test_max_cost_refuses_a_fanout_whose_price_is_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gce-t4 has no spot price in the catalog: an unknown cost, never $0, so no limit can be checked against it
    argv = [*SPOT_FANOUT, "--profiles", "gce-t4,gce-p100", "--logs", str(tmp_path / "logs")]
    assert main([*argv, "--max-cost", "1000"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: --max-cost 1000: " + NO_SPOT_PRICE
    rows = {line.split()[0]: line for line in captured.out.splitlines() if line.startswith("  ")}
    assert rows["gce-t4"].split()[4:8] == ["no", "spot", "price", "unknown"]
    assert "worst case unknown: no spot price for gce-t4 (the others up to $" in rows["total"]
    assert not (tmp_path / "logs").exists()
    assert main(argv) == 0  # without a limit the estimate is shown, its total unknown rather than the others' sum
    assert "worst case unknown: no spot price for gce-t4" in capsys.readouterr().out


def test_a_price_in_a_catalog_of_ones_own_lets_max_cost_be_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        '[profiles.gce-t4-spot]\nprovider = "gce"\nmachine_type = "n1-standard-4"\n'
        'accelerator = "nvidia-tesla-t4"\naccelerator_count = 1\nzones = ["us-central1-a"]\n'
        'image = "projects/p/global/images/family/f"\nssh_user = "bench"\ndocker_image = "gpu"\n'
        'spot = { usd_per_hour = 0.5, date = "2026-11-01", source = "this test" }\n'
    )
    argv = [*SPOT_FANOUT, "--profiles", "gce-t4-spot,gce-p100", "--catalog", str(catalog), "--max-cost", "1000"]
    assert main([*argv, "--logs", str(tmp_path / "logs")]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    found = re.search(r"\(\$[\d.]+-(\$[\d.]+)\)", rows["gce-t4-spot"])  # priced at the catalog's $0.50/h
    assert found is not None and rows["gce-t4-spot"].split()[-1] == found.group(1)
    assert rows["total"].split()[-1].startswith("$") and "unknown" not in rows["total"]


def test_a_profile_with_runs_not_estimated_is_never_ranked_cheap(capsys: pytest.CaptureFixture[str]) -> None:
    """No JAX run on any CPU to estimate from: the CPU profile's figure is its start alone. It was listed at $0.03,
    above every GPU; now after them, "at least", and the total says it is a lower bound."""
    argv = ["run", "--profiles", "gce-n2-highcpu-16,gce-t4,gce-l4", "--suite", "full", "--workloads", "cifar10_cnn"]
    argv += ["--backends", "jax", "--logs", str(ROOT / "logs"), "--run-id", "fan2", "--dry-run"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    table = out[out.index("  profile ") :].splitlines()[:5]
    assert [row.split()[0] for row in table[::3]] == ["profile", "gce-n2-highcpu-16"] and table[4].split()[0] == "total"
    assert {row.split()[0] for row in table[1:3]} == {"gce-l4", "gce-t4"}
    for row in table[1:3]:  # the GPUs: estimated, a figure and its range
        assert re.match(r"  gce-[lt]4 +\d+\.\d min \(\d+\.\d-\d+\.\d\) +\$\d\.\d\d \(\$", row), row
    assert re.match(r"  gce-n2-highcpu-16 +at least \d+\.\d min +at least \$\d\.\d\d ", table[3]), table[3]
    assert table[3].endswith("1 of 1 run(s) not estimated")
    assert re.match(r"  total +at least \d+\.\d min +at least \$\d\.\d\d ", table[4]), table[4]
    assert table[4].endswith("time and cost are a lower bound: 1 of 3 run(s) not estimated")


def test_unknown_option_is_refused_with_a_single_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--profile", "local", "--report-out", "x", "--dry-run"]) == 2
    assert capsys.readouterr().err == "error: --report-out applies to a fan-out (--profiles a,b,...)\n"


def test_make_reproduce_with_profiles_runs_one_fanout() -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is missing (apt-get install -y make)")
    done = subprocess.run(
        ["make", "-s", "-n", "-f", "mk/orchestrate.mk", "-f", "mk/report.mk", "reproduce",
         "STUDY=benchmark-gpus-2017-11", "PROFILES=gce-k80,x;touch y", "MAX_COST=3"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    command = " ".join(done.stdout.replace("\\\n", " ").split())
    assert "-m orchestrate run --profiles 'gce-k80,x;touch y' --suite 'benchmark-gpus-2017-11'" in command
    assert "--report-out 'report-out/benchmark-gpus-2017-11' --max-cost '3'" in command
    assert "-m report" not in command  # the fan-out writes its one report itself


def test_profiles_study_runs_one_profile_per_published_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--profiles", "study,local", "--suite", "benchmark-gpus-2017-11", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines() if " runs, image " in line]
    assert listed == ["gce-t4", "gce-p100", "gce-n1-highcpu-32", "gce-n1-highcpu-16", "local"]
    assert "stands in for gce-k80 (retired 2024-05-01) -> gce-t4" in out
    assert main(["run", "--profiles", "study", "--suite", "quick", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("error: --profiles study: --suite quick is not a published study")


def test_results_table_prices_an_epoch_and_extrapolates_the_suite() -> None:
    profile = load_catalogs([])["gce-t4"]  # $0.54/h on demand, billed per second
    record = RunRecord("fan-gce-t4", "gce-t4", "gce", "gce-t4", "quick", "me@box", 1, 1000.0, status="complete")
    record.ended_at, record.estimated_cost_usd = 1600.0, 0.09
    result = CandidateResult(
        Candidate("gce-k80", profile, "2024-05-01"), "fan-gce-t4", False, 0, record, 10, 300.0, 1500.0, 0
    )
    row = results_table([result])[1].split()
    assert row[:6] == ["gce-t4", "complete", "600.0s", "0.0900", "10", "30.0s"]
    assert row[6] == f"{0.54 * 30 / 3600:.5f}"  # the price of one epoch at the measured pace
    # extrapolated: the run's 300 s of overhead (600 s wall - 300 s training) + 1500 s of the suite's epochs
    assert row[7:] == ["30.0min", "0.27"]


# A non-default value for every `run` option: a new option must be added here, and so is checked to reach each
# profile's run (or be listed as the fan-out's own).
EVERY_OPTION = {
    "--catalog": "extra.toml", "--suite": "full", "--backends": "jax", "--workloads": "mnist_mlp",
    "--workload-file": "my_model.py", "--data-dir": "my_data", "--owned": "mine.toml",
    "--host": "me@box", "--port": "2222", "--identity": "key", "--ssh-config": "cfg",
    "--provider-setting": "identity_file=k2", "--spot": None, "--image": "img:1", "--image-source": "pull",
    "--epochs": "2", "--train-limit": "9", "--val-limit": "8", "--strict-data": None, "--repeats": "3",
    "--gpus": "2", "--batch-policy": "per-device", "--nodes": "2", "--logs": "L", "--ledger": "led.jsonl",
    "--remote-dir": "/w", "--ssh-timeout": "5.0", "--boot-timeout": "6.0", "--max-lifetime": "7",
    "--max-preemptions": "1", "--install-host-software": None, "--plain": None,
}  # fmt: skip
FANOUT_OWN = {"--profile", "--profiles", "--max-cost", "--report-out", "--dry-run", "--platform", "--run-id"}
FANOUT_OWN |= {"--on-demand", "--allow-retired", "-h"}  # --spot's other half; set per profile; help
FANOUT_OWN |= {"--detach", "--bucket", "--upload-interval"}  # refused with --profiles: a detached run is one profile


@pytest.mark.parametrize("detach", [[], ["--detach", "--upload-interval", "9.0", "--bucket", "s3://b"]])
def test_every_run_option_reaches_each_profiles_run(detach: list[str]) -> None:
    parser = build_parser()
    run_parser = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    options = {option for action in run_parser._actions for option in action.option_strings[:1]}
    assert options - FANOUT_OWN == set(EVERY_OPTION)
    # every field of the typed request is the option its name spells, which the child's command line relies on
    assert {"--" + f.name.replace("_", "-") for f in fields(RunOptions)} <= options
    argv = ["run", "--profiles", "ssh-gpu", "--run-id", "b", *detach]
    argv += [part for flag, value in EVERY_OPTION.items() for part in ([flag] if value is None else [flag, value])]
    fanout = request_of(parser.parse_args(argv))
    assert isinstance(fanout, Fanout)
    (candidate,) = resolve_candidates(load_catalogs([]), "ssh-gpu", allow_retired=False)
    child = _reparsed(child_request(fanout, candidate, "b"))
    assert child.profile == "ssh-gpu" and child.options == replace(fanout.options, run_id="b-ssh-gpu")
    assert isinstance(child, DetachedRun if detach else AttachedRun)
    assert getattr(child, "detach", None) == fanout.detach


def test_max_cost_is_held_against_the_cap_when_the_estimate_outlives_the_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--profiles", "gce-t4", "--suite", "full", "--max-lifetime", "30", "--dry-run"]
    argv += ["--logs", str(tmp_path)]  # estimated from the published runs alone
    assert main([*argv, "--max-cost", "0.28"]) == 0  # the high end is dollars more, but the machine ends at $0.27
    out = capsys.readouterr().out
    assert re.search(r" \$0\.27  may end itself mid-suite \(raise --max-lifetime\)", out), out
    assert main([*argv, "--max-cost", "0.26"]) == 2


def cap_of(advice: str) -> str:
    found = re.search(r"worst case \$([\d.]+), its --max-cost", advice)
    assert found is not None, advice
    return found.group(1)


ONE_RUN = ["--dry-run", "--suite", "quick", "--workloads", "mnist_mlp", "--backends", "jax"]


def test_a_priced_host_of_ones_own_keeps_its_price_and_counts_the_image_pull(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod rented by the hour and reached over SSH: priced in the fan-out as alone (no longer "-", ranked below
    a dearer machine), its image pull counted as on a rented machine, its worst case the range's high end."""
    argv = ["run", "--profiles", "runpod-h200,gce-h100", "--host", "root@pod.invalid", *ONE_RUN]
    assert main([*argv, "--logs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    found = re.search(r"\$(\d+\.\d\d) \(\$[\d.]+-(\$[\d.]+)\)", rows["runpod-h200"])
    assert found is not None and float(found.group(1)) > 0 and rows["runpod-h200"].split()[-1] == found.group(2)
    assert out.index("  runpod-h200 ") < out.index("  gce-h100 ")  # $4.59/h ranks before $11.06/h
    parts = dict(machine_start(load_catalogs([])["runpod-h200"], 1).parts)
    assert "boot" not in parts and any(name.startswith("image pull (10 GB") for name in parts)


def test_overlapping_ranges_print_the_fanout_that_measures_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two L4 machines at two prices: their ranges overlap, so the dry run prints the fan-out that measures the
    suite on both (short slices, 3 repeats) with its cost, and that command runs as printed."""
    argv = ["run", "--profiles", "gce-l4,aws-g6.xlarge", "--dry-run", "--suite", "short", "--workloads", "resnet50"]
    argv += ["--backends", "jax", "--logs", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    (advice,) = [line for line in out.splitlines() if line.startswith("  too close to call: ")]
    assert "gce-l4 $" in advice and "aws-g6.xlarge $" in advice and "(short slices, 3 repeats; about $" in advice
    assert advice.endswith(f"worst case ${cap_of(advice)}, its --max-cost):")
    command = out.splitlines()[out.splitlines().index(advice) + 1].strip()
    words = shlex.split(command)
    assert words[:6] == ["python", "-m", "orchestrate", "run", "--profiles", "gce-l4,aws-g6.xlarge"]
    assert words[words.index("--suite") + 1] == "short" and words[words.index("--repeats") + 1] == "3"
    cap = float(words[words.index("--max-cost") + 1])
    assert f"{cap:.2f}" == cap_of(advice)
    assert main([*words[3:], "--dry-run"]) == 0  # runs as printed, its estimate within its own --max-cost
    assert "too close to call" in capsys.readouterr().out and cap > 0


@pytest.mark.docker
def test_relative_paths_mean_the_same_files_to_each_profiles_run(tmp_path: Path) -> None:
    """The children run in the fan-out's working folder: their ledger is the one the table is read from."""
    argv = ["run", "--profiles", "local", "--image", "kcb-test/absent:none", "--image-source", "present"]
    argv += ["--ledger", "ledger.jsonl", "--logs", "logs", "--remote-dir", str(tmp_path / "host"), "--run-id", "rel"]
    done = subprocess.run(
        [sys.executable, "-m", "orchestrate", *argv],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("Fan-out rel: 1 profiles") :]
    row = next(line.split() for line in table.splitlines() if line.startswith("  local "))
    assert row[1] == "failed"  # read from the child's ledger entry, not "not started"
    assert "rel-local" in (tmp_path / "ledger.jsonl").read_text() and not (ROOT / "ledger.jsonl").exists()
