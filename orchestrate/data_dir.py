"""A user's data folder (`run --data-dir`) on the orchestrator's side: checked before anything is launched or paid
for, then carried in the run's payload (orchestrate.runspec: one archive with the workload files, streamed to the
host beside the run's files, or put in a detached run's bucket) and mounted read-only at /data/offline in every
container, where the runner reads it (`--data-dir /data/offline`): the image is used as it is.

Files are carried by their contents: a link to a file travels as that file. A link to a folder, anything that is
not a regular file, or a name the payload's manifest cannot hold (a newline or a backslash in it), is refused by
name rather than left out unseen.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CONTAINER_DIR = "/data/offline"  # where every container sees the folder, read-only


class BadDataDir(ValueError):
    """The folder cannot be carried; the one-line message names --data-dir and what is wrong."""


@dataclass(frozen=True)
class DataDir:
    path: Path  # absolute, on this machine
    files: tuple[str, ...]  # every regular file under it, relative, sorted
    size: int  # their bytes

    def describe(self) -> str:
        return f"{self.path}: {len(self.files)} file(s), {human_size(self.size)}"


def read_data_dir(given: Path) -> DataDir:
    """The folder and what it holds; BadDataDir when it is missing, not a folder, or anything in it is unreadable."""
    path = Path(given).expanduser().absolute()
    if not path.exists():
        raise BadDataDir(f"--data-dir {given}: no such folder")
    if not path.is_dir():
        raise BadDataDir(f"--data-dir {given}: not a folder")
    files: list[str] = []
    size = 0
    for folder, subfolders, names in os.walk(path, onerror=_raise_unreadable(given)):
        for name in sorted(subfolders):
            if Path(folder, name).is_symlink():
                raise BadDataDir(f"--data-dir {given}: {_relative(path, folder, name)} links to a folder; copy it in")
        for name in names:
            file = Path(folder, name)
            relative = _relative(path, folder, name)
            if not file.is_file():
                raise BadDataDir(f"--data-dir {given}: {relative} is not a regular file (or a link to one)")
            if "\n" in relative or "\\" in relative:
                raise BadDataDir(
                    f"--data-dir {given}: {relative!r}: a file name with a newline or backslash; rename it"
                )
            if not os.access(file, os.R_OK):
                raise BadDataDir(f"--data-dir {given}: {relative} is not readable")
            files.append(relative)
            size += file.stat().st_size
    if not files:
        raise BadDataDir(f"--data-dir {given}: the folder holds no files")
    return DataDir(path, tuple(sorted(files)), size)


def _raise_unreadable(given: Path) -> Callable[[OSError], None]:
    def raise_it(error: OSError) -> None:
        raise BadDataDir(f"--data-dir {given}: {error.strerror or error} ({error.filename})")

    return raise_it


def _relative(root: Path, folder: str, name: str) -> str:
    return Path(folder, name).relative_to(root).as_posix()


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value, unit = size / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"
