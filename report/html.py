"""Write the report folder: charts, the tables as CSV, and a self-contained HTML page (relative links)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from benchmarks.workloads import WORKLOADS
from report import format as fmt
from report import gpu_compare, native_compare, roofline
from report.build import Report, draw_charts, safe_name
from report.buyable import catalog_table
from report.claims import report_claims
from report.owned import break_even_table, load_owned, machines_table
from report.scaling import NODES_NOTE, NODES_TITLE
from report.summary import BEFORE_RENTING, ESTIMATE_COMMAND, bullet, leaders

# How to add a price, as the header says it when the report has none (both spellings run as printed).
PRICE_HINT = '--price PLATFORM=USD_PER_HOUR (make report PRICES="PLATFORM=USD_PER_HOUR")'

TEMPLATES = Path(__file__).parent / "templates"
PAGE = "index.html"


def write_report(report: Report, out: Path) -> Path:
    """Everything into `out`; returns the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    draw_charts(report, out)
    files = write_tables(report, out)
    page = out / PAGE
    page.write_text(render_page(report, files))
    return page


def _inline(text: str) -> Markup:
    """The inline markdown of the sections' notes, written once for the markdown report: `code` and *emphasis*."""
    html = str(Markup.escape(text))
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    return Markup(re.sub(r"\*([^*]+)\*", r"<em>\1</em>", html))


def write_tables(report: Report, out: Path) -> list[str]:
    """The tables as CSV (full precision); returns their names relative to `out`."""
    owned = report.owned or report.request.owned or load_owned()
    tables: dict[str, pd.DataFrame] = {
        "results.csv": report.results,
        "summary.csv": report.summary,
        "owned.csv": machines_table(owned),
        "break_even.csv": break_even_table(owned),
        "buyable.csv": catalog_table(),
    }
    if report.measured:
        tables["runs.csv"] = report.runs
        tables["machines.csv"] = report.machines
        tables["fingerprints.csv"] = report.fingerprints
        tables["reproducibility.csv"] = report.reproducibility
        tables["machine_spread.csv"] = report.machine_spread
    if report.gpu_compare is not None:
        tables["gpu_compare.csv"] = gpu_compare.csv_table(report.gpu_compare)
    if report.native_compare is not None:
        tables["native_compare.csv"] = report.native_compare.table
    if report.trends is not None:
        tables["trends.csv"] = report.trends.table
    if report.scaling is not None:
        tables["scaling.csv"] = report.scaling.measured
        tables["scaling_published.csv"] = report.scaling.published
        tables["scaling_prices.csv"] = report.scaling.prices
    if not report.nodes.empty:
        tables["scaling_nodes.csv"] = report.nodes
    if not report.partial.empty:
        tables["partial_runs.csv"] = report.partial
    if report.skipped:
        tables["skipped_files.csv"] = pd.DataFrame(
            {"path": [str(s.path) for s in report.skipped], "reason": [s.reason for s in report.skipped]}
        )
    if report.study is not None:
        name = safe_name(report.study.study.name)
        tables[f"study_{name}_published.csv"] = report.study.published.results
        if not report.study.comparison.empty:
            tables[f"study_{name}_comparison.csv"] = report.study.comparison
    for name, table in tables.items():
        table.to_csv(out / name, index=False)
    return list(tables)


def _html_table(table: pd.DataFrame, kind: str = "") -> Markup:
    # pandas escapes cell text (escape=True); the markup it returns is therefore safe to insert. A wide table
    # scrolls inside its own box rather than widening the page; a `kind` of table the CSS lays out to fit it.
    html = table.to_html(index=False, border=0, classes=["data", kind] if kind else "data", na_rep=fmt.NA, escape=True)
    return Markup(f'<div class="table-box">{html}</div>')


def _folded(table: pd.DataFrame, columns: list[str], uniform: str = "") -> dict[str, object]:
    """A table with its repeated "too few repeats" verdicts (and a column with one value throughout) folded, and
    the notes that say them once."""
    folded, note = fmt.fold_verdicts(table, columns)
    folded, said = fmt.fold_uniform(folded, uniform)
    return {"table": folded, "note": " ".join(n for n in (said, note) if n)}


def render_page(report: Report, files: list[str]) -> str:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
    )
    env.filters["table"] = _html_table
    env.filters["inline"] = _inline
    owned = report.owned or report.request.owned or load_owned()
    study = report.study.study if report.study else None
    context = {
        "report": report,
        "title": _title(report),
        "subtitle": _subtitle(report),
        "counts": report.counts,
        "cost_rules": report.cost_rules,
        "price_sources": report.price_sources,
        "unpriced": report.unpriced_reasons,
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "partial_table": fmt.partial_display(report.partial),
        "workload_tables": {s.workload: _folded(fmt.results_display(s.results), ["verdict"]) for s in report.sections},
        "study": study,
        "claims": report_claims(report),
        "differences": report.differences(),
        "published_setups": fmt.setups_display(
            report.study.published.setups, derived_prices=study is not None and study.kind == "provider-table"
        )
        if report.study
        else None,
        "measured_setups": fmt.setups_display(report.study.measured_setups) if report.study else None,
        "comparison_tables": _comparison_tables(report),
        "study_charts": report.study.charts if report.study else {},
        "files": files,
        "machines_table": fmt.machines_display(report.machines),
        "summary": _folded(report.summary, ["fastest: verdict", "cheapest: verdict"], "compared on"),
        "leaders": leaders(report.summary),
        "own": any(str(w).split(", ")[0] not in WORKLOADS for w in report.glance.get("workload", [])),
        "bullet": bullet,
        "before_renting": BEFORE_RENTING,
        "estimate_command": ESTIMATE_COMMAND,
        "price_hint": PRICE_HINT,
        "owned_table": machines_table(owned),
        "break_even_table": break_even_table(owned),
        "buyable_table": catalog_table(),
        "energy_table": _or_none(fmt.energy_display(report.results)),
        "energy_note": fmt.energy_note(report),
        "fingerprint_table": report.fingerprints,
        "reproducibility": _folded(report.reproducibility, ["test"]) if not report.reproducibility.empty else None,
        "machine_check": report.machine_check,
        "machine_spread": _or_none(report.machine_spread),
        "trends": report.trends,
        "scaling": report.scaling,
        "nodes": _or_none(report.nodes),
        "nodes_note": NODES_NOTE,
        "nodes_title": NODES_TITLE,
        "gpu_compare": report.gpu_compare,
        "gpu_compare_title": gpu_compare.TITLE,
        "gpu_compare_note": gpu_compare.NOTE,
        "gpu_compare_cost_note": gpu_compare.COST_NOTE,
        "native_compare": report.native_compare,
        "native_compare_title": native_compare.TITLE,
        "native_compare_note": native_compare.NOTE,
        "roofline": report.roofline,
        "roofline_title": roofline.TITLE,
        "roofline_note": roofline.CONFIGURATION_NOTE,
    }
    return env.get_template("report.html.j2").render(**context)


def _or_none(table: pd.DataFrame) -> pd.DataFrame | None:
    return None if table.empty else table


def _title(report: Report) -> str:
    if not report.measured and report.study is not None:
        return f"Published: {report.study.study.title}"
    return "Benchmark report"


def _subtitle(report: Report) -> str:
    if not report.measured and report.study is not None:
        study = report.study.study
        by = f"{study.author}, {study.date}" if study.author else study.date
        return f"{by}. The published figures, recomputed by this report from the bundled published data."
    workloads = len(report.sections)
    configs = report.results["config"].nunique()
    return f"{workloads} workload(s) x {configs} configuration(s), relative to {report.base_label}"


def _comparison_tables(report: Report) -> dict[str, pd.DataFrame]:
    if report.study is None or report.study.comparison.empty:
        return {}
    return {
        str(workload): fmt.comparison_display(rows)
        for workload, rows in report.study.comparison.groupby("workload", sort=True)
    }
