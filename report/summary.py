"""The summary at the top of the report: per workload, the fastest and the cheapest configuration, and one sentence
each saying by how much they lead, decided by `benchmarks.stats.compare` (a lead within noise, or with too few
repeats to tell, is said to be one).

Measured runs are ranked on what compares across experiments of any size: throughput (training samples per second
of a steady epoch) for speed, and the price of a million training samples at that throughput for cost. So every run
given, the reference runs included, is ranked, whatever its epochs or sample count. Published figures, which give
whole runs only, are ranked on total time and cost among runs of one experiment (the base's epochs and samples).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from benchmarks.stats import FASTER, SAME, compare
from records.catalog import Profile
from report import format as fmt

# (workload, config) -> the compared figure of each repeat (seconds, lower is better) and its machine (None: unknown)
Samples = Callable[[str, str], tuple[Sequence[float], Sequence[str] | None]]

SUMMARY_COLUMNS = (
    "workload",
    "compared on",
    "fastest",
    "speed",
    "time per run",
    "fastest: verdict",
    "cheapest",
    "price",
    "cost",
    "cost per run",
    "cheapest: verdict",
    "fastest: rests on",
    "cheapest: rests on",
)
PER_SAMPLE_BASIS = "throughput: training samples per second of a steady epoch (any epochs and sample count)"
MILLION = 1_000_000


@dataclass(frozen=True)
class Leader:
    """The fastest or the cheapest configuration of one workload, as the first screen names it."""

    workload: str
    config: str
    figure: str  # "41,200 samples/s" or "$0.0236 per 1M samples"
    price: str  # "$3.59/h" or "" (no price)
    rests_on: str = ""  # what the bullet must say with it: "1 run, no interval", "the only priced configuration"


def summary_table(results: pd.DataFrame, samples: Samples) -> pd.DataFrame:
    rows = [_workload_row(str(w), rows, samples) for w, rows in results.groupby("workload", sort=True)]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def per_sample(results: pd.DataFrame) -> bool:
    """Whether the rows rank on throughput (measured, sample counts known) rather than on whole runs."""
    return "samples_per_s" in results and bool(results["samples_per_s"].notna().any())


def real_first(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A workload's rows the summary ranks: its real-data configurations where it has any (a synthetic stand-in
    never replaces the user's real data), and the synthetic ones so left out."""
    source = rows.get("data_source")
    if source is None or not (source == "real").any() or (source == "real").all():
        return rows, []
    return rows[source == "real"], sorted(set(rows.loc[source != "real", "config"]))


def _workload_row(workload: str, rows: pd.DataFrame, samples: Samples) -> dict[str, str]:
    rows, synthetic = real_first(rows)
    if per_sample(rows):
        every = rows[rows["samples_per_s"].notna()].sort_values(["samples_per_s", "config"], ascending=[False, True])
        left_out = sorted(set(rows["config"]) - set(every["config"]))
        basis = PER_SAMPLE_BASIS + (f"; no throughput recorded: {', '.join(left_out)}" if left_out else "")
        ranked, among = _crowned(every)
        speed = f"{_throughput(ranked.iloc[0])}"
        priced = ranked[ranked["usd_per_hour"].notna()]
        priced = priced.assign(_per_million=priced["usd_per_hour"] / 3600 / priced["samples_per_s"] * MILLION)
        priced = priced.sort_values(["_per_million", "config"])
    else:
        every = _comparable(rows).sort_values(["total_s", "config"])
        ranked, among = _crowned(every)
        basis = "total training time of runs of one experiment" + _run_shape(ranked.iloc[0])
        speed = f"{fmt.seconds(ranked.iloc[0]['total_s'])} s a run"
        priced = ranked[ranked["cost_usd"].notna()].sort_values(["cost_usd", "config"])
    if synthetic:
        basis += f"; real data only, synthetic-data runs left out: {', '.join(synthetic)}"
    fastest = ranked.iloc[0]
    faster = _faster_left_out(every, ranked)
    rivals = set(every.loc[every["usd_per_hour"].notna(), "config"])  # priced, whether ranked or not
    row = {
        "workload": workload,
        "compared on": basis,
        "fastest": str(fastest["config"]),
        "speed": speed,
        "time per run": f"{fmt.seconds(fastest['total_s'])} s ({fmt.interval(fastest, 'total', 'total_s')})"
        + _run_shape(fastest),
        "fastest: verdict": _lead(ranked, samples, "faster", lambda r: 1.0),
        "fastest: rests on": _rests_on(fastest, among, faster),
    }
    if priced.empty:
        unpriced = "no configuration of this workload has a price: add one with --price PLATFORM=USD_PER_HOUR"
        return row | {
            "cheapest": unpriced,
            "price": "",
            "cost": "",
            "cost per run": "",
            "cheapest: verdict": "",
            "cheapest: rests on": "",
        }
    cheapest = priced.iloc[0]
    verdict = _lead(priced, samples, "cheaper", lambda r: float(r["usd_per_hour"]) / 3600)
    unpriced_configs = sorted(set(ranked["config"]) - set(priced["config"]))
    if unpriced_configs:  # an owned machine has no hourly price: "Own or rent" weighs it
        verdict += f"; without an hourly price: {', '.join(unpriced_configs)}"
    cost = (
        f"{fmt.usd(cheapest['_per_million'])} per 1M training samples"
        if "_per_million" in cheapest
        else f"{fmt.usd(cheapest['cost_usd'])} a run"
    )
    return row | {
        "cheapest": str(cheapest["config"]),
        "price": price(cheapest),
        "cost": cost,
        "cost per run": fmt.usd(cheapest["cost_usd"]) + _run_shape(cheapest),
        "cheapest: verdict": verdict,
        "cheapest: rests on": _rests_on(cheapest, among, None, _one_price(every[every["config"].isin(rivals)])),
    }


# The configurations a summary crowns, in order of preference: a lead resting on repeats of what the runner does by
# default says what a user will get; a one-off sweep variant that ran fast once does not.
PREFERRED = (
    ("configurations of the default settings with repeats", lambda r: r["n_runs"] >= 2 and r["defaults"]),
    ("configurations with repeats", lambda r: r["n_runs"] >= 2),
    ("configurations of the default settings", lambda r: r["defaults"]),
)


def _crowned(ranked: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows the summary ranks, and which they are ("" where all of them): the first kind of PREFERRED that has
    any row; published rows, which record no settings, count as defaults."""
    rows = ranked.assign(defaults=ranked["defaults"].fillna(True).astype(bool)) if "defaults" in ranked else ranked
    rows = rows if "defaults" in rows else rows.assign(defaults=True)
    for words, admits in PREFERRED:
        chosen = rows[rows.apply(admits, axis=1)]
        if not chosen.empty:
            return chosen, "" if len(chosen) == len(rows) else words
    return rows, ""


def _faster_left_out(every: pd.DataFrame, ranked: pd.DataFrame) -> pd.Series | None:
    """The fastest configuration left out of the ranking where it beats the leader: said beside it."""
    first = every.iloc[0]
    return None if first["config"] in set(ranked["config"]) else first


ONE_PRICE = ("the only configuration with a price", "one machine priced")


def _one_price(priced: pd.DataFrame) -> str:
    """Where the cheapest had no rival at another price, what it was: "" where it had one."""
    if len(priced) == 1:
        return "the only configuration with a price"
    platforms = priced["platform"].unique()
    if len(platforms) == 1:
        return f"one machine priced ({platforms[0]}): the cheapest is its fastest"
    return ""


def _rests_on(row: pd.Series, among: str, faster: pd.Series | None, one_price: str = "") -> str:
    """What the bullet must say beside a leader: how few runs it rests on, what it was ranked among, what beat it
    outside that, and that it had no rival at another price."""
    runs = int(row["n_runs"])
    parts = ["1 run, no interval" if runs == 1 else f"{runs} runs"]
    if among:
        parts.append(f"ranked among {among}")
    if faster is not None:
        parts.append(f"{faster['config']} ran faster in {_runs(int(faster['n_runs']))}")
    if one_price:
        parts.append(one_price)
    return "; ".join(parts) if runs == 1 or among or one_price else ""


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def leaders(summary: pd.DataFrame) -> list[tuple[Leader, Leader | None]]:
    """Per workload: the fastest, and the cheapest where some configuration has a price."""
    found = []
    for _, row in summary.iterrows():
        fastest = Leader(
            str(row["workload"]), str(row["fastest"]), str(row["speed"]).split(" (")[0], "",
            _with_lead(row["fastest: rests on"], row["fastest: verdict"]),
        )  # fmt: skip
        cheapest = (
            Leader(str(row["workload"]), str(row["cheapest"]), str(row["cost"]), str(row["price"]),
                   _with_lead(row["cheapest: rests on"], row["cheapest: verdict"]))
            if row["price"]
            else None
        )  # fmt: skip
        found.append((fastest, cheapest))
    return found


def _with_lead(rests_on: str, verdict: object) -> str:
    """What a leader rests on, and whether its lead over the runner-up is one: a bullet never crowns a tie or a lead
    too few repeats can tell as if it were beyond noise."""
    text = str(verdict or "")
    lead = (
        "too few repeats to tell it from the runner-up" if text.startswith("too few repeats")
        else "a tie with the runner-up, not a lead" if "a tie, not a lead" in text
        else ""
    )  # fmt: skip
    return "; ".join(p for p in (str(rests_on or ""), lead) if p)


def bullet(fastest: Leader, cheapest: Leader | None) -> str:
    """A workload's line on the first screen, after its name: the leaders, and what each rests on."""
    if cheapest is not None and cheapest.config == fastest.config:
        notes = list(dict.fromkeys(p for n in (fastest.rests_on, cheapest.rests_on) if n for p in n.split("; ")))
        alone = [n for n in notes if n.startswith(ONE_PRICE)]  # no rival at another price: nothing was cheaper
        crown = "fastest" if alone else "fastest and cheapest"
        notes = [n for n in notes if n not in alone] + (["the only machine priced"] if alone else [])
        text = f"{crown} {fastest.config} ({fastest.figure}) at {cheapest.price} ({cheapest.figure})"
        return text + (f": {'; '.join(notes)}" if notes else "")
    text = f"fastest {fastest.config} ({fastest.figure}{_also(fastest)})"
    if cheapest is None:
        return f"{text}; no price to rank by cost"
    return f"{text}; cheapest {cheapest.config} at {cheapest.price} ({cheapest.figure}{_also(cheapest)})"


def _also(leader: Leader) -> str:
    return f"; {leader.rests_on}" if leader.rests_on else ""


# Providers whose machines are not rented by the hour: this machine, and a host of one's own.
OWN_PROVIDERS = ("local",)
ESTIMATE_COMMAND = "python -m orchestrate run --profiles gce-t4,aws-g4dn.xlarge --dry-run"


BEFORE_RENTING = (
    "No run here was on a rented cloud machine. To compare clouds before renting one, estimate the suite's time and "
    "cost on each from the runs measured so far (nothing is launched; python -m orchestrate profiles lists the "
    "profiles):"
)


def rented_runs(results: pd.DataFrame, catalog: Mapping[str, Profile]) -> bool:
    """Whether some run of the user's (not a reference run) was on a rented machine: a catalog profile with an
    hourly price, not this machine."""
    mine = results[~results["reference"].fillna(False).astype(bool)] if "reference" in results else results
    profiles = [catalog.get(str(platform)) for platform in mine["platform"].unique()]
    return any(p and p.provider not in OWN_PROVIDERS and (p.on_demand or p.spot) for p in profiles)


def price(row: pd.Series) -> str:
    return f"{fmt.usd(row['usd_per_hour'])}/h" if not fmt.missing(row.get("usd_per_hour")) else ""


def _throughput(row: pd.Series) -> str:
    interval = fmt.interval(row, "steady", "steady_epoch_s")
    return f"{row['samples_per_s']:,.0f} samples/s (steady epoch {fmt.seconds(row['steady_epoch_s'])} s, {interval})"


def _comparable(rows: pd.DataFrame) -> pd.DataFrame:
    base = rows[rows["is_base"].astype(bool)]
    shapes = rows[["epochs", "train_samples"]].fillna(0).apply(tuple, axis=1)
    # Without a base row: the most common experiment, ties going to the longer one.
    most_common = shapes.value_counts().sort_index(ascending=False).idxmax()
    return rows[shapes == (shapes[base.index[0]] if not base.empty else most_common)]


def _run_shape(row: pd.Series) -> str:
    """What "a run" was: the first (compiling) epoch weighs heavily in a short run, so a run's time holds for runs
    of this length only."""
    epochs, samples = row.get("epochs"), row.get("train_samples")
    if fmt.missing(epochs) or fmt.missing(samples):
        return ""
    return f"; a run of {int(epochs)} epochs x {int(samples):,} samples, the first compiling"


def _lead(ranked: pd.DataFrame, samples: Samples, word: str, scale: Callable[[pd.Series], float]) -> str:
    """One sentence: the leader against the runner-up, on per-repeat figures (x price per second for cost)."""
    leader = ranked.iloc[0]
    if len(ranked) < 2:
        priced = "priced " if word == "cheaper" else ""
        return f"{leader['config']} is the only {priced}configuration compared"
    runner = ranked.iloc[1]
    ours, our_machines = samples(str(leader["workload"]), str(leader["config"]))
    theirs, their_machines = samples(str(runner["workload"]), str(runner["config"]))
    comparison = compare(
        [v * scale(leader) for v in ours],
        [v * scale(runner) for v in theirs],
        candidate_machines=our_machines,
        base_machines=their_machines,
    )
    text = comparison.text("it", f"the runner-up {runner['config']}")  # the leader is named beside it
    if comparison.verdict == FASTER:
        return text.replace(" faster than ", f" {word} than ")
    # The leader has the best median, so the other verdicts are "same" (a tie) and "too few repeats".
    return f"{text}: a tie, not a lead" if comparison.verdict == SAME else text


# ---- the first screen: workload by machine -------------------------------------------------------------------

GLANCE_COLUMNS = ("workload", "machine", "backend", "time per epoch", "cost per epoch", "from", "verdict")
# A machine's estimate for a workload it has no run of: (workload, backend, platform, epoch samples) -> (seconds,
# low, high, basis) of one steady epoch, or None.
Estimated = Callable[[str, str, str, int], tuple[float, float, float, str] | None]


def glance_table(
    results: pd.DataFrame, own: Mapping[str, int | None], estimated: Estimated | None = None
) -> pd.DataFrame:
    """The first screen's table: per workload (the user's own first), one row per machine, its best configuration
    (that of the summary's ranking: the default settings with repeats first), time and cost of one steady epoch of
    the largest slice the workload was measured on, with the interval of its repeats or "1 run", measured or
    estimated, and the verdict: the fastest, the cheapest where more than one machine is priced, else how far
    behind. A user's workload (`own`: with the samples of its full epoch where its file declares them) is shown
    for its full epoch, and also estimated on the report's other GPU machines it has no run on."""
    rows: list[dict[str, str]] = []
    measured = results[results["samples_per_s"].notna()] if "samples_per_s" in results else results.iloc[0:0]
    for workload in sorted(set(measured["workload"]), key=lambda w: (w not in own, w)):
        chosen, _ = real_first(measured[measured["workload"] == workload])
        samples = own.get(workload) or int(chosen["train_samples"].max())
        best = _best_per_machine(chosen)
        lines = [_measured_line(row, samples) for row in best]
        if estimated is not None and workload in own:
            backend = str(best[0]["backend"])  # the backend its fastest measured configuration used
            for platform in sorted(set(measured["platform"]) - set(chosen["platform"])):
                found = estimated(workload, backend, platform, samples)
                price = measured.loc[measured["platform"] == platform, "usd_per_hour"].dropna()
                if found is not None:
                    lines.append(_estimated_line(platform, backend, found, price.iloc[0] if len(price) else None))
        rows += _with_verdicts(f"{workload}, {samples:,} samples", lines)
    return pd.DataFrame(rows, columns=list(GLANCE_COLUMNS))


def _best_per_machine(rows: pd.DataFrame) -> list[pd.Series]:
    best = []
    for _, machine in rows.groupby("platform", sort=True):
        crowned, _ = _crowned(machine.sort_values(["samples_per_s", "config"], ascending=[False, True]))
        best.append(crowned.iloc[0])
    return sorted(best, key=lambda r: -float(r["samples_per_s"]))


@dataclass(frozen=True)
class _Line:
    machine: str
    backend: str
    seconds: float
    low: float | None
    high: float | None
    usd_per_hour: float | None
    source: str


def _measured_line(row: pd.Series, samples: int) -> _Line:
    seconds = samples / float(row["samples_per_s"])
    steady, low, high = (row.get(k) for k in ("steady_epoch_s", "steady_low", "steady_high"))
    bounded = not any(fmt.missing(v) for v in (steady, low, high))
    runs = int(row["n_runs"])
    source = "measured: 1 run" if runs == 1 else f"measured: {runs} runs"  # no interval: the time shows no range
    marks = [
        word
        for word, given in (("reference", row.get("reference")), ("synthetic", row.get("data_source") == "synthetic"))
        if given is True or (given and not fmt.missing(given))
    ]
    return _Line(
        f"{row['platform']}" + (f" ({', '.join(marks)})" if marks else ""),
        str(row["backend"]),
        seconds,
        seconds * float(low) / float(steady) if bounded else None,
        seconds * float(high) / float(steady) if bounded else None,
        None if fmt.missing(row.get("usd_per_hour")) else float(row["usd_per_hour"]),
        source,
    )


def _estimated_line(
    platform: str, backend: str, found: tuple[float, float, float, str], usd_per_hour: float | None
) -> _Line:
    seconds, low, high, basis = found
    return _Line(platform, backend, seconds, low, high, usd_per_hour, f"estimated: {basis}")


def _with_verdicts(workload: str, lines: list[_Line]) -> list[dict[str, str]]:
    fastest = min(lines, key=lambda line: line.seconds)
    priced = [line for line in lines if line.usd_per_hour is not None]
    cheapest = min(priced, key=lambda line: line.seconds * (line.usd_per_hour or 0.0)) if len(priced) > 1 else None
    rows = []
    for line in sorted(lines, key=lambda line: line.seconds):
        behind = f"{line.seconds / fastest.seconds:.1f}x its time"
        if line is fastest:
            verdict = "fastest and cheapest" if line is cheapest else "fastest"
            verdict += "; only machine priced" if priced == [line] else ""
        else:
            verdict = f"cheapest; {behind}" if line is cheapest else behind
        rows.append(
            {
                "workload": workload,
                "machine": line.machine,
                "backend": line.backend,
                "time per epoch": _span(line, 1.0, "s"),
                "cost per epoch": "no price" if line.usd_per_hour is None else _span(line, line.usd_per_hour / 3600),
                "from": line.source,
                "verdict": verdict,
            }
        )
    return rows


def _span(line: _Line, scale: float, unit: str = "$") -> str:
    def one(value: float) -> str:
        return fmt.usd(value * scale).removeprefix("$") if unit == "$" else fmt.seconds(value * scale)

    figure = f"${one(line.seconds)}" if unit == "$" else f"{one(line.seconds)} s"
    if line.low is None or line.high is None:
        return figure
    return f"{figure} ({one(line.low)}-{one(line.high)})"
