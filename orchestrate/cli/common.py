"""What every command shares: the one-line usage error, the parser that raises it, the option types, and the small
checks and printers several commands use."""

from __future__ import annotations

import argparse
import getpass
import math
import os
import socket
import sys
from pathlib import Path
from typing import NoReturn

from benchmarks.cli import MAX_NAME_CHARS, name_error
from orchestrate.provider import Provider, ProviderError
from records.ledger import LEDGER_ENV, default_ledger_path

EXIT_USAGE = 2


class UsageError(ValueError):
    """A bad input: printed as one line, exit status 2, nothing started."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of the usage block
        raise UsageError(f"{message} (see {self.prog} --help)")


def catalog_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="an extra catalog of profiles (repeatable; see also $KCB_CATALOG and docs/providers.md)",
    )


def ledger_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger", type=Path, help=f"ledger file (default: {default_ledger_path()})")


def check_ledger_path(given: Path | None) -> None:
    """The ledger (`--ledger`, else $KCB_LEDGER, else the default) names a regular file, existing or to be made in
    an existing folder."""
    path = given if given is not None else default_ledger_path()
    what = "--ledger" if given is not None else (f"${LEDGER_ENV}" if os.environ.get(LEDGER_ENV) else "the ledger")
    if path.is_dir():
        raise UsageError(f"{what} {path}: is a folder; give the ledger's file, e.g. {path / 'ledger.jsonl'}")
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"{what} {path}: {path.parent} is not a folder")
    if path.exists() and not path.is_file():  # a device (/dev/full, /dev/zero) or a pipe: a read that never ends
        raise UsageError(f"{what} {path}: not a regular file; give the ledger's file, e.g. ./ledger.jsonl")


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not print a traceback of its own."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def owner_id() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--provider-setting {text!r}: expected KEY=VALUE")
    return key, value


def check_name(what: str, text: str | None) -> None:
    """A platform or run id: the rule of `python -m benchmarks`, whose logs and containers they name."""
    problem = name_error(what, text) if text is not None else None
    if problem is not None:
        raise UsageError(problem)


def credentials(provider: Provider) -> str:
    """ "ok", or why not: missing credentials and an API that cannot be reached alike, so that `--dry-run`
    still shows the plan; a real run refuses to start on anything but "ok"."""
    try:
        provider.check_credentials()
    except ProviderError as exc:
        return str(exc)
    return "ok"


def row(label: str, text: str) -> None:
    print(f"  {label:<12} {text}")


# ---- option types: argparse turns their ArgumentTypeError into the one-line usage error ----------------------


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < math.inf:  # nan and inf too: `--max-cost inf` is no limit at all
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text}")
    return value


def run_id(text: str) -> str:
    """The RUN_ID that `status` and `collect` look up: none is longer than `run` accepts (nor fits a file name)."""
    if len(text) > MAX_NAME_CHARS:
        raise argparse.ArgumentTypeError(f"{len(text):,} characters; no run id has more than {MAX_NAME_CHARS}")
    return text


def gpus(text: str) -> str:
    if text == "all":
        return text
    return str(positive_int(text))


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
