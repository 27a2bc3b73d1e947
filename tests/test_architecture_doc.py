"""docs/architecture.md against the code: its module map names every module there is and none that is gone, and
the layers it states are the import contract `make lint` enforces."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
PACKAGES = ("benchmarks", "records", "estimator", "report", "orchestrate", "campaign")
MAP_HEADING = "## Module map"


def code_modules() -> set[str]:
    """Every module and subpackage of the product and the campaign's tools, as dotted names; the workloads as their
    registries (one module each, all alike: the Keras ones and the native twins) and the entry points (`__main__`)
    left out."""
    found = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if "__pycache__" in parts or parts[-1] == "__main__":
                continue
            workload = parts[:2] == ["benchmarks", "workloads"] and len(parts) >= 3 and parts[-1] != "__init__"
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if len(parts) > 1 and not workload:  # a package of workloads is named, its workloads are not
                found.add(".".join(parts))
    return found


def _map_section() -> str:
    text = DOC.read_text()
    start = text.index(MAP_HEADING)
    end = text.find("\n## ", start + len(MAP_HEADING))
    return text[start : end if end != -1 else len(text)]


def documented_modules() -> set[str]:
    return set(re.findall(r"^- `([a-z_][\w.]*)`", _map_section(), flags=re.MULTILINE))


def test_the_module_map_names_every_module_and_no_other() -> None:
    code, documented = code_modules(), documented_modules()
    assert not code - documented, f"modules missing from {MAP_HEADING}: {sorted(code - documented)}"
    assert not documented - code, f"{MAP_HEADING} names modules that do not exist: {sorted(documented - code)}"


def test_each_package_of_the_map_is_under_its_own_heading() -> None:
    section = _map_section()
    for package in PACKAGES:
        heading = f"### `{package}`"
        assert heading in section
        block = section.split(heading, 1)[1].split("\n### ", 1)[0]
        names = re.findall(r"^- `([\w.]+)`", block, flags=re.MULTILINE)
        assert names and all(name.startswith(f"{package}.") for name in names), (package, names)


def test_the_stated_layers_are_the_import_contract() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c["type"] == "layers"]
    assert " > ".join(f"`{layer}`" for layer in layers) in DOC.read_text()
    assert {c["type"] for c in contracts} >= {"layers", "acyclic_siblings", "forbidden"}


def test_no_product_package_may_import_the_campaign() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [forbidden] = [c for c in contracts if c["type"] == "forbidden"]
    assert set(forbidden["source_modules"]) == set(PACKAGES) - {"campaign"}
    assert forbidden["forbidden_modules"] == ["campaign"]
