"""The workloads one command knows: the built-in ones and the user's (a `--workload-file`, an installed entry point),
each with its declared SPEC, its module's source file and that file's sha256.

Built once where a command starts (`workloads_of`) and passed to what plans, estimates and runs. Building it imports
no workload module and no framework: each SPEC's literals are read from its module's source (`read_declared`, the
one reader of a SPEC without importing it), so that the orchestrator and the estimator plan without Keras. A module
is imported only where it trains or is checked (`Workload.load`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import io
import tokenize
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks import plugins
from benchmarks import workloads as builtin
from benchmarks.metadata import WorkloadSource
from benchmarks.plugins import ENTRY_POINT, ENTRY_POINT_GROUP, FILE, NAME_PATTERN, BadWorkload, checked_file
from benchmarks.workloads import WORKLOADS, Cut, UnknownWorkload

CUTS = ("quick", "short", "bounded")


@dataclass(frozen=True)
class Declared:
    """A workload module's SPEC literals, read from its source: what planning and the estimate need of it."""

    name: str
    epochs: int  # the full run's
    batch_size: int
    cuts: Mapping[str, Cut | None]  # the suites' cuts it declares ("quick", "short", "bounded")
    train_samples: int | None  # SPEC.shapes.train_samples, where declared (a plug-in's full epoch)


@dataclass(frozen=True)
class Workload:
    name: str
    spec: Declared
    path: Path  # its module's source file
    sha256: str  # of that file
    source: WorkloadSource | None  # where a plug-in came from, as its runs record it (`plugin`); None: built in
    module_name: str | None = None  # the module to import (a built-in's, an entry point's); None: a file's

    @property
    def built_in(self) -> bool:
        return self.source is None

    def load(self) -> ModuleType:
        """The module the runner trains: a built-in one as it is, a plug-in's checked against the contract and
        adapted (benchmarks.plugins). Imports Keras with it: set KERAS_BACKEND first."""
        if self.built_in:
            assert self.module_name is not None
            return importlib.import_module(self.module_name)
        if self.module_name is None:
            return plugins.import_file(self.path)
        return plugins.import_entry_point(self.module_name, f"{self.name} ({self.module_name})")


@dataclass(frozen=True)
class Workloads:
    """Every workload a command may name: the built-in ones first, then the user's in the order given."""

    members: tuple[Workload, ...]

    def __getitem__(self, name: str) -> Workload:
        for workload in self.members:
            if workload.name == name:
                return workload
        raise UnknownWorkload(f"unknown workload {name!r}; choose from {', '.join(self.names)}")

    def __contains__(self, name: object) -> bool:
        return any(w.name == name for w in self.members)

    def __iter__(self) -> Iterator[Workload]:
        return iter(self.members)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(w.name for w in self.members)

    @property
    def plugins(self) -> tuple[Workload, ...]:
        """The user's workloads: files and entry points."""
        return tuple(w for w in self.members if not w.built_in)

    @property
    def files(self) -> tuple[Workload, ...]:
        """The user's workload files (`--workload-file`), in the order given."""
        return tuple(w for w in self.plugins if w.module_name is None)


@cache
def built_in() -> Workloads:
    """The suite's own workloads, read from this package's sources."""
    folder = Path(builtin.__file__).parent
    return Workloads(tuple(_built_in(name, folder / f"{name}.py") for name in WORKLOADS))


def workloads_of(files: Sequence[str | Path] = (), entry_points: Sequence[str] = ()) -> Workloads:
    """The built-in workloads, the workload files given and the installed entry points named (but those a file
    declares: the file wins, as the user gave it), each read without importing it; BadWorkload names the first that
    cannot be one, or two files that would share a name."""
    given = [_file(path) for path in files]
    mine = [*given, *(_entry_point(name) for name in entry_points if name not in {w.name for w in given})]
    for what, values in (("file name", [w.path.name for w in given]), ("SPEC.name", [w.name for w in given])):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise BadWorkload(f"--workload-file: two workloads with the {what} {repeated[0]}; give each once")
    return Workloads((*built_in().members, *mine))


def installed_names() -> list[str]:
    """The workloads installed packages register (entry points), by name."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _built_in(name: str, path: Path) -> Workload:
    spec = read_declared(path, f"benchmarks.workloads.{name}")
    if spec.name != name:
        raise BadWorkload(f"benchmarks.workloads.{name}: SPEC.name is {spec.name!r}")
    return Workload(name, spec, path, sha256_of(path), None, f"benchmarks.workloads.{name}")


def _file(given: str | Path) -> Workload:
    path = checked_file(given).resolve()
    spec = _plugin_spec(path, path.name)
    return Workload(spec.name, spec, path, sha256_of(path), WorkloadSource(FILE, path.name, sha256_of(path)))


def _entry_point(name: str) -> Workload:
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise BadWorkload(f"no workload entry point named {name!r} in group {ENTRY_POINT_GROUP}")
    entry = found[0]
    module_name = entry.value.partition(":")[0]
    try:  # imports its parent packages, not the module itself
        origin = importlib.util.find_spec(module_name)
    except Exception as exc:  # broad on purpose: whatever the user's package raises is one line naming it
        raise BadWorkload(f"workload {name} ({entry.value}) is not found: {type(exc).__name__}: {exc}") from exc
    path = Path(origin.origin) if origin is not None and origin.origin else None
    if path is None or not path.is_file():
        raise BadWorkload(f"workload {name} ({entry.value}) has no module file to record")
    spec = _plugin_spec(path, f"workload {name} ({entry.value})")
    if spec.name != name:
        raise BadWorkload(f"workload entry point {name!r} ({entry.value}) declares SPEC.name={spec.name!r}")
    dist = f"{entry.dist.name} {entry.dist.version}" if entry.dist is not None else None
    source = WorkloadSource(ENTRY_POINT, path.name, sha256_of(path), f"{name} = {entry.value}", dist)
    return Workload(name, spec, path, source.sha256, source, module_name)


def _plugin_spec(path: Path, where: str) -> Declared:
    spec = read_declared(path, where)
    if not NAME_PATTERN.fullmatch(spec.name):
        raise BadWorkload(f"{where}: SPEC.name {spec.name!r}: use lower-case letters, digits and '_', a letter first")
    if spec.name in WORKLOADS:
        raise BadWorkload(f"{where}: SPEC.name {spec.name!r} is a built-in workload's; choose another name")
    return spec


# ---- the one reader of a SPEC without importing its module ------------------------------------------------------


def read_declared(path: Path, where: str) -> Declared:
    """The name, epochs, batch size, cuts and declared sample count of a module's `SPEC = WorkloadSpec(...)`, each a
    literal in its source; BadWorkload names the first that is not, or a file that is no Python source."""
    call = _spec_call(_parsed(path, where), where)
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    values: dict[str, Any] = {}
    for name in ("name", "epochs", "batch_size"):
        if name not in keywords:
            raise BadWorkload(f"{where}: SPEC = WorkloadSpec(...) has no {name}=")
        values[name] = _literal(keywords[name], f"{where}: SPEC.{name}")
    if not isinstance(values["name"], str):
        raise BadWorkload(f"{where}: SPEC.name {values['name']!r}: expected a string")
    for name in ("epochs", "batch_size"):
        if not isinstance(values[name], int) or isinstance(values[name], bool) or values[name] < 1:
            raise BadWorkload(f"{where}: SPEC.{name} {values[name]!r}: expected a positive integer")
    cuts = {name: _cut(keywords[name], f"{where}: SPEC.{name}") for name in CUTS if name in keywords}
    return Declared(values["name"], values["epochs"], values["batch_size"], cuts, _train_samples(keywords, where))


def _parsed(path: Path, where: str) -> ast.Module:
    text = _source_text(path, where)
    try:
        return ast.parse(text, filename=path.name)
    except SyntaxError as exc:
        raise BadWorkload(f"{where} does not import: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # a NUL byte in the source
        raise BadWorkload(f"{where} is not Python source: {exc}") from None


def _source_text(path: Path, where: str) -> str:
    """The file's text in the encoding Python reads it in (UTF-8 unless it declares another)."""
    raw = path.read_bytes()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if str(exc).startswith("unknown encoding"):
            raise BadWorkload(f"{where}: {exc}; save it as UTF-8") from None
        encoding = "utf-8"  # what is not UTF-8 is said below, where
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BadWorkload(
            f"{where} is not {encoding} text: byte {raw[exc.start]:#04x} at offset {exc.start}; save it as UTF-8"
        ) from None


def _spec_call(tree: ast.Module, where: str) -> ast.Call:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            return node.value
    raise BadWorkload(f"{where}: missing SPEC (a module-level `SPEC = WorkloadSpec(...)`; docs/workloads.md)")


def _literal(node: ast.expr, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise BadWorkload(f"{where}: write it as a literal, not {ast.unparse(node)}") from None


def _cut(node: ast.expr, where: str) -> Cut | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if not isinstance(node, ast.Call):
        raise BadWorkload(f"{where}: write it as Cut(...) with literal values, not {ast.unparse(node)}")
    named = {k.arg: _literal(k.value, where) for k in node.keywords if k.arg}
    positional = dict(zip([f.name for f in fields(Cut)], [_literal(a, where) for a in node.args], strict=False))
    try:
        return Cut(**positional, **named)
    except TypeError as exc:
        raise BadWorkload(f"{where}: {exc}") from None


def _train_samples(keywords: Mapping[str, ast.expr], where: str) -> int | None:
    shapes = keywords.get("shapes")
    if not isinstance(shapes, ast.Call):
        return None
    for keyword in shapes.keywords:
        if keyword.arg == "train_samples":
            value = _literal(keyword.value, f"{where}: SPEC.shapes.train_samples")
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BadWorkload(f"{where}: SPEC.shapes.train_samples {value!r}: expected a positive integer")
            return value
    return None
