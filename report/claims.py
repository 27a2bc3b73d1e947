"""The published studies' headline figures and claims, each checked against the study's own data and, where the
report has them, today's runs.

Claims are data (report/data/claims/<study>.toml, one file per study, see its README.md): a quote, where it
appears, the published figure, and expressions in a small vocabulary over the study's published rows, prices and
inputs. One checker (`check_claims`) turns every file into figures and a verdict; adding a claim needs no code.

Verdicts: the recomputed figure lies within `EXACT` of the published one ("holds") or within the claim's own
rounding tolerance ("holds, rounded": the post said "about" or "roughly"); otherwise it "does not follow from the
published inputs". A claim that holds on the study's data but not on today's runs is "contradicted by today's
runs"; one without an expression "cannot be tested here", with the reason.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import math
import re
import statistics
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.stats import FASTER, TOO_FEW, Comparison, compare
from estimator import DATA_DIR
from estimator.published import load_studies
from report.costs import load_catalog_profiles
from report.owned import load_owned
from report.studies import published_results

CLAIMS_DIR = DATA_DIR / "claims"
HOLDS, ROUNDED, NOT_FOLLOW, CONTRADICTED, UNTESTABLE = (
    "holds",
    "holds, rounded",
    "does not follow from the published inputs",
    "contradicted by today's runs",
    "cannot be tested here",
)
VERDICTS = (HOLDS, ROUNDED, NOT_FOLLOW, CONTRADICTED, UNTESTABLE)
# A recomputed figure equal to the published one up to float noise and the last printed digit of a ratio.
EXACT = 0.005
UNITS = ("", "x", "%", "USD", "GBP", "days", "USD/h", "GBP/h")
Figure = float | bool | str | tuple[float, float]


class ClaimDataError(ValueError):
    """A bad claims file; the message names the file, the claim and the field."""


class Unavailable(LookupError):
    """A figure the data cannot give (no such run or configuration); the message says what is missing."""


@dataclass(frozen=True)
class Claim:
    study: str
    id: str
    quote: str
    where: str
    verbatim: bool  # False: the claim in substance, not the post's words
    published: Figure
    published_text: str
    unit: str
    rounded_within: float  # relative; 0: the figure is given exactly
    figure: str | None  # expression over the study's data
    details: tuple[tuple[str, str, str], ...]  # (label, expression, unit) shown beside the figure
    measured: str | None  # expression over today's runs
    untestable: str  # why the claim cannot be tested here, if it cannot
    inputs: Mapping[str, Any]
    runs: tuple[str, str] | None = None  # (candidate, base) images whose runs on one machine test the claim


@dataclass(frozen=True)
class Checked:
    claim: Claim
    figure: Figure | None
    details: tuple[str, ...]
    measured: str  # today's figure in words, or why there is none
    verdict: str
    reason: str
    runs_verdict: str = ""  # what the user's runs of the claim's configurations say, where they have both


# (workload, configuration label) -> each repeat's total training seconds and its machine: what a claim's runs compare
Totals = Callable[[str, str], tuple[list[float], list[str]]]
RUNS_HOLD, RUNS_CONTRADICT, RUNS_CANNOT_TELL = (
    "holds on our runs",
    "contradicted by our runs",
    "our runs cannot tell",
)


def load_claims(root: Path = CLAIMS_DIR) -> dict[str, list[Claim]]:
    """Every claims file, by study name (the file's stem)."""
    return {path.stem: _load_file(path) for path in sorted(root.glob("*.toml"))}


def _load_file(path: Path) -> list[Claim]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ClaimDataError(f"{path}: cannot read ({exc})") from exc
    inputs = data.get("inputs", {})
    claims = [_claim(path, inputs, entry) for entry in data.get("claims", [])]
    if not claims:
        raise ClaimDataError(f"{path}: no [[claims]]")
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ClaimDataError(f"{path}: claim ids repeat")
    return claims


def _claim(path: Path, inputs: Mapping[str, Any], entry: Mapping[str, Any]) -> Claim:
    where = f"{path}: claim {entry.get('id', '?')!r}"
    for key in ("id", "quote", "where", "published_text"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise ClaimDataError(f"{where}: field {key!r} must be a non-empty string")
    unit = entry.get("unit", "")
    if unit not in UNITS:
        raise ClaimDataError(f"{where}: field 'unit' must be one of {', '.join(map(repr, UNITS))}")
    if ("figure" in entry) == ("untestable" in entry):
        raise ClaimDataError(f"{where}: give either 'figure' (an expression) or 'untestable' (why not)")
    details = tuple(_detail_entry(where, d) for d in entry.get("details", []))
    for expression in filter(None, [entry.get("figure"), entry.get("measured"), *(e for _, e, _ in details)]):
        _parse(where, expression)
    return Claim(
        study=path.stem,
        id=entry["id"],
        quote=entry["quote"],
        where=entry["where"],
        verbatim=bool(entry.get("verbatim", True)),
        published=_published(where, entry.get("published")),
        published_text=entry["published_text"],
        unit=unit,
        rounded_within=float(entry.get("rounded_within", 0.0)),
        figure=entry.get("figure"),
        details=details,
        measured=entry.get("measured"),
        untestable=str(entry.get("untestable", "")),
        inputs=inputs,
        runs=_runs_entry(where, entry.get("runs")),
    )


def _runs_entry(where: str, entry: Any) -> tuple[str, str] | None:
    """`runs = ["keras-cloud-bench:cpu-compiled", "keras-cloud-bench:cpu"]`: the candidate and the base image."""
    if entry is None:
        return None
    if not isinstance(entry, list) or len(entry) != 2 or not all(isinstance(e, str) and e for e in entry):
        raise ClaimDataError(f"{where}: field 'runs' must be [candidate image, base image]")
    return entry[0], entry[1]


def _detail_entry(where: str, entry: Any) -> tuple[str, str, str]:
    """[label, expression] or [label, expression, unit]."""
    if not isinstance(entry, list) or len(entry) not in (2, 3) or not all(isinstance(e, str) for e in entry):
        raise ClaimDataError(f"{where}: each of 'details' must be [label, expression] or [label, expression, unit]")
    label, expression, unit = (*entry, "") if len(entry) == 2 else entry
    if unit not in UNITS:
        raise ClaimDataError(f"{where}: detail {label!r}: unit must be one of {', '.join(map(repr, UNITS))}")
    return label, expression, unit


def _published(where: str, value: Any) -> Figure:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        low, high = sorted(float(v) for v in value)
        return (low, high)
    raise ClaimDataError(f"{where}: field 'published' must be a number, [low, high], true/false or a string")


# ---- the expression vocabulary --------------------------------------------------------------------------------

# Python's own expression syntax, cut down to arithmetic, comparisons, calls of the vocabulary's functions and
# comprehensions: no attributes, subscripts or lambdas, so an expression can reach nothing but its namespace.
_ALLOWED = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.Name, ast.Load, ast.Store,
    ast.Constant, ast.GeneratorExp, ast.ListComp, ast.DictComp, ast.comprehension, ast.Tuple, ast.List,
    ast.IfExp, ast.JoinedStr, ast.FormattedValue, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip


@functools.cache
def _parse(where: str, expression: str) -> Any:
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ClaimDataError(f"{where}: expression {expression!r} does not parse ({exc.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ClaimDataError(f"{where}: expression {expression!r} uses {type(node).__name__}, not allowed")
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Name):
            raise ClaimDataError(f"{where}: expression {expression!r} calls something other than a named function")
    return compile(tree, where, "eval")


def _span(values: Iterable[float]) -> tuple[float, float]:
    found = list(values)
    if not found:
        raise Unavailable("nothing to aggregate")
    return (min(found), max(found))


def _argmin(values: Mapping[str, float]) -> str:
    return min(values, key=lambda k: values[k])


def _geomean(values: Iterable[float]) -> float:
    return statistics.geometric_mean(list(values))


BUILTINS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "sum": sum, "len": len, "all": all, "any": any, "abs": abs, "round": round,
    "span": _span, "argmin": _argmin, "geomean": _geomean, "median": statistics.median,
}  # fmt: skip


class _Published:
    """The published rows of the studies, as functions of a configuration label and a workload."""

    def __init__(self) -> None:
        self.studies = load_studies()

    @functools.cache  # noqa: B019 - one instance per check, the studies' tables are read once each
    def results(self, study: str) -> pd.DataFrame:
        if study not in self.studies:
            raise Unavailable(f"no published study {study!r}")
        return published_results(self.studies[study]).results

    def value(self, study: str, column: str, config: str, workload: str | None) -> float:
        rows = self.results(study)
        rows = rows[rows["config"] == config]
        if workload is not None:
            rows = rows[rows["workload"] == workload]
        if rows.empty or pd.isna(rows.iloc[0][column]):
            raise Unavailable(f"study {study!r} publishes no {column} of {config} {workload or ''}".strip())
        return float(rows.iloc[0][column])


def _study_namespace(study: str, data: _Published) -> dict[str, Any]:
    def column(name: str) -> Callable[..., float]:
        return lambda config, workload, of=study: data.value(of, name, config, workload)

    rows = data.results(study) if study in data.studies else pd.DataFrame(columns=["config", "workload"])
    return {
        "workloads": sorted(set(rows["workload"])),
        "configs": list(dict.fromkeys(rows["config"])),
        "total": column("total_s"),
        "cost": column("cost_usd"),
        "rel_time": column("rel_time"),
        "rel_cost": column("rel_cost"),
        "acc": column("final_acc"),
        "price": lambda config, of=study: data.value(of, "usd_per_hour", config, None),
        "catalog": _catalog_price,
        "owned": _owned_field,
        "rival": _rival_field,
    }


def _catalog_price(profile: str, market: str) -> float:
    profiles, problem = load_catalog_profiles()
    found = profiles.get(profile)
    price = getattr(found, market.replace("-", "_"), None) if found is not None else None
    if price is None:
        raise Unavailable(f"the catalog has no {market} price of {profile} ({problem or 'not listed'})")
    return float(price.usd_per_hour)


def _owned_field(machine: str, field: str) -> float:
    value = getattr(load_owned().get(machine), field, None)
    if not isinstance(value, int | float):
        raise Unavailable(f"owned machine {machine!r} gives no {field}")
    return float(value)


def _rival_field(machine: str, rival: str, field: str) -> float:
    owned = load_owned().get(machine)
    found = next((r for r in owned.rivals if r.name == rival), None) if owned else None
    value = getattr(found, field, None)
    if not isinstance(value, int | float):
        raise Unavailable(f"owned machine {machine!r} has no rival {rival!r} with a {field}")
    return float(value)


def _measured_namespace(results: pd.DataFrame, stand_ins: Mapping[str, str], used: set[str]) -> dict[str, Any]:
    """Today's runs by platform (the log folder: a catalog profile) and backend, median figures. A profile that
    ran in place of a retired one (`stand_ins`: requested -> used, a fan-out's replacements) stands for it; each
    stand-in used is added to `used`."""

    def column(name: str) -> Callable[..., float]:
        def value(platform: str, workload: str, backend: str = "tensorflow") -> float:
            ran = platform if platform in set(results["platform"]) else stand_ins.get(platform, platform)
            rows = results[
                (results["platform"] == ran) & (results["workload"] == workload) & (results["backend"] == backend)
            ]
            rows = rows[rows["data_source"] == "real"]
            if rows.empty or pd.isna(rows.iloc[0][name]):
                raise Unavailable(f"no {backend} run of {workload} on {platform} in these logs")
            if ran != platform:
                used.add(f"{ran} in place of {platform}")
            return float(rows.iloc[0][name])

        return value

    return {
        "m_workloads": sorted(set(results["workload"])),
        "m_steady": column("steady_epoch_s"),
        "m_total": column("total_s"),
        "m_cost": column("cost_usd"),
    }


def _evaluate(claim: Claim, expression: str, namespace: Mapping[str, Any]) -> Any:
    where = f"claims of {claim.study}: {claim.id}"
    scope = {**BUILTINS, **claim.inputs, **namespace, "published": _as_number(claim.published)}
    try:
        # One namespace as globals: comprehensions do not see eval's locals. _parse admitted only the vocabulary.
        return eval(_parse(where, expression), {**scope, "__builtins__": {}})
    except Unavailable:
        raise
    except (ArithmeticError, TypeError, ValueError, NameError, KeyError, statistics.StatisticsError) as exc:
        raise ClaimDataError(f"{where}: {expression!r} failed: {exc}") from None


def _as_number(published: Figure) -> Any:
    return published[0] if isinstance(published, tuple) and published[0] == published[1] else published


# ---- verdicts ------------------------------------------------------------------------------------------------


def within(published: Figure, figure: Figure, tolerance: float) -> bool:
    """Whether a recomputed figure agrees with the published one; ranges must lie inside the published range,
    widened by `tolerance` (relative to the published bounds)."""
    if isinstance(published, bool | str) or isinstance(figure, bool | str):
        return bool(published == figure)
    low, high = published if isinstance(published, tuple) else (published, published)
    f_low, f_high = figure if isinstance(figure, tuple) else (figure, figure)
    return low - tolerance * abs(low) - 1e-12 <= f_low and f_high <= high + tolerance * abs(high) + 1e-12


def verdict(claim: Claim, figure: Figure | None, measured: Figure | None) -> tuple[str, str]:
    """(verdict, why) of a claim from its recomputed figure and today's figure (None: not measured)."""
    if figure is None:
        return UNTESTABLE, claim.untestable
    if within(claim.published, figure, EXACT):
        found = HOLDS, "the study's data give the published figure"
    elif claim.rounded_within and within(claim.published, figure, claim.rounded_within):
        found = ROUNDED, f"within {claim.rounded_within:.0%} of the published figure, which the post rounded"
    else:
        return NOT_FOLLOW, "the study's own data give another figure"
    tolerance = max(EXACT, claim.rounded_within)
    if measured is not None and not within(claim.published, measured, tolerance):
        return CONTRADICTED, "it holds on the study's data, not on today's runs"
    return found


def check_claims(
    claims: Iterable[Claim],
    measured_results: pd.DataFrame | None = None,
    data: _Published | None = None,
    stand_ins: Mapping[str, str] | None = None,
    totals: Totals | None = None,
) -> list[Checked]:
    """Every claim recomputed and judged; `measured_results`: the report's results of today's runs, if any;
    `stand_ins`: requested profile -> the profile that ran in its place; `totals`: each configuration's repeats,
    which a claim with `runs` compares."""
    data = data or _Published()
    used: set[str] = set()
    measured_space = None
    if measured_results is not None:
        measured_space = _measured_namespace(measured_results, stand_ins or {}, used)
    checked = []
    for claim in claims:
        used.clear()
        space = _study_namespace(claim.study, data)
        figure = None
        try:
            figure = _figure(_evaluate(claim, claim.figure, space)) if claim.figure else None
            untestable = claim.untestable
        except Unavailable as exc:
            untestable = f"the bundled data lack a figure it needs: {exc}"
        details = tuple(_detail(claim, label, expression, unit, space) for label, expression, unit in claim.details)
        today, today_text = _today(claim, measured_space)
        if used:
            today_text += f" ({'; '.join(sorted(used))})"
        if figure is None and not claim.untestable:
            claim = replace(claim, untestable=untestable)
        result, reason = verdict(claim, figure, today)
        runs_verdict = ""
        if claim.runs and measured_results is not None and totals is not None:
            today_text, runs_verdict = runs_check(claim, measured_results, totals) or (today_text, "")
        checked.append(Checked(claim, figure, details, today_text, result, reason, runs_verdict))
    return checked


def runs_check(claim: Claim, results: pd.DataFrame, totals: Totals) -> tuple[str, str] | None:
    """Where the user's runs hold the claim's two images on one machine (same workload, backend, epochs and
    samples, real data): each pair's time saved by the candidate with its interval, runs and test
    (`benchmarks.stats.compare`), and the verdict they give together; None where no pair was run."""
    assert claim.runs is not None
    candidate, base = claim.runs
    lines, verdicts = [], []
    for (platform, workload, backend), rows in results[results["data_source"] == "real"].groupby(
        ["platform", "workload", "backend"], sort=True
    ):
        ours, theirs = _with_image(rows, candidate), _with_image(rows, base)
        if (
            ours is None
            or theirs is None
            or (ours["epochs"], ours["train_samples"])
            != (
                theirs["epochs"],
                theirs["train_samples"],
            )
        ):
            continue
        (a, a_machines), (b, b_machines) = totals(workload, ours["config"]), totals(workload, theirs["config"])
        comparison = compare(a, b, candidate_machines=a_machines, base_machines=b_machines)
        names = _image_of(str(ours["variant"]), candidate) or candidate, _image_of(str(theirs["variant"]), base) or base
        saved, low, high = _saved(comparison)
        interval = "" if low is None or high is None else f" (95% CI {format_figure((low, high), '%')})"
        lines.append(
            f"{platform} {workload} [{backend}]: {format_figure(saved, '%')} less time{interval}, {len(a)} vs "
            f"{len(b)} runs: {comparison.text(*names)}"
        )
        verdicts.append(_runs_verdict(claim, comparison, saved, low, high))
    if not lines:
        return None
    overall = (
        RUNS_CONTRADICT
        if RUNS_CONTRADICT in verdicts
        else RUNS_HOLD
        if verdicts and all(v == RUNS_HOLD for v in verdicts)
        else RUNS_CANNOT_TELL
    )
    return "; ".join(lines), overall


def _with_image(rows: pd.DataFrame, pattern: str) -> pd.Series | None:
    """The row whose configuration ran in an image matching `pattern` (its variant names the image; `*` as in a
    shell: `keras-cloud-bench:cpu-compiled*` for any target architecture), the one with the most runs."""
    found = rows[rows["variant"].fillna("").map(lambda v: _image_of(str(v), pattern) is not None)]
    return None if found.empty else found.sort_values("n_runs", ascending=False).iloc[0]


def _image_of(variant: str, pattern: str) -> str | None:
    return next((p for p in (part.strip() for part in variant.split(",")) if fnmatch.fnmatchcase(p, pattern)), None)


def _saved(comparison: Comparison) -> tuple[float, float | None, float | None]:
    """The share of the base's time the candidate saves (1 - ratio of medians), with its interval."""
    ratio = comparison.ratio
    if ratio.low is None or ratio.high is None:
        return 1 - ratio.value, None, None
    return 1 - ratio.value, 1 - max(ratio.low, ratio.high), 1 - min(ratio.low, ratio.high)


def _runs_verdict(claim: Claim, comparison: Comparison, saved: float, low: float | None, high: float | None) -> str:
    """Contradicted where the interval of the time saved lies wholly outside the claim's figure (a saving claimed,
    none beyond noise counts as outside); holds where the saving is beyond noise and its interval meets the figure;
    else the runs cannot tell."""
    if comparison.verdict == TOO_FEW or low is None or high is None:
        return RUNS_CANNOT_TELL
    tolerance = max(EXACT, claim.rounded_within)
    published = claim.published
    if not isinstance(published, tuple | float):
        return RUNS_CANNOT_TELL
    p_low, p_high = published if isinstance(published, tuple) else (published, published)
    p_low, p_high = p_low - tolerance * abs(p_low), p_high + tolerance * abs(p_high)
    if high < p_low or low > p_high:
        return RUNS_CONTRADICT
    return RUNS_HOLD if comparison.verdict == FASTER else RUNS_CANNOT_TELL


def _figure(value: Any) -> Figure:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return (float(value[0]), float(value[1]))
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    raise ClaimDataError(f"a claim's figure must be a number, a (low, high) span, true/false or a name: {value!r}")


def _detail(claim: Claim, label: str, expression: str, unit: str, space: Mapping[str, Any]) -> str:
    try:
        value = _evaluate(claim, expression, space)
    except Unavailable as exc:
        return f"{label}: not in the data ({exc})"
    return f"{label}: {format_figure(_figure(value), unit)}"


def _today(claim: Claim, space: Mapping[str, Any] | None) -> tuple[Figure | None, str]:
    if claim.measured is None:
        return None, "not compared with runs"
    if space is None:
        return None, "no runs of ours on this page"
    try:
        value = _figure(_evaluate(claim, claim.measured, space))
    except Unavailable as exc:
        return None, f"not in these runs ({exc})"
    return value, format_figure(value, claim.unit)


# ---- text ----------------------------------------------------------------------------------------------------


def format_figure(value: Figure | None, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        if math.isclose(*value):
            return format_figure(value[0], unit)
        return f"{_number(value[0], unit)} to {format_figure(value[1], unit)}"
    return _number(value, unit) + {"x": "x", "%": " %", "": ""}.get(unit, f" {unit}")


def _number(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:+.0f}" if value < 0 else f"{value * 100:.0f}"
    if unit == "days":
        return f"{value:,.1f}"
    if unit in ("USD", "GBP", "USD/h", "GBP/h") and abs(value) < 1:
        return f"{value:.4f}".rstrip("0").ljust(4, "0")  # cents always, sub-cent digits where there are any
    if abs(value) >= 100 or (unit == "" and value.is_integer()):
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _quoted(claim: Claim) -> str:
    if claim.verbatim:
        return f"\u201c{claim.quote}\u201d ({claim.where})"
    return f"{claim.quote} ({claim.where}; in substance, not the post's words)"


def claims_table(checked: Iterable[Checked]) -> pd.DataFrame:
    """One row per claim: what was published, what the data give, what today's runs give, and the verdict."""
    rows = [
        {
            "claim": _quoted(c.claim),
            "published": c.claim.published_text,
            "from the study's data": "; ".join(
                filter(None, [format_figure(c.figure, c.claim.unit) if c.figure is not None else "", *c.details])
            )
            or "-",
            "from our runs": c.measured,
            "verdict": f"{c.verdict}; {c.runs_verdict}" if c.runs_verdict else c.verdict,
            "why": c.reason,
        }
        for c in checked
    ]
    return pd.DataFrame(
        rows, columns=["claim", "published", "from the study's data", "from our runs", "verdict", "why"]
    )


@dataclass(frozen=True)
class ClaimsSection:
    """The claims on a study page: the study's own, then those of the studies without a page of their own."""

    study: str
    own: pd.DataFrame
    others: pd.DataFrame
    other_titles: str

    @property
    def count(self) -> int:
        return len(self.own) + len(self.others)


def claims_section(
    study: str,
    measured_results: pd.DataFrame | None = None,
    stand_ins: Mapping[str, str] | None = None,
    totals: Totals | None = None,
) -> ClaimsSection:
    claims = load_claims()
    pages = set(load_studies())
    data = _Published()
    own = check_claims(claims.get(study, []), measured_results, data, stand_ins, totals)
    others = [c for name, items in claims.items() if name not in pages for c in items]
    return ClaimsSection(
        study=study,
        own=claims_table(own),
        others=claims_table(check_claims(others, measured_results, data, stand_ins, totals)),
        other_titles=", ".join(name for name in claims if name not in pages),
    )


def report_claims(report: Any) -> ClaimsSection | None:
    """The claims section of a report with a study (a `report.build.Report`); today's runs are its results."""
    if report.study is None:
        return None
    results = report.results if report.measured else None
    return claims_section(
        report.study.study.name,
        results,
        stand_ins(report.request.replacements),
        report.totals if results is not None else None,
    )


def stand_ins(replacements: Iterable[str]) -> dict[str, str]:
    """A fan-out's replacements ("gce-t4 ran in place of gce-k80 (retired ...)") as requested -> used."""
    found = (re.match(r"(\S+) ran in place of (\S+)", line) for line in replacements)
    return {m.group(2): m.group(1) for m in found if m}


CLAIMS_NOTE = (
    "Each headline figure or claim of the study, recomputed from the study's own published data (and from the runs "
    "on this page where the suite runs the configurations it names), with a verdict: holds; holds, rounded (the post "
    'said "about" or "roughly"); does not follow from the published inputs; contradicted by today\'s runs; or '
    "cannot be tested here (with the reason). The claims are data: report/data/claims/."
)
