"""Dataset files: where they come from, their checksums, and where they are looked for.

Lookup order for each file: the offline data directory (`--data-dir` / `BENCH_DATA_DIR`), then Keras's own cache
(`$KERAS_HOME/datasets`, default `~/.keras/datasets`), then a download through `keras.utils.get_file` unless offline
(`--offline` / `BENCH_OFFLINE=1`). Every file is checked against its pinned SHA-256 before use.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

KERAS_DATASETS = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


class DatasetUnavailable(RuntimeError):
    """A real dataset file is missing (offline) or could not be downloaded; the message says how to supply it."""


class ChecksumMismatch(DatasetUnavailable):
    """A dataset file exists but is not the expected bytes."""


@dataclass(frozen=True)
class DatasetFile:
    relpath: str  # path under the datasets directory, as Keras caches it
    url: str
    sha256: str


FILES: dict[str, tuple[DatasetFile, ...]] = {
    "mnist": (
        DatasetFile(
            "mnist.npz",
            KERAS_DATASETS + "mnist.npz",
            "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1",
        ),
    ),
    # Zalando's published MD5s identify these bytes; Keras itself checks no hash for them.
    "fashion_mnist": tuple(
        DatasetFile(f"fashion-mnist/{name}", KERAS_DATASETS + name, sha)
        for name, sha in (
            ("train-images-idx3-ubyte.gz", "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
            ("train-labels-idx1-ubyte.gz", "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
            ("t10k-images-idx3-ubyte.gz", "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
            ("t10k-labels-idx1-ubyte.gz", "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"),
        )
    ),
    "imdb": (
        DatasetFile(
            "imdb.npz",
            KERAS_DATASETS + "imdb.npz",
            "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f",
        ),
    ),
    "cifar10": (
        DatasetFile(
            "cifar-10-python.tar.gz",
            "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
            "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        ),
    ),
    # Nobody publishes a hash for this file; this is the SHA-256 of the upstream bytes (600,901 bytes).
    "nietzsche": (
        DatasetFile(
            "nietzsche.txt",
            "https://s3.amazonaws.com/text-datasets/nietzsche.txt",
            "23cf69874ab69d3d256099ab530ea4be24d47d9675b673bcc67cbcd6298ec647",
        ),
    ),
}


@dataclass(frozen=True)
class FileLocations:
    cache_dir: Path  # $KERAS_HOME/datasets
    data_dir: Path | None  # offline folder searched first
    offline: bool

    @classmethod
    def from_env(cls, data_dir: str | None = None, offline: bool | None = None) -> FileLocations:
        keras_home = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")).expanduser()
        data_dir = data_dir or os.environ.get("BENCH_DATA_DIR") or None
        if offline is None:
            offline = os.environ.get("BENCH_OFFLINE", "") not in ("", "0", "false", "no")
        return cls(keras_home / "datasets", Path(data_dir).expanduser() if data_dir else None, offline)

    @property
    def folders(self) -> list[Path]:
        """Where files are looked for, in order: the offline data folder, then the cache."""
        return [f for f in (self.data_dir, self.cache_dir) if f is not None]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path, spec: DatasetFile) -> Path:
    actual = sha256_of(path)
    if actual != spec.sha256:
        raise ChecksumMismatch(
            f"{path}: sha256 {actual[:16]}... is not the expected {spec.sha256[:16]}... for {spec.relpath}; "
            f"delete it and supply the original from {spec.url}"
        )
    return path


def _candidates(spec: DatasetFile, where: FileLocations) -> list[Path]:
    paths = []
    if where.data_dir is not None:
        # Accept both the cache layout (fashion-mnist/x.gz) and a flat folder of downloads (x.gz).
        paths += [where.data_dir / spec.relpath, where.data_dir / Path(spec.relpath).name]
    paths.append(where.cache_dir / spec.relpath)
    return paths


def resolve(spec: DatasetFile, where: FileLocations) -> Path:
    """The verified local path of `spec`, downloading it into the cache when allowed."""
    for path in _candidates(spec, where):
        if path.is_file():
            return _verified(path, spec)
    if where.offline:
        searched = ", ".join(str(p.parent) for p in _candidates(spec, where))
        raise DatasetUnavailable(
            f"{spec.relpath}: not found offline (searched {searched}); download {spec.url} "
            f"(sha256 {spec.sha256[:16]}...) into --data-dir or {where.cache_dir}"
        )
    return _verified(_download(spec, where), spec)


def _download(spec: DatasetFile, where: FileLocations) -> Path:
    from keras.utils import get_file  # Keras's downloader: retries, progress, atomic rename

    target = where.cache_dir / spec.relpath
    try:
        return Path(
            get_file(
                fname=target.name,
                origin=spec.url,
                cache_dir=str(where.cache_dir.parent),
                cache_subdir=str(target.parent.relative_to(where.cache_dir.parent)),
                file_hash=spec.sha256,
                hash_algorithm="sha256",
            )
        )
    except Exception as exc:  # get_file raises bare Exception on network errors
        raise DatasetUnavailable(
            f"{spec.relpath}: download from {spec.url} failed ({str(exc).splitlines()[0]}); "
            f"put the file (sha256 {spec.sha256[:16]}...) into --data-dir or {where.cache_dir}"
        ) from exc


def resolve_dataset(name: str, where: FileLocations) -> dict[str, Path]:
    """All files of a dataset, keyed by their cache-relative path."""
    return {spec.relpath: resolve(spec, where) for spec in FILES[name]}


def file_records(name: str) -> list[dict[str, str]]:
    """What the metadata records about a dataset's files: the checked name and hash of each."""
    return [{"name": spec.relpath, "sha256": spec.sha256, "url": spec.url} for spec in FILES[name]]
