"""A user's data folder (`run --data-dir`) on the orchestrator's side: checked before anything is launched or paid
for, then carried as one tar archive (streamed to the host beside the run's files, or put in a detached run's bucket
as `data.tar`) and mounted read-only at /data/offline in every container, where the runner reads it
(`--data-dir /data/offline`): the image is used as it is.

Files are carried by their contents: a link to a file travels as that file. A link to a folder, or anything that
is not a regular file, is refused by name rather than left out unseen.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CONTAINER_DIR = "/data/offline"  # where every container sees the folder, read-only
ARCHIVE_NAME = "data.tar"  # a detached run's copy, beside its spec.json in the bucket
CHUNK_BYTES = 1 << 20


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


def write_archive(data: DataDir, handle: BinaryIO) -> None:
    """The folder's files as an uncompressed tar (data files are mostly compressed already), each readable by any
    user: the container's user need not own them. BadDataDir when the folder changed since it was checked."""
    with tarfile.open(fileobj=handle, mode="w", format=tarfile.PAX_FORMAT, dereference=True) as archive:
        for relative in data.files:
            try:
                archive.add(data.path / relative, arcname=relative, recursive=False, filter=_readable)
            except OSError as error:
                raise BadDataDir(f"--data-dir {data.path}: {relative} changed since it was checked ({error})") from None
        carried = sum(member.size for member in archive.getmembers())
    if carried != data.size:
        raise BadDataDir(f"--data-dir {data.path}: its files changed size since it was checked; run again")


def _readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mode |= 0o444
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


@contextmanager
def archive_file(data: DataDir) -> Iterator[BinaryIO]:
    """The archive in a file without a name (freed however this process ends), rewound for reading."""
    with tempfile.TemporaryFile(suffix=".tar") as handle:
        write_archive(data, handle)
        handle.flush()
        handle.seek(0)
        yield handle


def chunks(handle: BinaryIO) -> Iterator[bytes]:
    return iter(lambda: handle.read(CHUNK_BYTES), b"")


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value, unit = size / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"
