"""The estimate's measured basis: the user's runs, and the project's committed reference runs as a table shipped with
the estimator (`data/reference_basis.json`), so that an installed orchestrator has the "measured: reference" basis
without the logs, and a dry run reads one file instead of re-reading and re-validating every reference log.

    python -m estimator.basis write     # regenerate the table from logs/reference (after adding runs there)
    python -m estimator.basis check     # exit 1 if the table is not what logs/reference gives today

The same command writes the GPUs' rates fitted on those runs and the physics basis's ranges
(`data/gpu_rates.json`, estimator.physics): what the reference runs give, derived once.

The table is generated, never edited: one row per reference run the estimator can learn from (an
`estimator.model.Observation`), under a version and the Observation fields it was written with. A test holds it
equal to a fresh derivation, so it cannot drift from the logs.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import astuple, fields
from functools import cache
from pathlib import Path
from typing import Any

from estimator import physics
from estimator.model import Observation, measured_observations
from records.loading import REFERENCE_FOLDER, load_runs

VERSION = 1  # raise it when a row's meaning changes without its fields changing
TABLE = Path(__file__).resolve().parent / "data" / "reference_basis.json"
# The committed reference runs, beside this package in a checkout (not in an installed package: the table is).
COMMITTED_REFERENCE = Path(__file__).resolve().parents[1] / "logs" / REFERENCE_FOLDER
SOURCE = f"logs/{REFERENCE_FOLDER}"


class StaleBasis(RuntimeError):
    """The table was written for other Observation fields or another version: regenerate it."""


@cache
def reference_basis() -> tuple[Observation, ...]:
    """The committed reference runs as the estimator sees them, read from the shipped table."""
    return read_table(TABLE)


def measured(logs: Path) -> list[Observation]:
    """The user's runs under `logs`, their own reference runs under `logs/reference` (unless that is the committed
    folder, which the table stands for), and the committed reference runs."""
    found = measured_observations(load_runs(logs).runs, "measured") if logs.is_dir() else []
    own = (logs / REFERENCE_FOLDER).resolve()
    extra = folder_observations(own) if own != COMMITTED_REFERENCE else ()
    return [*found, *extra, *reference_basis()]


@cache
def folder_observations(folder: Path) -> tuple[Observation, ...]:
    """Every run under a folder of reference runs (one folder per platform), read from the logs."""
    children = sorted(folder.iterdir()) if folder.is_dir() else []
    return tuple(o for child in children for o in measured_observations(load_runs(child).runs, "reference"))


# ---- the table ----------------------------------------------------------------------------------------------------


def table_text(observations: tuple[Observation, ...]) -> str:
    """The table as written: a header, then one row per line (so that a change of the logs is a readable diff)."""
    head = {"version": VERSION, "source": SOURCE, "fields": _field_names(), "rows": len(observations)}
    rows = ",\n".join(json.dumps(list(astuple(o)), ensure_ascii=False) for o in observations)
    return json.dumps(head)[:-1] + ', "observations": [\n' + rows + "\n]}\n"


def read_table(path: Path) -> tuple[Observation, ...]:
    data: dict[str, Any] = json.loads(path.read_text())
    if data.get("version") != VERSION or data.get("fields") != _field_names():
        raise StaleBasis(
            f"{path}: written as version {data.get('version')} with fields {data.get('fields')}; this estimator "
            f"reads version {VERSION} with {_field_names()}: regenerate it with `python -m estimator.basis write`"
        )
    return tuple(Observation(*row) for row in data["observations"])


def _field_names() -> list[str]:
    return [f.name for f in fields(Observation)]


# ---- regenerating it ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m estimator.basis",
        description="The estimator's reference basis (estimator/data/reference_basis.json) from logs/reference.",
    )
    parser.add_argument("action", choices=("write", "check"), help="write the table, or check it is current")
    parser.add_argument("--reference", type=Path, default=COMMITTED_REFERENCE, help="default: logs/reference")
    parser.add_argument("--table", type=Path, default=TABLE, help="default: the table the estimator reads")
    parser.add_argument("--rates", type=Path, default=physics.RATES_TABLE, help="default: the rates it reads")
    args = parser.parse_args(argv)
    if not args.reference.is_dir():
        parser.exit(2, f"error: --reference {args.reference}: no such folder (the reference logs of a checkout)\n")
    observations = folder_observations(args.reference.resolve())
    written = {args.table: table_text(observations), args.rates: physics.rates_text(observations)}
    if args.action == "write":
        for path, text in written.items():
            path.write_text(text)
        print(f"wrote {args.table}: {len(observations)} observations from {args.reference}, and {args.rates}")
        return 0
    stale = [path for path, text in written.items() if (path.read_text() if path.is_file() else "") != text]
    for path in stale:
        print(f"{path} is stale: regenerate it with `python -m estimator.basis write`", file=sys.stderr)
    if stale:
        return 1
    print(f"{args.table}, {args.rates}: current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
