"""`run`'s options and its three modes as typed requests: an attached run on one profile, a detached run on one
profile, a fan-out over several. A request holds only its mode's options, so no mode can see another's; the
checks that pick the mode give the one-line errors of options given to the wrong one.

A request also writes itself back as `run`'s command line (`argv`): a fan-out starts each profile's run from its
child request, so every option reaches the child by the one rule that names options (a field `max_lifetime` is
the option `--max-lifetime`), checked against the parser by the tests.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path

from benchmarks.command import BATCH_POLICIES
from benchmarks.harness.backends import BACKENDS
from benchmarks.suites import SUITES
from orchestrate.cli.common import (
    UsageError,
    catalog_option,
    gpus,
    ledger_option,
    non_negative_int,
    positive_float,
    positive_int,
)
from orchestrate.detached import DETACHED_IMAGE_SOURCES
from orchestrate.images import IMAGE_SOURCES

MAX_REPEATS = 100
MAX_LIFETIME_MIN = 7 * 24 * 60  # a week: beyond it a typo, not a benchmark


@dataclass(frozen=True)
class RunOptions:
    """What one profile's run is, in any mode: every `run` option but the mode's own. Each field is named as its
    option's dest, and each default is the option's."""

    catalog: tuple[Path, ...] = ()
    suite: str = "quick"
    backends: str | None = None
    workloads: str | None = None
    workload_file: tuple[Path, ...] = ()
    data_dir: Path | None = None
    owned: Path | None = None
    dry_run: bool = False
    host: str | None = None
    port: str | None = None
    identity: str | None = None
    ssh_config: Path | None = None
    provider_setting: tuple[str, ...] = ()
    platform: str | None = None
    spot: bool | None = None  # None: the profile's market
    allow_retired: bool = False
    image: str | None = None
    image_source: str = "auto"
    epochs: int | None = None
    train_limit: int | None = None
    val_limit: int | None = None
    strict_data: bool = False
    repeats: int = 1
    gpus: str | None = None
    batch_policy: str | None = None
    nodes: int | None = None  # None: one node
    logs: Path = Path("logs")
    ledger: Path | None = None
    run_id: str | None = None
    remote_dir: str = "~/keras-cloud-bench"
    ssh_timeout: float = 300.0
    boot_timeout: float = 600.0
    max_lifetime: int = 240
    max_preemptions: int = 3
    install_host_software: bool = False
    plain: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        values = {f.name: getattr(args, f.name) for f in fields(cls)}
        # a workload file's absolute path, so a fan-out's children find it from their own folder
        files = tuple(Path(f).expanduser().absolute() for f in args.workload_file)
        data = Path(args.data_dir).expanduser().absolute() if args.data_dir is not None else None
        owned = Path(args.owned).expanduser().absolute() if args.owned is not None else None
        given = {"catalog": tuple(args.catalog), "provider_setting": tuple(args.provider_setting)}
        return cls(**values | given | {"workload_file": files, "data_dir": data, "owned": owned})

    def argv(self, changed_only: bool = False) -> list[str]:
        """These options as `run`'s command line (`changed_only`: those that differ from the defaults)."""
        words: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if changed_only and value == f.default:
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.name == "spot" and value is False:
                words.append("--on-demand")
            elif value is True:
                words.append(flag)
            elif isinstance(value, tuple):
                words += [word for item in value for word in (flag, str(item))]
            elif value is not None and value is not False:
                words += [flag, str(value)]
        return words


@dataclass(frozen=True)
class Detach:
    """`--detach`'s own options: the machine runs alone and uploads to the bucket."""

    upload_interval: float = 60.0
    bucket: str | None = None  # None: the project's own bucket

    def argv(self) -> list[str]:
        bucket = ["--bucket", self.bucket] if self.bucket is not None else []
        return ["--detach", "--upload-interval", str(self.upload_interval), *bucket]


@dataclass(frozen=True)
class AttachedRun:
    """`run --profile P`: launch, run, pull the logs and tear down, watched to the end."""

    profile: str
    options: RunOptions

    def argv(self) -> list[str]:
        return ["--profile", self.profile, *self.options.argv()]


@dataclass(frozen=True)
class DetachedRun:
    """`run --profile P --detach`: the machine runs alone; this command returns after the launch."""

    profile: str
    options: RunOptions
    detach: Detach

    def argv(self) -> list[str]:
        return ["--profile", self.profile, *self.options.argv(), *self.detach.argv()]


@dataclass(frozen=True)
class Fanout:
    """`run --profiles a,b,...`: one run per profile at once, each attached or, with `detach`, detached."""

    profiles: str
    options: RunOptions
    max_cost: float | None = None
    report_out: Path | None = None
    detach: Detach | None = None

    def child(self, profile: str, options: RunOptions) -> AttachedRun | DetachedRun:
        """One profile's run of this fan-out, with its own options."""
        if self.detach is None:
            return AttachedRun(profile, options)
        return DetachedRun(profile, options, self.detach)


RunRequest = AttachedRun | DetachedRun | Fanout


def request_of(args: argparse.Namespace) -> RunRequest:
    """The mode `run`'s options ask for; an option that belongs to another mode is a usage error."""
    options = RunOptions.from_args(args)
    detach = Detach(args.upload_interval, args.bucket) if args.detach else None
    if args.bucket is not None and detach is None:
        raise UsageError("--bucket applies to detached runs (--detach)")
    if args.profiles is not None:
        if options.platform is not None:
            raise UsageError("--platform names one machine; in a fan-out each run's platform is its profile")
        return Fanout(args.profiles, options, args.max_cost, args.report_out, detach)
    for flag, value in (("--max-cost", args.max_cost), ("--report-out", args.report_out)):
        if value is not None:
            raise UsageError(f"{flag} applies to a fan-out (--profiles a,b,...)")
    if detach is not None:
        return DetachedRun(args.profile, options, detach)
    if options.image_source not in IMAGE_SOURCES:
        raise UsageError(f"--image-source {options.image_source} applies to detached runs (--detach); attached: stream")
    return AttachedRun(args.profile, options)


def add_runner_options(parser: argparse.ArgumentParser) -> None:
    """What `run` and `schedule create` tell the runner (orchestrate.runspec.RUNNER_OPTIONS) and carry to it."""
    parser.add_argument(
        "--workload-file",
        action="append",
        default=[],
        type=Path,
        metavar="FILE.py",
        help="your own workload (docs/workloads.md): checked here on the CPU, then carried to the machine; "
        "the suite runs it alone unless --workloads names others too",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="your own data folder (docs/workloads.md): carried to every machine of the run and mounted read-only "
        "at /data/offline in each container, where the runner reads it (--data-dir)",
    )
    parser.add_argument("--epochs", type=positive_int, help="runner --epochs: override the suite's epochs")
    parser.add_argument("--train-limit", type=positive_int, help="runner --train-limit: first N training samples")
    parser.add_argument("--val-limit", type=positive_int, help="runner --val-limit: first N validation samples")
    parser.add_argument("--strict-data", action="store_true", help="fail instead of using labelled synthetic data")
    parser.add_argument("--gpus", type=gpus, help="runner --gpus: how many GPUs each run uses, N or all (GPU profiles)")
    parser.add_argument(
        "--batch-policy", choices=BATCH_POLICIES, help="runner --batch-policy on several GPUs or several nodes"
    )


def add_run_options(run: argparse.ArgumentParser) -> None:
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("--profile", help="catalog profile (python -m orchestrate profiles)")
    which.add_argument("--profiles", help="comma-separated profiles: run on each at once (a fan-out)")
    run.add_argument("--max-cost", type=positive_float, help="--profiles: refuse above this many dollars")
    run.add_argument("--report-out", type=Path, help="--profiles: report folder (default: report-out/<run-id>)")
    catalog_option(run)
    run.add_argument("--suite", default="quick", help=f"one of {', '.join(SUITES)} (default: quick)")
    run.add_argument("--backends", help=f"comma-separated subset of {', '.join(BACKENDS)} (default: the suite's)")
    run.add_argument("--workloads", help="comma-separated subset of the suite's workloads")
    add_runner_options(run)
    run.add_argument(
        "--owned",
        type=Path,
        metavar="FILE.toml",
        help="machines of your own (as report/data/owned.toml, with the `gpu` each holds) set against renting in the "
        "dry run's own-or-rent lines (docs/own-or-rent.md)",
    )
    run.add_argument("--dry-run", action="store_true", help="print the plan and cost estimate; launch nothing")
    run.add_argument("--host", help="ssh profiles: user@box or an ~/.ssh/config alias")
    run.add_argument("--port", help="ssh profiles: SSH port (default: ~/.ssh/config, else 22)")
    run.add_argument("--identity", help="ssh profiles: private key file (default: ~/.ssh/config and the agent)")
    run.add_argument("--ssh-config", type=Path, help="SSH config file to use instead of ~/.ssh/config")
    run.add_argument(
        "--provider-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider-specific setting",
    )
    run.add_argument("--platform", help="name of the machine in the logs (default: the profile name)")
    market = run.add_mutually_exclusive_group()
    market.add_argument("--spot", dest="spot", action="store_true", default=None, help="spot/preemptible")
    market.add_argument("--on-demand", dest="spot", action="store_false", help="on-demand (not preemptible)")
    run.add_argument("--allow-retired", action="store_true", help="try a retired profile anyway")
    run.add_argument("--image", help="image reference (default: keras-cloud-bench:cpu or :gpu)")
    run.add_argument(
        "--image-source",
        choices=sorted({*IMAGE_SOURCES, *DETACHED_IMAGE_SOURCES}),
        default="auto",
        help="how the image gets there (load: through the bucket, detached runs only)",
    )
    run.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help=f"run every workload x backend N times (1-{MAX_REPEATS}), interleaved, each in a fresh container",
    )
    run.add_argument(
        "--nodes",
        type=positive_int,
        help="slurm profiles: train each run across N nodes, one process per GPU (per node on CPUs); docs/slurm.md",
    )
    run.add_argument("--logs", type=Path, default=Path("logs"), help="local log root (default: logs)")
    ledger_option(run)
    run.add_argument("--run-id", help="name of this run's log folder (default: UTC time + random)")
    run.add_argument("--remote-dir", default="~/keras-cloud-bench", help="work folder on the host")
    run.add_argument("--ssh-timeout", type=positive_float, default=300.0, help="seconds to wait for SSH")
    run.add_argument("--boot-timeout", type=positive_float, default=600.0, help="seconds to wait for boot")
    run.add_argument(
        "--max-lifetime",
        type=positive_int,
        default=240,
        help=f"minutes after which the machine ends itself (at most {MAX_LIFETIME_MIN})",
    )
    run.add_argument("--max-preemptions", type=non_negative_int, default=3, help="relaunches after preemption")
    run.add_argument(
        "--install-host-software",
        action="store_true",
        help="ssh/local hosts: install Docker / the NVIDIA toolkit when missing (rented machines always may)",
    )
    run.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")
    run.add_argument(
        "--detach",
        action="store_true",
        help="aws/gce: the machine runs the suite alone, uploads its logs to a bucket and deletes itself; "
        "this command returns after the launch (then: status RUN_ID, collect RUN_ID)",
    )
    run.add_argument(
        "--upload-interval",
        type=positive_float,
        default=60.0,
        help="--detach: seconds between uploads of a running item's files (default: 60)",
    )
    run.add_argument(
        "--bucket",
        help="--detach: s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX] (default: the project's own, created and tagged)",
    )
