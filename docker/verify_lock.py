"""Check an environment or a pip resolution against a lock file, inside image builds.

Standard library only: it also runs on a bare base image, before anything is installed.

    verify_lock.py installed [--exact] LOCK    every pin in LOCK is installed at exactly that version
                                               (--exact: and nothing else is installed, bar pip itself)
    verify_lock.py report REPORT.json LOCK     `pip install --dry-run --report` chose exactly LOCK's set
    verify_lock.py expect NAME==VERSION ...    these packages are installed at these versions (image labels)
    verify_lock.py hashed LOCK                 every pin in LOCK carries at least one --hash (pip then checks
                                               every downloaded file against them: --require-hashes)
    verify_lock.py without NAME LOCK           LOCK less NAME's pin and its hashes, on stdout (the compiled
                                               image installs its own TensorFlow wheel in that pin's place)

Exit 0 when everything matches, 1 with one line per mismatch otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib import metadata
from pathlib import Path

# Installers that a fresh virtual environment holds whatever the lock says.
INSTALLERS = {"pip"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)")


def canonical_name(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(text: str) -> tuple[str, str]:
    match = PIN.match(text.strip())
    if not match:
        raise ValueError(f"not a NAME==VERSION pin: {text!r}")
    return canonical_name(match.group(1)), match.group(2)


def read_lock(path: Path) -> dict[str, str]:
    """Pins of a pip-style lock file: `name==version` lines; comments and `--option` lines are skipped."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")):
            continue
        name, version = parse_pin(stripped)
        pins[name] = version
    if not pins:
        raise ValueError(f"{path}: no pins found")
    return pins


def lock_entries(path: Path) -> list[list[str]]:
    """The lock's lines grouped into entries: a pin line with its `\\`-continued `--hash` lines; comments and
    blank lines are entries of their own."""
    entries: list[list[str]] = []
    continued = False
    for line in path.read_text().splitlines():
        if continued:
            entries[-1].append(line)
        else:
            entries.append([line])
        continued = line.rstrip().endswith("\\")
    return entries


def _is_pin(entry: list[str]) -> bool:
    first = entry[0].strip()
    return bool(first) and not first.startswith(("#", "-"))


def unhashed_pins(path: Path) -> list[str]:
    """Pins that carry no --hash: pip refuses the whole file under --require-hashes if any does."""
    return [parse_pin(e[0].strip())[0] for e in lock_entries(path) if _is_pin(e) and "--hash=" not in "".join(e)]


def lock_without(path: Path, name: str) -> str:
    wanted = canonical_name(name)
    kept = [e for e in lock_entries(path) if not (_is_pin(e) and parse_pin(e[0].strip())[0] == wanted)]
    if len(kept) == len(lock_entries(path)):
        raise ValueError(f"{path}: no pin for {name}")
    return "\n".join(line for entry in kept for line in entry) + "\n"


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def compare(expected: dict[str, str], actual: dict[str, str | None], *, exact_set: bool) -> list[str]:
    """Mismatches between pins and what was found; with exact_set, also packages found but not pinned."""
    problems = []
    for name, version in sorted(expected.items()):
        found = actual.get(name)
        if found is None:
            problems.append(f"{name}: pinned {version}, not present")
        elif found != version:
            problems.append(f"{name}: pinned {version}, found {found}")
    if exact_set:
        unpinned = sorted(set(actual) - set(expected))
        problems += [f"{name}: {actual[name]} present but not pinned" for name in unpinned]
    return problems


def all_installed() -> dict[str, str | None]:
    found = {canonical_name(dist.metadata["Name"]): dist.version for dist in metadata.distributions()}
    return {name: version for name, version in found.items() if name not in INSTALLERS}


def report_versions(report_path: Path) -> dict[str, str | None]:
    """Name -> version of what a `pip install --dry-run --report` run would install."""
    report = json.loads(report_path.read_text())
    return {canonical_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    installed = modes.add_parser("installed", help="the lock's pins are installed")
    installed.add_argument("--exact", action="store_true", help="fail on installed packages the lock lacks")
    installed.add_argument("lock", type=Path)
    report = modes.add_parser("report", help="a pip --report resolution equals the lock")
    report.add_argument("report", type=Path)
    report.add_argument("lock", type=Path)
    expect = modes.add_parser("expect", help="NAME==VERSION pins are installed")
    expect.add_argument("pins", nargs="+")
    hashed = modes.add_parser("hashed", help="every pin carries a --hash")
    hashed.add_argument("lock", type=Path)
    without = modes.add_parser("without", help="print the lock less one pin")
    without.add_argument("name")
    without.add_argument("lock", type=Path)
    args = parser.parse_args(argv)

    try:
        if args.mode == "installed":
            pins = read_lock(args.lock)
            actual = all_installed() if args.exact else {name: installed_version(name) for name in pins}
            problems = compare(pins, actual, exact_set=args.exact)
        elif args.mode == "without":
            sys.stdout.write(lock_without(args.lock, args.name))
            return 0
        elif args.mode == "hashed":
            problems = [f"{name}: pinned without a --hash" for name in unhashed_pins(args.lock)]
        elif args.mode == "report":
            problems = compare(read_lock(args.lock), report_versions(args.report), exact_set=True)
        else:
            pins = dict(parse_pin(pin) for pin in args.pins)
            problems = compare(pins, {name: installed_version(name) for name in pins}, exact_set=False)
    except (OSError, ValueError, KeyError) as error:
        print(f"verify_lock: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"verify_lock: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
