"""`python -m report LOGDIR [--base CONFIG] [--out DIR] [--price PLATFORM=USD] [--study NAME] [--markdown F]`;
`python -m report backtest` checks the pre-rental estimate against the committed runs (estimator.backtest).

Exit codes: 0 written; 1 nothing to report (no readable complete run); 2 bad arguments. Errors are one line.
Unreadable log files are skipped with a one-line reason each (stderr and the page); the rest is reported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from estimator.backtest import main as backtest
from estimator.owned import OwnedDataError
from estimator.published import StudyDataError, load_studies
from records.catalog import MAX_USD_PER_KWH, Profile
from report.build import Report, Request, build
from report.costs import (
    BILLING_RULES,
    TRAINING_TIME,
    PriceBook,
    PriceError,
    load_catalog_profiles,
    load_stand_ins,
    parse_price_arguments,
)
from report.html import write_report
from report.markdown import write_markdown
from report.owned import load_owned
from report.studies import get_study
from report.tables import BadArgumentError, ReportError

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2
DEFAULT_OUT = Path("report-out")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        self.exit(EXIT_USAGE, f"error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m report",
        description="Turn benchmark logs into time and cost tables, charts and an HTML page, "
        "optionally next to a published study.",
    )
    p.add_argument("logdir", nargs="?", type=Path, help="folder of logs (e.g. logs/ or logs/<platform>)")
    p.add_argument(
        "--base",
        help="configuration everything is divided by, e.g. local-tensorflow (default: the "
        "first real-data TensorFlow configuration)",
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"report folder (default: {DEFAULT_OUT}/)")
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="PLATFORM=USD_PER_HOUR",
        help="hourly price for a platform (overrides the catalog); repeatable",
    )
    p.add_argument(
        "--billing",
        choices=BILLING_RULES,
        default=TRAINING_TIME,
        help="training-time: training seconds x price, as the published studies (default: the workloads of a "
        "suite share one machine, whose billing the machine-time table shows); profile: the catalog profile's "
        "billing increment and minimum applied to each workload alone",
    )
    p.add_argument(
        "--study",
        help="published study to compare with (see --list-studies); without LOGDIR, the published study alone",
    )
    p.add_argument("--suite", help="only runs made by this suite (their metadata names it), e.g. quick")
    p.add_argument(
        "--runs",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only runs whose run id matches this shell pattern, e.g. 'gpu-suite-*-default'; repeatable",
    )
    p.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="write a markdown document (charts in FILE's folder) instead of the HTML report",
    )
    p.add_argument(
        "--preamble",
        type=Path,
        metavar="FILE",
        help="with --markdown: a markdown file placed before the generated tables (context, method, findings)",
    )
    p.add_argument(
        "--ledger",
        type=Path,
        metavar="FILE",
        help="orchestrator ledger for billed machine time (default: $KCB_LEDGER, else "
        "~/.keras-cloud-bench/ledger.jsonl)",
    )
    p.add_argument(
        "--reference",
        metavar="NAME",
        help="also show the project's committed runs in LOGDIR/reference/NAME (e.g. NVIDIA-H200), labelled as "
        "reference; without it LOGDIR/reference/ is left out",
    )
    p.add_argument(
        "--owned",
        type=Path,
        metavar="FILE",
        help="owned machines (TOML, as report/data/owned.toml) weighed against renting, beside the two 2018 posts'",
    )
    p.add_argument(
        "--electricity-price",
        type=float,
        metavar="USD_PER_KWH",
        help="price of a kWh, for the cost of each run's measured energy",
    )
    p.add_argument(
        "--replacement",
        action="append",
        default=[],
        metavar="REQUESTED=PROFILE",
        help="PROFILE ran in place of REQUESTED (a retired profile's catalog replacement in a fan-out); "
        "named on the page; repeatable",
    )
    p.add_argument("--list-studies", action="store_true", help="list the published studies and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["backtest"]:  # `python -m report backtest`: the estimator against the committed runs
        return backtest(argv[1:])
    args = parser().parse_args(argv)
    try:
        if args.list_studies:
            for name, study in load_studies().items():
                print(f"{name}: {study.title} ({study.date})")
            return EXIT_OK
        request = _request(args)
    except (PriceError, BadArgumentError, StudyDataError, OwnedDataError) as exc:
        return _fail(EXIT_USAGE, str(exc))
    try:
        report = build(request)
    except BadArgumentError as exc:
        return _fail(EXIT_USAGE, str(exc))
    except ReportError as exc:
        return _fail(EXIT_NOTHING, str(exc))
    for skipped in report.skipped:
        print(f"skipped: {skipped.reason}", file=sys.stderr)
    if not report.partial.empty:
        print(
            f"note: {len(report.partial)} partial run(s) left out of the results (listed in the report)",
            file=sys.stderr,
        )
    _warn_unused_prices(request.prices, set(report.results["platform"]))
    return _write(report, args)


def _request(args: argparse.Namespace) -> Request:
    if args.logdir is None and args.study is None:
        raise BadArgumentError("give a log folder (e.g. logs/), or --study NAME for a published study alone")
    if args.logdir is not None and not args.logdir.is_dir():
        raise BadArgumentError(f"log folder {str(args.logdir)!r} does not exist or is not a folder")
    if args.markdown is not None and args.markdown.suffix.lower() != ".md":
        raise BadArgumentError(f"--markdown {str(args.markdown)!r}: expected a .md file name")
    if args.preamble is not None and (args.markdown is None or not args.preamble.is_file()):
        raise BadArgumentError(f"--preamble {str(args.preamble)!r}: needs --markdown and an existing file")
    if args.electricity_price is not None and not 0 <= args.electricity_price <= MAX_USD_PER_KWH:
        raise BadArgumentError(
            f"--electricity-price {args.electricity_price}: expected a number from 0 to {MAX_USD_PER_KWH:g} USD per kWh"
        )
    overrides = parse_price_arguments(args.price)
    profiles, problem = load_catalog_profiles()
    owned = load_owned() | (load_owned(args.owned) if args.owned is not None else {})
    return Request(
        logdir=args.logdir,
        base=args.base,
        prices=PriceBook(overrides, args.billing, profiles, problem, owned, load_stand_ins()),
        study=get_study(args.study) if args.study else None,
        ledger=args.ledger,
        suite=args.suite,
        run_ids=tuple(args.runs),
        reference=args.reference,
        owned=owned,
        usd_per_kwh=args.electricity_price,
        replacements=_replacements(args.replacement, profiles),
    )


def _replacements(values: list[str], profiles: dict[str, Profile]) -> tuple[str, ...]:
    """ "gce-k80=gce-t4" -> "gce-t4 ran in place of gce-k80 (retired 2024-05-01)", in the order given."""
    lines = []
    for value in values:
        requested, sep, used = value.partition("=")
        if not sep or not requested.strip() or not used.strip():
            raise BadArgumentError(f"--replacement {value!r}: expected REQUESTED=PROFILE, e.g. gce-k80=gce-t4")
        requested, used = requested.strip(), used.strip()
        known = profiles.get(requested)
        retired = f" (retired {known.retired_on})" if known is not None and known.retired_on else ""
        lines.append(f"{used} ran in place of {requested}{retired}")
    return tuple(lines)


def _warn_unused_prices(prices: PriceBook, platforms: set[str]) -> None:
    for platform in prices.unused_overrides(platforms):
        print(f"warning: --price {platform}=...: no run on platform {platform!r}", file=sys.stderr)


def _write(report: Report, args: argparse.Namespace) -> int:
    if args.markdown is not None:
        preamble = args.preamble.read_text() if args.preamble is not None else ""
        path = write_markdown(report, args.markdown, preamble)
        print(f"markdown: {path.resolve()}")
        return EXIT_OK
    page = write_report(report, args.out)
    print(f"report: {page.resolve()}")
    return EXIT_OK


def _fail(code: int, message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code
