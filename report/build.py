"""The report pipeline: logs -> runs -> results (and a study's published figures) -> tables, charts, pages."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmarks.logs import LogFormatError
from benchmarks.step_costs import recorded
from benchmarks.workloads import WORKLOADS
from estimator.model import accelerator_model
from estimator.owned import Owned
from estimator.owning import bought, cannot
from estimator.physics import peaks
from estimator.suite import basis_of, profile_machine, steady_epoch
from records.loading import REFERENCE_FOLDER, LoadResult, Run, Skipped, assign_variants, load_runs
from report import format as fmt
from report import gpu_compare, native_compare, roofline
from report.buyable import estimated_rivals
from report.charts import Bar, relative_chart
from report.costs import PriceBook
from report.machines import machine_table, read_ledger
from report.model_costs import load_costs
from report.owned import with_measured_rivals
from report.reproducibility import (
    MachineCheck,
    fingerprint_table,
    machine_check,
    machine_spread_table,
    reproducibility_table,
)
from report.scaling import PUBLISHED_STUDY, ScalingSection, node_table
from report.scaling import draw_chart as draw_scaling_chart
from report.scaling import section as scaling_section
from report.studies import Published, Study, compare, get_study, measured_setups, published_results
from report.summary import Estimated, Samples, glance_table, rented_runs, summary_table
from report.tables import (
    PER_SAMPLE,
    BadArgumentError,
    Group,
    ReportError,
    group_runs,
    partial_runs_table,
    resolve_base,
    runs_table,
    summarize,
)
from report.trends import TrendSection
from report.trends import draw as draw_trends
from report.trends import section as trend_section

CHARTS_DIR = "charts"


@dataclass(frozen=True)
class Request:
    logdir: Path | None  # None: the study's published figures alone
    base: str | None
    prices: PriceBook
    study: Study | None
    ledger: Path | None = None  # None: the orchestrator's default ledger
    suite: str | None = None  # only runs whose metadata names this suite
    run_ids: tuple[str, ...] = ()  # only runs whose run id matches one of these shell patterns
    reference: str | None = None  # logs/reference/NAME shown beside the user's runs
    owned: Mapping[str, Owned] = field(default_factory=dict)  # owned machines weighed against renting
    usd_per_kwh: float | None = None  # electricity price for the energy figures
    replacements: tuple[str, ...] = ()  # "gce-t4 ran in place of gce-k80 (retired ...)": a fan-out's mapping


@dataclass
class Chart:
    title: str
    png: str  # path relative to the report folder
    svg: str


@dataclass
class WorkloadSection:
    workload: str
    results: pd.DataFrame
    time_chart: Chart | None = None
    cost_chart: Chart | None = None
    partial: list[str] = field(default_factory=list)


@dataclass
class StudySection:
    published: Published
    comparison: pd.DataFrame  # empty when there are no measured runs
    measured_setups: pd.DataFrame
    charts: dict[str, list[Chart]] = field(default_factory=dict)  # workload -> time (and cost) chart
    figures: list[Chart] = field(default_factory=list)  # the study's own figures, redrawn (provider study)

    @property
    def study(self) -> Study:
        return self.published.study


@dataclass
class Report:
    request: Request
    base_label: str
    results: pd.DataFrame
    runs: pd.DataFrame
    partial: pd.DataFrame
    skipped: list[Skipped]
    sections: list[WorkloadSection]
    study: StudySection | None
    measured: bool  # False: the results are the study's published figures
    machines: pd.DataFrame = field(default_factory=pd.DataFrame)  # billed time per machine session
    ledger_note: str | None = None  # why no ledger figures, if none
    scaling: ScalingSection | None = None  # where some run trained on several devices
    nodes: pd.DataFrame = field(default_factory=pd.DataFrame)  # where some run trained across nodes: against one
    gpu_compare: gpu_compare.Section | None = None  # where two GPUs trained a workload and backend alike
    native_compare: native_compare.Section | None = None  # Keras backends against the native PyTorch twin
    roofline: roofline.Section | None = None  # where some run trained on a GPU with a datasheet and a model cost
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)  # fastest and cheapest per workload
    glance: pd.DataFrame = field(default_factory=pd.DataFrame)  # the first screen: workload by machine
    fingerprints: pd.DataFrame = field(default_factory=pd.DataFrame)
    reproducibility: pd.DataFrame = field(default_factory=pd.DataFrame)
    machine_check: MachineCheck | None = None  # leave one machine out, over configurations run on several
    machine_spread: pd.DataFrame = field(default_factory=pd.DataFrame)  # between machines beside within one
    owned: Mapping[str, Owned] = field(default_factory=dict)  # with rivals measured beside them, if any
    trends: TrendSection | None = None  # one profile's runs on several dates (a schedule's): price-performance
    rented: bool = True  # some run of the user's was on a rented machine (else: how to compare before renting)
    totals: Samples | None = None  # each configuration's repeats' total seconds and machines (claims compare them)

    @property
    def unpriced_reasons(self) -> list[str]:
        return sorted({n for notes in self.results["notes"] for n in notes.split("; ") if n.startswith("no price")})

    @property
    def cost_rules(self) -> list[str]:
        return sorted({str(r) for r in self.results["cost_rule"].dropna()})

    @property
    def price_sources(self) -> list[str]:
        return sorted({str(r) for r in self.results["price_source"].dropna()})

    @property
    def counts(self) -> dict[str, int]:
        counted = int(self.runs["counted"].sum()) if not self.runs.empty else 0
        return {"complete": counted, "partial": len(self.partial), "skipped": len(self.skipped)}

    def differences(self) -> str:
        """One sentence: the published base's setup against the measured ones."""
        if self.study is None:
            return ""
        setups = self.study.published.setups
        base = setups[setups["config"] == self.study.study.base]
        published = (
            f"{base.iloc[0]['hardware']}, {base.iloc[0]['software']}" if not base.empty else self.study.study.base
        )
        text = f"Published base {self.study.study.base} ({self.study.study.date}): {published}."
        measured = self.study.measured_setups
        if self.measured and not measured.empty:
            mine = "; ".join(f"{r['config']}: {r['hardware']}, {r['software']}" for _, r in measured.iterrows())
            text += f" Measured: {mine}."
        return text


def build(request: Request) -> Report:
    """Read, summarise and compare; nothing is written yet."""
    if request.logdir is None:
        if request.study is None:
            raise ReportError("give a log folder, or --study NAME for a published study alone")
        return _published_only(request, request.study)
    try:
        loaded = load_runs(request.logdir, request.reference)
    except LogFormatError as exc:
        raise BadArgumentError(str(exc)) from None
    if request.suite is not None:
        loaded = _of_suite(loaded, request.suite, request.logdir)
    if request.run_ids:
        loaded = _of_run_ids(loaded, request.run_ids, request.logdir)
    if not loaded.runs:
        raise ReportError(_nothing_found(request.logdir, loaded))
    groups = group_runs(loaded.runs)
    if not groups:
        raise ReportError(
            f"{request.logdir}: no complete runs ({len(loaded.partial_runs)} partial, {len(loaded.skipped)} unreadable)"
        )
    base = resolve_base(request.base, groups)
    results = with_energy_cost(summarize(groups, base, request.prices.pricing), request.usd_per_kwh)
    study = _study_section(request.study, results, loaded) if request.study else None
    ledger, ledger_note = read_ledger(request.ledger)
    check = machine_check(groups)
    return Report(
        request=request,
        base_label=base.label,
        results=results,
        runs=runs_table(loaded.runs, groups),
        partial=partial_runs_table(loaded.runs),
        skipped=loaded.skipped,
        sections=_sections(results, loaded.partial_runs),
        study=study,
        measured=True,
        machines=machine_table(loaded.runs, request.prices.pricing, ledger),
        ledger_note=ledger_note,
        summary=summary_table(results, _repeat_samples(groups)),
        glance=glance_table(results, own := _own_workloads(results, request.logdir), _estimator(request.logdir, own)),
        fingerprints=fingerprint_table(loaded.complete_runs),
        reproducibility=reproducibility_table(groups),
        machine_check=check,
        machine_spread=machine_spread_table(check),
        owned={
            **with_measured_rivals(
                request.owned, results, {p: request.prices.market_prices(p) for p in set(results["platform"])}
            ),
            **buyable_against(results, request.prices, request.logdir, request.usd_per_kwh, request.owned),
        },
        scaling=scaling_section(loaded.complete_runs, get_study(PUBLISHED_STUDY), request.prices.profiles),
        nodes=node_table(loaded.complete_runs, request.prices.profiles),
        gpu_compare=gpu_compare.section(loaded.complete_runs, request.prices.profiles),
        native_compare=native_compare.section(loaded.complete_runs),
        roofline=roofline.section(loaded.complete_runs, load_costs(), roofline.load_datasheets()),
        trends=trend_section(loaded.complete_runs, request.prices.pricing),
        rented=rented_runs(results, request.prices.profiles),
        totals=_repeat_totals(groups),
    )


def with_energy_cost(results: pd.DataFrame, usd_per_kwh: float | None) -> pd.DataFrame:
    """GPU (and host, where measured) energy per run x the electricity price; NaN without either."""
    energy_kwh = (results["gpu_wh"] + results["host_wh"].fillna(0)) / 1000
    return results.assign(energy_usd=energy_kwh * usd_per_kwh if usd_per_kwh is not None else float("nan"))


def _repeat_samples(groups: Sequence[Group]) -> Samples:
    """Each repeat's steady-epoch seconds per training sample, and its machine: what the summary ranks."""
    figures = {(g.workload, g.config.label): g.per_sample() for g in groups}
    return lambda workload, config: figures[(workload, config)]


def _repeat_totals(groups: Sequence[Group]) -> Samples:
    """Each repeat's total training seconds, and its machine."""
    by_key = {(g.workload, g.config.label): g for g in groups}
    return lambda workload, config: (by_key[(workload, config)].totals(), by_key[(workload, config)].machines())


def _of_suite(loaded: LoadResult, suite: str, logdir: Path) -> LoadResult:
    runs = [r for r in loaded.runs if r.metadata.suite == suite]
    if loaded.runs and not runs:
        raise ReportError(f"{logdir}: no runs of suite {suite!r} ({len(loaded.runs)} runs of other suites)")
    return LoadResult(runs=assign_variants(runs), skipped=loaded.skipped)


def _of_run_ids(loaded: LoadResult, patterns: Sequence[str], logdir: Path) -> LoadResult:
    runs = [r for r in loaded.runs if any(fnmatch.fnmatchcase(r.run_id, p) for p in patterns)]
    if loaded.runs and not runs:
        raise ReportError(f"{logdir}: no run id matches {', '.join(patterns)} ({len(loaded.runs)} runs in all)")
    # Variants name only what differs among the runs shown.
    return LoadResult(runs=assign_variants(runs), skipped=loaded.skipped)


def _nothing_found(logdir: Path, loaded: LoadResult) -> str:
    if loaded.skipped:
        return f"{logdir}: no readable logs ({len(loaded.skipped)} unreadable: {loaded.skipped[0].reason} ...)"
    references = logdir / REFERENCE_FOLDER
    if references.is_dir():
        names = ", ".join(sorted(p.name for p in references.iterdir() if p.is_dir()))
        return f"{logdir}: no epoch logs (*.csv) of yours found; {references}/ is left out: --reference NAME ({names})"
    return f"{logdir}: no epoch logs (*.csv) found"


def _published_only(request: Request, study: Study) -> Report:
    published = published_results(study)
    results = published.results
    return Report(
        request=request,
        base_label=str(results.loc[results["is_base"], "config"].iloc[0]),
        results=results,
        runs=pd.DataFrame(),
        partial=partial_runs_table([]),
        skipped=[],
        sections=_sections(results, []),
        study=StudySection(published, pd.DataFrame(), measured_setups([])),
        measured=False,
        summary=summary_table(results, _published_totals(results)),
    )


def _published_totals(results: pd.DataFrame) -> Samples:
    """A published configuration is one run: its total is its only repeat."""
    totals = {(r["workload"], r["config"]): [float(r["total_s"])] for _, r in results.iterrows()}
    return lambda workload, config: (totals[(workload, config)], None)


def _sections(results: pd.DataFrame, partial_runs: Sequence[Run]) -> list[WorkloadSection]:
    sections = []
    for workload, rows in results.groupby("workload", sort=True):
        partial = [
            f"{r.config.label} run {r.run_id}: {r.status}, {r.epochs_completed}"
            + (f"/{r.epochs_planned}" if r.epochs_planned else "")
            + " epochs"
            for r in partial_runs
            if r.workload == workload
        ]
        sections.append(WorkloadSection(str(workload), rows.reset_index(drop=True), partial=partial))
    return sections


def _study_section(study: Study, measured: pd.DataFrame, loaded: LoadResult) -> StudySection:
    published = published_results(study)
    mine = measured[measured["workload"].isin(list(study.workloads))]
    datasets = {(r.workload, r.config.label): r.metadata.data.dataset or "" for r in loaded.complete_runs}
    runs = [r for r in loaded.complete_runs if r.workload in study.workloads]
    setups = measured_setups(runs)
    prices = mine.drop_duplicates("config").set_index("config")["usd_per_hour"]
    setups["usd_per_hour"] = setups["config"].map(prices)
    return StudySection(published, compare(published, mine, datasets), setups)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "chart"


def draw_charts(report: Report, out: Path, charts_dir: str = CHARTS_DIR) -> None:
    """Every chart of the report, written under `out/<charts_dir>/`; the sections and the study keep their
    paths (relative to `out`)."""
    for section in report.sections:
        section.time_chart, section.cost_chart = _workload_charts(report, section, out, charts_dir)
    if report.study is not None and report.study.study.kind == "provider-table":
        report.study.figures = [_multi_gpu_figure(report.study, out, charts_dir)]
    if report.scaling is not None:
        draw_scaling_chart(report.scaling, out, charts_dir)
    if report.roofline is not None:
        roofline.draw_section_chart(report.roofline, out, charts_dir)
    if report.trends is not None:
        draw_trends(report.trends, out, charts_dir)
    if report.study is not None and not report.study.comparison.empty:
        for workload, rows in report.study.comparison.groupby("workload", sort=True):
            report.study.charts[str(workload)] = _study_charts(report.study, str(workload), rows, out, charts_dir)


def _workload_charts(
    report: Report, section: WorkloadSection, out: Path, charts_dir: str
) -> tuple[Chart, Chart | None]:
    """The time chart, and the cost chart where at least one configuration has a cost."""
    rows = section.results
    base = rows[rows["is_base"].astype(bool)]
    common = []
    if section.partial:
        common.append("left out (partial): " + "; ".join(section.partial))
    if (rows["n_runs"] < 3).any():
        common.append("no interval where a configuration has fewer than 3 repeats")
    if (rows["rel_time"].isna() & rows["rel_steady"].notna()).any():
        common.append(
            "bars marked (steady epoch) compare median steady epochs, or their cost (other epochs than the base's); "
            "(per sample) compare steady-epoch seconds, or their cost, per training sample (other sample counts)"
        )
    if rows.apply(lambda r: bool(fmt.marks(r)), axis=1).any():
        common.append("⚠ marks unstable or host-bound configurations (see the table)")
    if report.study is not None and not report.measured:
        common += _config_names(report.study.study, set(rows["config"]))
    time_bars = _sorted([_bar(r, "rel_time", "time", published=not report.measured) for _, r in rows.iterrows()])
    cost_bars = _sorted([_bar(r, "rel_cost", "cost", published=not report.measured) for _, r in rows.iterrows()])
    if base.empty:
        time_base = cost_base = f"the base {report.base_label} has no complete run of this workload"
    else:
        b = base.iloc[0]
        runs = f"median of {int(b['n_runs'])} run(s)"
        time_base = f"1.0x = {b['config']}: {fmt.seconds(b['total_s'])} s per run ({runs})"
        cost_base = f"1.0x = {b['config']}: {fmt.usd(b['cost_usd'])} per run ({runs})"
    stem = out / charts_dir / safe_name(section.workload)
    source = "published " if not report.measured else ""
    time_chart = _chart(
        time_bars,
        f"{section.workload}: {source}training time relative to {report.base_label} (lower is better)",
        "training time relative to the base",
        [time_base, *common, *_missing_notes(time_bars)],
        stem.with_name(stem.name + "_time"),
        out,
    )
    if not rows["rel_cost"].notna().any():
        return time_chart, None
    cost_chart = _chart(
        cost_bars,
        f"{section.workload}: {source}training cost relative to {report.base_label} (lower is better)",
        "training cost relative to the base",
        [cost_base, *common, *_missing_notes(cost_bars)],
        stem.with_name(stem.name + "_cost"),
        out,
    )
    return time_chart, cost_chart


def _sorted(bars: list[Bar]) -> list[Bar]:
    """Smallest (best) first, bars without a figure last."""
    return sorted(bars, key=lambda b: (b.value is None, b.value or 0.0))


def _missing_notes(bars: Sequence[Bar]) -> list[str]:
    """Why a bar has no figure, said in the footnotes in full rather than clipped beside the bar."""
    return [f"n/a: {b.label}: {b.missing}" for b in bars if b.value is None]


def _bar(row: pd.Series, column: str, what: str, published: bool, label: str | None = None) -> Bar:
    value = row[column]
    label = (label or str(row["config"])) + (" ⚠" if fmt.marks(row) else "")
    low, high = (row.get(f"{column}_low"), row.get(f"{column}_high")) if column == "rel_time" else (pd.NA, pd.NA)
    if fmt.missing(value) and column == "rel_time" and not fmt.missing(row.get("rel_steady")):
        # Other epochs than the base's: the steady epochs still compare, per sample where the sample counts differ.
        value, label = row["rel_steady"], f"{label} ({_steady_word(row)})"
        low, high = row.get("rel_steady_low"), row.get("rel_steady_high")
    elif column == "rel_cost" and fmt.missing(row.get("rel_time")) and not fmt.missing(value):
        # Its cost ratio is then of a steady epoch or a sample too, with the steady ratio's interval.
        label = f"{label} ({_steady_word(row)})"
        low, high = row.get("rel_cost_low"), row.get("rel_cost_high")
    return Bar(
        label=label,
        value=None if fmt.missing(value) else float(value),
        backend=str(row["backend"]),
        low=None if fmt.missing(low) else float(low),
        high=None if fmt.missing(high) else float(high),
        synthetic=row["data_source"] == "synthetic",
        published=published,
        missing=_missing_reason(row, what) if fmt.missing(value) else "",
        group=str(row["platform"]) if "platform" in row else _platform_of(str(row["config"]), str(row["backend"])),
    )


def _steady_word(row: pd.Series) -> str:
    return "per sample" if row.get("steady_basis") == PER_SAMPLE else "steady epoch"


def _platform_of(label: str, backend: str) -> str:
    """ "gce-k80-jax (synthetic)" -> "gce-k80": the hardware part of a configuration label."""
    name = label.split(" (")[0].split(" [")[0]
    return name.removesuffix(f"-{backend}")


def _missing_reason(row: pd.Series, what: str) -> str:
    """The true reason first: no base run, then other epochs, then no price (cost only)."""
    notes = [n for n in str(row.get("notes") or "").split("; ") if n]
    order = ["no base run", "total time not compared", "no relative", "cut-down run"]
    if what == "cost":
        order += ["no price"]
    for prefix in order:
        found = next((n for n in notes if n.startswith(prefix)), None)
        if found:
            return found
    return _default_missing(row, what)


def _chart(bars: list[Bar], title: str, xlabel: str, footnotes: list[str], stem: Path, out: Path) -> Chart:
    png, svg = relative_chart(bars, title, xlabel, footnotes, stem)
    return Chart(title, png.relative_to(out).as_posix(), svg.relative_to(out).as_posix())


def _study_charts(section: StudySection, workload: str, rows: pd.DataFrame, out: Path, charts_dir: str) -> list[Chart]:
    study = section.study
    base = rows[(rows["source"] == "published") & rows["is_base"].fillna(False).astype(bool)]
    b = base.iloc[0] if not base.empty else None
    bases = {
        "time": f"1.0x = published {study.base}" + (f": {fmt.seconds(b['total_s'])} s" if b is not None else ""),
        "cost": f"1.0x = published {study.base}" + (f": {fmt.usd(b['cost_usd'])}" if b is not None else ""),
    }
    names = _config_names(study, set(rows.loc[rows["source"] == "published", "config"]))
    common = [f"published: {study.title} ({study.date}); pale bars are published, solid bars measured", *names]
    charts = []
    for column, what in (("rel_time_vs_published_base", "time"), ("rel_cost_vs_published_base", "cost")):
        bars = _sorted(
            [
                _bar(r, column, what, published=r["source"] == "published", label=_study_label(r))
                for _, r in rows.iterrows()
            ]
        )
        stem = out / charts_dir / f"study_{safe_name(study.name)}_{safe_name(workload)}_{what}"
        title = f"{workload}: training {what} relative to published {study.base} (lower is better)"
        footnotes = [bases[what], *common, *_missing_notes(bars)]
        charts.append(_chart(bars, title, f"training {what} relative to the published base", footnotes, stem, out))
    return charts


def multi_gpu_bars(results: pd.DataFrame) -> tuple[list[Bar], list[str]]:
    """Each "<server> xN" row over the same server's one-GPU row; and the multi-GPU rows without one."""
    table = results.set_index("config")
    bars, alone = [], []
    for label, row in table.iterrows():
        single, _, count = str(label).rpartition(" x")
        if not single:
            continue
        if single not in table.index:
            alone.append(str(label))
            continue
        value = float(row["total_s"]) / float(table.loc[single, "total_s"])
        bars.append(Bar(f"{single}: {count} GPUs", value, str(row["backend"]), published=True, group=single))
    return bars, alone


def _multi_gpu_figure(section: StudySection, out: Path, charts_dir: str) -> Chart:
    """The provider study's Figure 2: training on all of a server's GPUs (Keras's multi_gpu_model) against one
    of them, where the post published both."""
    bars, alone = multi_gpu_bars(section.published.results)
    footnotes = [
        "1.0x = the same server trained on one of its GPUs; below 1.0 the extra GPUs helped",
        f"published: {section.study.title} ({section.study.date}), Table 1",
    ]
    if alone:
        footnotes.append(f"not drawn (no one-GPU time published): {', '.join(alone)}")
    stem = out / charts_dir / f"study_{safe_name(section.study.name)}_multi_gpu"
    title = "Training time on all GPUs (multi_gpu_model) relative to one GPU of the same server (the post's Figure 2)"
    return _chart(_sorted(bars), title, "training time relative to one GPU", footnotes, stem, out)


def _config_names(study: Study, shown: set[str]) -> list[str]:
    """What a study's short configuration names stand for ("cpu8cmp = GCE preemptible n1-highcpu-8 ...")."""
    return [
        f"{c.name} = {c.hardware}; {c.software.get(c.backends[0], '')}"
        for c in study.configs
        if any(c.label(k) in shown for k in c.backends)
    ]


def _study_label(row: pd.Series) -> str:
    label = f"{row['source']}: {row['config']}"
    return f"{label} (per steady epoch)" if row["basis"] == "steady epoch" else label


def _default_missing(row: pd.Series, what: str) -> str:
    if what == "cost" and row.get("basis") == "steady epoch":
        return "cost is compared only for runs of the published epochs"
    return f"no relative {what}"


def buyable_against(
    results: pd.DataFrame,
    prices: PriceBook,
    logdir: Path,
    usd_per_kwh: float | None = None,
    owned: Mapping[str, Owned] | None = None,
) -> dict[str, Owned]:
    """The machines of data/buyable.toml, and the user's owned machines that name their `gpu` but have no runs of
    their own here, against each priced rented GPU platform measured in `results`, at the speed estimator.suite
    estimates for them from the runs in `logdir`, the committed and the published (the physics basis included);
    electricity at `usd_per_kwh` (--electricity-price) where given, the catalog's price otherwise."""
    rented = {}
    for platform in sorted(set(results["platform"])):
        profile = prices.profile_of(platform)
        if profile is not None and profile.has_gpu:
            rented[platform] = (profile_machine(profile), *prices.market_prices(platform))
    if not rented:
        return {}
    basis = basis_of(logdir)
    measured_here = set(results["platform"])
    machines = {f"buy:{name}": machine for name, machine in bought(usd_per_kwh).items()} | {
        name: machine
        for name, machine in (owned or {}).items()
        if machine.gpu and machine.platform not in measured_here and not cannot(machine)
    }
    return {name: estimated_rivals(m, results, rented, basis) for name, m in machines.items()}


def _own_workloads(results: pd.DataFrame, logdir: Path) -> dict[str, int | None]:
    """The user's own workloads: workload files and plug-ins with runs of the user's (the reference runs' example
    files are not), each with the samples of its full epoch where its step costs record them."""
    declared = {c.workload: c.epoch_samples for c in recorded(logdir)}
    mine = results[~results["reference"].fillna(False).astype(bool)] if "reference" in results else results
    return {w: declared.get(w) for w in sorted({str(w) for w in mine["workload"]} - set(WORKLOADS))}


def _estimator(logdir: Path, own: Mapping[str, int | None]) -> Estimated | None:
    """For the first screen: a user's workload on a GPU platform of the report it has no run on, from its step
    costs and runs (estimator.suite.steady_epoch); None where there is no user workload to estimate."""
    if not own:
        return None
    basis = basis_of(logdir)

    def estimate(workload: str, backend: str, platform: str, samples: int) -> tuple[float, float, float, str] | None:
        gpu = accelerator_model(platform)
        runs = [o for o in basis.pool if o.workload == workload and o.code]
        if gpu not in peaks() or not runs:
            return None
        found = steady_epoch(basis, gpu, workload, backend, runs[-1].batch, samples, runs[-1].code)
        return None if found is None else found[:4]

    return estimate
