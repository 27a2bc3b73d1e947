"""The catalog of machine profiles (provider, machine type, accelerator, zones, image, prices, billing rules).

The project's profiles live in `records/catalog.toml`; this module loads and validates it. Validation names
the profile and the field, so a bad entry fails before anything is launched.

`load_catalogs` adds profiles from outside the project, merged in this order: catalogs that installed packages
ship through the entry-point group `keras_cloud_bench.catalogs` (the entry point names a path, or a function
returning one), the user's `$XDG_CONFIG_HOME/keras-cloud-bench/catalog.toml` (default `~/.config/...`), the files
in `$KCB_CATALOG` (separated by `:`) and `--catalog FILE`. A profile name defined twice is an error naming both
files: a catalog adds profiles, it never silently replaces one. A plug-in's catalog that cannot be used (its
entry point fails to load, its file is invalid, a name clashes) is left out with one warning line naming the
plug-in and its package, so a broken package never stops runs on the other profiles.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

DEFAULT_CATALOG = Path(__file__).with_name("catalog.toml")
CATALOG_ENV = "KCB_CATALOG"
ENTRY_POINT_GROUP = "keras_cloud_bench.catalogs"
PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")  # also a make target suffix and a log folder name
DOCKER_IMAGES = ("cpu", "gpu")
MARKETS = ("on_demand", "spot")


# The dearest machine a cloud rents by the hour costs a few hundred dollars (AWS u7in-32tb.224xlarge, about $407
# on demand in 2025): a price above these is a typo (a month's price, cents as dollars) or not a price at all, as
# 1e308 is, which plans `$inf`. Generous, so that no real price is refused.
MAX_USD_PER_HOUR = 1000.0  # one machine (a Slurm gpu-hour: one GPU)
MAX_USD_PER_MACHINE = 1_000_000.0  # buying one machine (an 8-GPU server is a few hundred thousand)
MAX_USD_PER_KWH = 10.0  # electricity (retail prices are under one dollar)


def price_problem(value: object, ceiling: float = MAX_USD_PER_HOUR) -> str | None:
    """Why `value` is not a usable price: not a finite number > 0, or above `ceiling`; None when it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return f"must be a finite number > 0, got {value!r}"
    if value > ceiling:
        return f"{value:g} is not plausible (at most {ceiling:g})"
    return None


class CatalogError(ValueError):
    """A catalog entry that cannot be used; the message names the file, the profile and the field."""


class UnknownProfileError(CatalogError):
    """A profile name that is not in the catalog; the message lists close names."""


class RetiredProfileError(CatalogError):
    """A profile whose machine type the provider no longer offers; the message names the replacement."""


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    date: str  # ISO date the price was read
    source: str  # where it was read (URL or document)


@dataclass(frozen=True)
class PricePoint:
    """A price that was in force at some date (published studies priced their runs with these)."""

    market: str  # "on_demand" or "spot"
    price: Price


@dataclass(frozen=True)
class Profile:
    name: str  # e.g. "gce-t4", "aws-p2.xlarge", "local", "ssh"
    provider: str  # entry-point name: "aws", "gce", "ssh", "local", or a plugin's
    machine_type: str | None  # "n1-standard-4", "g4dn.xlarge"; None for local/ssh
    accelerator: str | None = None  # "nvidia-tesla-t4" (GCE accelerator type) / "T4" (AWS: informational)
    accelerator_count: int = 0
    zones: tuple[str, ...] = ()  # tried in order on capacity errors; AWS zones imply their regions
    # GCE image family "projects/P/global/images/family/F"; AWS AMI id or SSM parameter
    image: str | None = None
    ssh_user: str | None = None
    on_demand: Price | None = None
    spot: Price | None = None
    use_spot: bool = False  # the profile's default market
    billing_increment_s: int = 1
    billing_minimum_s: int = 60
    retired: bool = False
    retired_on: str | None = None
    replacement: str | None = None  # profile name to use instead
    docker_image: str = "cpu"  # which of this project's images runs there: "cpu" or "gpu"
    notes: str = ""
    extra: dict[str, str] = field(default_factory=dict)  # provider-specific settings (e.g. disk size)
    description: str = ""  # one line for listings: what the machine is
    price_history: tuple[PricePoint, ...] = ()  # earlier prices, oldest first (the published studies used)

    @property
    def has_gpu(self) -> bool:
        return self.accelerator_count > 0

    def billed_seconds(self, seconds: float) -> int:
        """Seconds billed for `seconds` of use: rounded up to the increment, at least the minimum."""
        if seconds <= 0:
            return 0
        increments = math.ceil(seconds / self.billing_increment_s)
        return max(self.billing_minimum_s, increments * self.billing_increment_s)

    def hourly_price(self, spot: bool | None = None) -> Price | None:
        use_spot = self.use_spot if spot is None else spot
        return self.spot if use_spot else self.on_demand

    def cost_usd(self, seconds: float, spot: bool | None = None) -> float | None:
        """Cost of one machine used for `seconds` under this profile's billing rules; None without a price.

        Catalog prices are per machine, accelerators included.
        """
        price = self.hourly_price(spot)
        if price is None:
            return None
        return self.billed_seconds(seconds) * price.usd_per_hour / 3600


def load_catalog(path: Path | str | None = None) -> dict[str, Profile]:
    """Read and validate one catalog file (the project's by default); CatalogError names the profile and field."""
    path = Path(path) if path is not None else DEFAULT_CATALOG
    profiles = _read_catalog(path)
    _check_replacements(path, profiles)
    return profiles


def load_catalogs(extra: Iterable[Path | str] = ()) -> dict[str, Profile]:
    """The project's catalog merged with plug-in, user, $KCB_CATALOG and `extra` (--catalog) ones."""
    merged = load_catalog()
    origin = dict.fromkeys(merged, DEFAULT_CATALOG)
    plugins: list[tuple[Any, Path, dict[str, Profile]]] = []
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            path = _plugin_catalog(entry)
            profiles = _read_catalog(path)
            _merge(merged, origin, path, profiles)
            plugins.append((entry, path, profiles))
        except CatalogError as exc:  # the plug-in's fault: its profiles are left out, the others work
            _warn_once(f"warning: {exc}; {_package_of(entry)}'s profiles are left out")
    _leave_out_broken_replacements(merged, origin, plugins)
    for path in catalog_sources(extra):
        _merge(merged, origin, path, _read_catalog(path))
    _check_replacements(Path("the merged catalogs"), merged)
    return merged


def _leave_out_broken_replacements(
    merged: dict[str, Profile], origin: dict[str, Path], plugins: list[tuple[Any, Path, dict[str, Profile]]]
) -> None:
    """A plug-in whose retired profile names a replacement that no loaded catalog has is the plug-in's fault: its
    profiles are left out, never the whole merge stopped. Leaving one out can strand another plug-in's
    replacement, so the check repeats until every remaining plug-in passes."""
    remaining = list(plugins)
    while True:
        for entry, path, profiles in remaining:
            try:
                _check_replacements(path, profiles, known=merged)
            except CatalogError as exc:
                _warn_once(f"warning: {exc}; {_package_of(entry)}'s profiles are left out")
                for name in profiles:
                    del merged[name]
                    del origin[name]
                remaining.remove((entry, path, profiles))
                break
        else:
            return


def _merge(merged: dict[str, Profile], origin: dict[str, Path], path: Path, profiles: dict[str, Profile]) -> None:
    """Add `profiles` (all or none) from `path`; a name already defined is an error naming both files."""
    for name in profiles:
        if name in merged:
            raise CatalogError(f"profile '{name}' is defined in both {origin[name]} and {path}: rename one of them")
    merged.update(profiles)
    origin.update(dict.fromkeys(profiles, path))


_warned: set[str] = set()  # a command loads the catalogs more than once: each warning is said once


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(message, file=sys.stderr)


def user_catalog_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "keras-cloud-bench" / "catalog.toml"


def catalog_sources(extra: Iterable[Path | str] = ()) -> list[Path]:
    """The user's catalog files beyond the project's and the plug-ins', in merge order (see the module
    docstring): an error in one of these is the user's to fix, and stops the command."""
    sources = [user_catalog_path()] if user_catalog_path().is_file() else []
    sources += [Path(text).expanduser() for text in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if text]
    return sources + [Path(path).expanduser() for path in extra]


def _plugin_catalog(entry: Any) -> Path:
    try:
        value = entry.load()
        return Path(value() if callable(value) else value)
    except Exception as exc:  # broad on purpose: any plug-in failure is one line naming the plug-in
        raise CatalogError(
            f"catalog plug-in '{entry.name}' ({entry.value}) cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc


def _package_of(entry: Any) -> str:
    dist = getattr(entry, "dist", None)
    return f"package {dist.name} {dist.version}" if dist is not None else f"plug-in '{entry.name}'"


def _read_catalog(path: Path) -> dict[str, Profile]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read the catalog ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:  # a binary file, or text in another encoding: TOML is UTF-8
        raise CatalogError(f"{path}: not a TOML catalog (byte {exc.start} is not UTF-8)") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: not valid TOML ({exc})") from exc
    unknown = set(data) - {"profiles"}
    if unknown:
        keys = ", ".join(sorted(unknown))
        raise CatalogError(f"{path}: unknown top-level key(s) {keys}; expected [profiles.*]")
    raw_profiles = data.get("profiles")
    if not isinstance(raw_profiles, dict) or not raw_profiles:
        raise CatalogError(f"{path}: no [profiles.<name>] tables")
    return {name: _parse_profile(path, name, raw) for name, raw in raw_profiles.items()}


def get_profile(catalog: Mapping[str, Profile], name: str, allow_retired: bool = False) -> Profile:
    """The named profile; a one-line error lists close names, or names the replacement of a retired one."""
    profile = catalog.get(name)
    if profile is None:
        close = difflib.get_close_matches(name, list(catalog), n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(catalog))}"
        raise UnknownProfileError(f"unknown profile '{name}'{hint}")
    if profile.retired and not allow_retired:
        raise RetiredProfileError(
            f"profile '{name}' is retired ({profile.provider} retired it on {profile.retired_on}); "
            f"use '{profile.replacement}' instead, or pass --allow-retired to try anyway"
        )
    return profile


def runs_as(catalog: Mapping[str, Profile], name: str, allow_retired: bool = False) -> Profile:
    """The profile that runs when `name` is asked for, on `run --profile` and `run --profiles` alike: the profile
    itself, or, when its machine type is retired, its catalog `replacement` (today's nearest machine) unless
    `allow_retired`. The caller says so before anything is launched (`retired_notice`)."""
    profile = get_profile(catalog, name, allow_retired=True)
    if profile.retired and not allow_retired:
        return get_profile(catalog, profile.replacement or "")
    return profile


def retired_notice(profile: Profile) -> str:
    """One line saying that a retired profile's replacement runs in its place, and how to try it anyway."""
    return (
        f"{profile.name} (retired {profile.retired_on}) -> {profile.replacement}: {profile.provider} no longer offers "
        f"{profile.name}, so its catalog replacement runs in its place (--allow-retired tries {profile.name} anyway)"
    )


# ---- parsing ---------------------------------------------------------------------------------------------

_SCALARS: dict[str, tuple[type, ...]] = {
    "provider": (str,),
    "machine_type": (str,),
    "accelerator": (str,),
    "accelerator_count": (int,),
    "image": (str,),
    "ssh_user": (str,),
    "use_spot": (bool,),
    "billing_increment_s": (int,),
    "billing_minimum_s": (int,),
    "retired": (bool,),
    "retired_on": (str,),
    "replacement": (str,),
    "docker_image": (str,),
    "notes": (str,),
    "description": (str,),
}
_STRUCTURED = {"zones", "on_demand", "spot", "extra", "price_history"}
_ALLOWED = set(_SCALARS) | _STRUCTURED
_PROFILE_FIELDS = {f.name for f in fields(Profile)} - {"name"}
assert _ALLOWED == _PROFILE_FIELDS, "catalog parser and Profile fields disagree"


def _parse_profile(path: Path, name: str, raw: Any) -> Profile:
    def fail(field_name: str, problem: str) -> CatalogError:
        return CatalogError(f"{path}: profile '{name}': field '{field_name}': {problem}")

    if not PROFILE_NAME.match(name):
        raise CatalogError(f"{path}: profile '{name}': name must match {PROFILE_NAME.pattern}")
    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: profile '{name}': expected a table")
    unknown = sorted(set(raw) - _ALLOWED)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(_ALLOWED), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise fail(unknown[0], f"unknown field{hint}")
    if "provider" not in raw:
        raise fail("provider", "required")
    values: dict[str, Any] = {}
    for key, types in _SCALARS.items():
        if key in raw:
            # bool is an int subclass: refuse `accelerator_count = true` and the like
            if not isinstance(raw[key], types) or (bool not in types and isinstance(raw[key], bool)):
                raise fail(key, f"expected {types[0].__name__}, got {type(raw[key]).__name__}")
            values[key] = raw[key]
    values.setdefault("machine_type", None)  # local and ssh profiles have none; providers check their needs
    values["zones"] = _parse_zones(raw.get("zones", []), fail)
    values["extra"] = _parse_extra(raw.get("extra", {}), fail)
    for market in MARKETS:
        if market in raw:
            values[market] = _parse_price(raw[market], market, fail)
    values["price_history"] = _parse_history(raw.get("price_history", []), fail)
    profile = Profile(name=name, **values)
    _check_profile(profile, fail)
    return profile


def _parse_zones(raw: Any, fail: Callable[[str, str], CatalogError]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(z, str) and z for z in raw):
        raise fail("zones", "expected a list of non-empty strings")
    if len(set(raw)) != len(raw):
        raise fail("zones", "lists a zone twice")
    return tuple(raw)


def _parse_extra(raw: Any, fail: Callable[[str, str], CatalogError]) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise fail("extra", "expected a table of strings")
    return dict(raw)


def _parse_price(raw: Any, field_name: str, fail: Callable[[str, str], CatalogError]) -> Price:
    if not isinstance(raw, dict):
        raise fail(field_name, "expected a table {usd_per_hour, date, source}")
    missing = {"usd_per_hour", "date", "source"} - set(raw)
    extra = set(raw) - {"usd_per_hour", "date", "source"}
    if missing or extra:
        wrong = missing or extra
        problem = f"{'missing' if missing else 'unknown'} {', '.join(sorted(wrong))}"
        raise fail(field_name, f"{problem}; a price is {{usd_per_hour, date, source}}")
    usd = raw["usd_per_hour"]
    refused = price_problem(usd)
    if refused is not None:
        raise fail(field_name, f"usd_per_hour {refused}")
    if not isinstance(raw["date"], str) or not _is_iso_date(raw["date"]):
        raise fail(field_name, f"date must be an ISO date YYYY-MM-DD, got {raw['date']!r}")
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise fail(field_name, "source must name where the price was read (URL or document)")
    return Price(usd_per_hour=float(usd), date=raw["date"], source=raw["source"])


def _parse_history(raw: Any, fail: Callable[[str, str], CatalogError]) -> tuple[PricePoint, ...]:
    if not isinstance(raw, list):
        raise fail("price_history", "expected an array of tables [[profiles.<name>.price_history]]")
    points = []
    for index, entry in enumerate(raw):
        label = f"price_history[{index}]"
        if not isinstance(entry, dict) or entry.get("market") not in MARKETS:
            raise fail(label, f"market must be one of {', '.join(MARKETS)}")
        price = _parse_price({k: v for k, v in entry.items() if k != "market"}, label, fail)
        points.append(PricePoint(market=entry["market"], price=price))
    dates = [p.price.date for p in points]
    if dates != sorted(dates):
        raise fail("price_history", "entries must be in date order, oldest first")
    return tuple(points)


def _check_profile(profile: Profile, fail: Callable[[str, str], CatalogError]) -> None:
    if profile.accelerator_count < 0:
        raise fail("accelerator_count", "must be >= 0")
    if profile.accelerator_count and not profile.accelerator:
        raise fail("accelerator", "required when accelerator_count > 0")
    if profile.docker_image not in DOCKER_IMAGES:
        raise fail("docker_image", f"must be one of {', '.join(DOCKER_IMAGES)}")
    if profile.has_gpu != (profile.docker_image == "gpu"):
        raise fail("docker_image", "GPU profiles run the gpu image and CPU profiles the cpu image")
    if profile.billing_increment_s < 1:
        raise fail("billing_increment_s", "must be >= 1")
    if profile.billing_minimum_s < 0:
        raise fail("billing_minimum_s", "must be >= 0")
    if profile.use_spot and profile.spot is None:
        raise fail("use_spot", "the profile defaults to spot but has no spot price")
    if profile.retired:
        if not profile.retired_on or not _is_iso_date(profile.retired_on):
            raise fail("retired_on", "a retired profile needs the ISO date (YYYY-MM-DD) it was retired")
        if not profile.replacement:
            raise fail("replacement", "a retired profile must name the profile to use instead")
    elif profile.retired_on or profile.replacement:
        raise fail("retired", "retired_on/replacement are set but retired is false")


def _check_replacements(path: Path, profiles: dict[str, Profile], known: Mapping[str, Profile] | None = None) -> None:
    """Each retired profile of `profiles` names a live replacement among `known` (default: `profiles` itself)."""
    known = profiles if known is None else known
    for profile in profiles.values():
        if not profile.retired:
            continue
        target = known.get(profile.replacement or "")
        if target is None:
            raise CatalogError(
                f"{path}: profile '{profile.name}': field 'replacement': no profile named '{profile.replacement}'"
            )
        if target.retired:
            raise CatalogError(
                f"{path}: profile '{profile.name}': field 'replacement': '{target.name}' is itself retired"
            )


def _is_iso_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10
