"""benchmark-gpus-2017-11 on today's GPUs, made from the committed H100 and H200 logs and the published study."""

from __future__ import annotations

import json
import shutil
import statistics
from collections import Counter
from pathlib import Path

from benchmarks.stats import Estimate
from campaign import roofline, today
from tests.report.report_helpers import write_run

LOGS = Path(__file__).resolve().parents[2] / "logs" / "reference"


def test_every_studied_workload_has_both_gpus_published_and_measured_with_verdicts() -> None:
    rows = today.rows(LOGS, today.load_prices())
    assert {(r.workload, r.backend) for r in rows} == {
        (w, b)
        for w in (
            "mnist_mlp",
            "mnist_cnn",
            "cifar10_cnn",
            "imdb_fasttext",
            "imdb_bidirectional_lstm",
            "lstm_text_generation",
        )
        for b in ("jax", "torch")
    }
    for r in rows:
        assert set(r.published) == {"k80", "p100"} and r.scale >= 1
        assert all(r.estimates[g].n >= 4 for g in today.GPUS)
        assert r.faster in ("H100", "H200", "neither beyond noise", *today.UNDECIDABLE)
        assert set(r.cheaper) == {"AWS", "Google Cloud", "RunPod"}
    # The short suite trains imdb_bidirectional_lstm on 5,000 of the published 25,000 reviews.
    [bilstm] = [r for r in rows if (r.workload, r.backend) == ("imdb_bidirectional_lstm", "jax")]
    assert bilstm.scale == 5


def test_prices_are_dated_and_sourced_for_three_clouds_per_gpu() -> None:
    prices = today.load_prices()
    for gpu in today.GPUS:
        mine = [p for p in prices if p.gpu == gpu]
        assert len({p.cloud for p in mine}) >= 3
        assert all(p.usd_per_gpu_hour > 0 and len(p.date) == 10 and p.source for p in mine)


def test_the_section_states_its_verdicts_and_the_summary_follows_the_table() -> None:
    text = today.section(LOGS)
    rows = today.rows(LOGS, today.load_prices())
    assert text.startswith("## benchmark-gpus-2017-11 on today's GPUs")
    h200 = sum(r.faster == "H200" for r in rows)
    assert f"the H200 ran faster beyond noise in {h200}," in text
    assert text.count("host-bound (hosts compared)") == sum(r.host_bound for r in rows)


def test_the_summary_answers_the_studys_question_per_dollar_from_the_rows() -> None:
    prices = today.load_prices()
    rows = today.rows(LOGS, prices)
    text = today.summary(rows, prices)
    picks = Counter(f"the {p.gpu} on {p.cloud}" for p in (today.cheapest_today(r, prices) for r in rows))
    for name, n in picks.items():
        assert f"{name} ({n} pair" in text
    k80 = today.published_prices()["k80"]
    against = []
    for r in rows:
        offer = today.cheapest_today(r, prices)
        cost = r.estimates[offer.gpu].value * r.scale * offer.usd_per_gpu_hour
        assert cost == min(r.estimates[p.gpu].value * r.scale * p.usd_per_gpu_hour for p in prices)
        against.append(cost / (r.published["k80"] * k80))
    assert (
        f"(median {statistics.median(against):.2f}x; less than on the K80 in {sum(a < 1 for a in against)} of 12"
        in text
    )


def _row(workload: str, h100_s: float, h200_s: float, k80_s: float) -> today.Row:
    return today.Row(workload, "jax", {"k80": k80_s}, 1.0, {"H100": Estimate(h100_s, 5), "H200": Estimate(h200_s, 5)},
                     "neither beyond noise", {}, True)  # fmt: skip


def test_the_per_dollar_answer_follows_the_prices_not_a_fixed_text() -> None:
    """Epochs of 1.0 s (H100) and 0.8 s (H200) at $2 and $3 an hour on one cloud: the H100 is cheaper there; at
    $0.50 an hour a 10 s K80 epoch cost more, so today's GPU buys training per dollar too. One cloud was cheapest
    for both GPUs' picks."""
    one_cloud = [
        today.Price("H100", "X", "s", 2.0, "2026-01-01", "src"),
        today.Price("H200", "X", "s", 3.0, "2026-01-01", "src"),
    ]
    rows = [_row("mnist_mlp", 1.0, 0.8, 10.0), _row("mnist_cnn", 1.0, 0.5, 10.0)]
    text = today.summary(rows, one_cloud)
    assert "the H100 on X (1 pair), the H200 on X (1 pair)" in text
    assert "buys both speed and training per dollar" in text and "X's offers were the cheapest for every pair" in text
    slow = today.summary([_row("mnist_mlp", 1.0, 0.8, 0.1)], one_cloud)
    assert "buys speed, not training per dollar" in slow and "cheapest for every pair" not in slow


def test_the_compile_cache_rounds_come_from_the_committed_manifests() -> None:
    h100 = LOGS / "NVIDIA-H100"
    rounds = today.cache_rounds(h100 / "console", today.timed_repeats(h100))
    assert rounds["jax"]["workloads"] == rounds["torch"]["workloads"] == 9
    assert all(r["warm_s"] < r["cold_s"] for r in rounds.values())
    # machine h's fresh round ran after a preloaded parent stopped at its budget: the runs that parent finished
    # tell its cache was warm, which the manifests alone leave unknown
    unread = today.cache_rounds(h100 / "console")
    assert rounds["jax"]["warm_s"] != unread["jax"]["warm_s"]


def test_a_cache_round_counts_only_the_repeats_phase_processes(tmp_path: Path) -> None:
    """Headroom and other phases leave manifests beside the consoles too; their processes are not repeats."""
    repeats = [{"phase": "repeats", "run_id": "gpu-repeats-x", "backend": "jax", "repeat": r, "workload": "mnist_mlp",
                "returncode": 0, "wall_s": wall} for r, wall in ((1, 20.0), (2, 12.0), (3, 14.0))]  # fmt: skip
    headroom = [{"phase": "headroom", "run_id": "gpu-headroom-x", "backend": "jax", "workload": "mnist_mlp",
                 "returncode": 0, "wall_s": 1.0}]  # fmt: skip
    (tmp_path / "m-part1-manifest.json").write_text(json.dumps(repeats))
    (tmp_path / "m-part2-headroom-manifest.json").write_text(json.dumps(headroom))
    assert today.cache_rounds(tmp_path) == {"jax": {"workloads": 1, "cold_s": 20.0, "warm_s": 13.0}}


def test_a_folder_without_both_gpus_is_a_bad_input(tmp_path: Path) -> None:
    assert today.main([str(tmp_path)]) == 2


SOME_RUNS = {
    today.PLATFORMS["H100"]: ("gpu-repeats-h100-a", "gpu-repeats-h100-b"),
    today.PLATFORMS["H200"]: ("gpu-repeats-a", "gpu-repeats-b"),
}


def test_the_results_markdown_is_the_report_first_then_the_campaigns_sections(tmp_path: Path) -> None:
    """`python -m campaign.results`: the product's report of the logs (its summary first), then the study on the
    measured GPUs and those runs on their rooflines; the product's own page carries neither."""
    from campaign import results
    from report.cli import main

    logs = tmp_path / "logs"
    # Two machines' repeats of each GPU give every part of the page, in seconds rather than the minutes that drawing
    # every committed run takes.
    for platform, runs in SOME_RUNS.items():
        for run in runs:
            shutil.copytree(LOGS / platform / run, logs / platform / run)
    target = tmp_path / "results.md"
    assert results.main(["--logs", str(logs), "--out", str(target)]) == 0
    text = target.read_text()
    assert text.startswith("# Benchmark results") and text.index("## Summary") < text.index("## cifar10_cnn")
    assert text.index("# Benchmark results") < text.index("on today's GPUs") < text.index(f"## {roofline.TITLE}")
    parts = today.section_parts(logs)
    assert parts is not None and parts.summary in text
    assert (tmp_path / "results_charts" / "roofline.png").is_file()

    assert main([str(logs), "--study", today.STUDY, "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page" / "index.html").read_text()
    assert '<h3 id="today">' not in page and '<h3 id="roofline">' not in page


def _repeats(root: Path, gpu: str, machine: str, steady: list[float], preloaded: bool = False) -> None:
    run_id = f"gpu-repeats-{machine}{'-pre' if preloaded else ''}"
    process = {"process": {"position": 1, "workloads": 1, "preloaded": True}} if preloaded else {}
    for index, seconds in enumerate(steady, 1):
        write_run(root, platform=today.PLATFORMS[gpu], run_id=run_id, repeat=index,
                  elapsed=(9.0, seconds, seconds * 1.01, seconds * 0.99), host_id=machine,
                  schema2={"repeat": {"group": run_id, "index": index}, **process})  # fmt: skip


def test_verdicts_that_one_machine_decides_are_told_apart_from_those_every_machine_keeps(tmp_path: Path) -> None:
    for machine in ("h100-a", "h100-b", "h100-c"):
        _repeats(tmp_path, "H100", machine, [0.50, 0.51])
    for machine in ("h200-x", "h200-y", "h200-z"):
        _repeats(tmp_path, "H200", machine, [1.00, 1.02])
    runs = list(today.complete_runs(tmp_path))
    clear = today.machines_left_out(runs, today.load_prices())
    assert clear == {("mnist_mlp", "jax"): {"kept": 6, "tried": 6, "stable": True}}
    unmoved = today.verdicts_moved_by_one_machine(runs, today.load_prices())
    assert unmoved == {"machines": 6, "median": 0, "range": [0, 0]}

    # A fourth H100 machine, slower than both H200s, joins: with it the H100 is no longer faster beyond noise,
    # and leaving it out makes it so again.
    _repeats(tmp_path, "H100", "h100-d", [2.0, 2.1])
    runs = list(today.complete_runs(tmp_path))
    full = today._verdicts(today._measured(runs, today.fresh_repeat), today.load_prices())
    assert full[("mnist_mlp", "jax")]["faster"] != "H100"
    decided = today.machines_left_out(runs, today.load_prices())[("mnist_mlp", "jax")]
    assert not decided["stable"] and decided["kept"] < decided["tried"] == 7
    moved = today.verdicts_moved_by_one_machine(runs, today.load_prices())
    assert moved["machines"] == 7 and moved["range"][1] >= 1  # leaving h100-d out moves at least `faster`


def test_a_verdict_that_rests_on_one_machine_is_marked_in_the_section(tmp_path: Path) -> None:
    for machine in ("h100-a", "h100-b", "h100-c"):
        _repeats(tmp_path, "H100", machine, [0.50, 0.51])
    for machine in ("h200-x", "h200-y", "h200-z"):
        _repeats(tmp_path, "H200", machine, [1.00, 1.02])
    steady = today.section(tmp_path)
    assert not [line for line in steady.splitlines() if line.startswith("| ") and today.FRAGILE_MARK in line]
    assert "Of those 4 verdicts beyond noise, 4 hold whichever one machine's repeats are left out." in steady

    _repeats(tmp_path, "H100", "h100-d", [2.0, 2.1])  # slower than both H200s: the verdict now rests on it
    shaky = today.section(tmp_path)
    [row] = [line for line in shaky.splitlines() if line.startswith("| mnist_mlp | jax |") and "(n=" in line]
    assert row.split(" | ")[6].endswith(today.FRAGILE_MARK)
    assert shaky.count(today.FRAGILE_LEGEND) == 2


def test_the_design_verdicts_say_how_many_fresh_verdicts_every_machine_keeps() -> None:
    result = today.design_verdicts(LOGS, design="preloaded")
    stable = [p for p in result["pairs"] if p["fresh_machines_left_out"]["stable"]]
    assert result["fresh_stable"] == len(stable) < result["compared"]
    assert result["same_where_fresh_stable"] == sum(p["same"] for p in stable)


def test_a_design_is_judged_with_both_gpus_measured_in_it_where_both_have_its_runs(tmp_path: Path) -> None:
    """Fresh: the H100 twice as fast. The design runs 2.5x slower on either GPU: set beside fresh H200 runs, its
    H100 runs turn the verdict; with the H200's runs in the design too, the H100 is twice as fast again."""
    for gpu, seconds in (("H100", 0.5), ("H200", 1.0)):
        for machine in ("a", "b", "c"):
            _repeats(tmp_path, gpu, f"{gpu}-{machine}", [seconds, seconds * 1.02])
    for machine in ("a", "b"):
        _repeats(tmp_path, "H100", f"H100-{machine}", [1.25, 1.27, 1.26], preloaded=True)
    one_side = today.design_verdicts(tmp_path, design="preloaded")
    assert one_side["h200_side"] == {"jax": "fresh"}
    [pair] = one_side["pairs"]
    assert pair["fresh"]["faster"] == "H100" and pair["preloaded"]["faster"] == "H200" and not pair["same"]
    assert "faster" in pair["reversed"]
    assert one_side["verdicts"]["reversed"] == len(pair["reversed"]) >= 1
    assert one_side["verdicts"]["same"] <= one_side["verdicts"]["compared"] - len(pair["reversed"])

    _repeats(tmp_path, "H200", "H200-a", [2.5, 2.55, 2.5, 2.52], preloaded=True)
    one_machine = today.design_verdicts(tmp_path, design="jax:preloaded")
    [pair] = one_machine["pairs"]
    assert set(pair["jax:preloaded"].values()) == {today.TOO_FEW_MACHINES_WORDS} and not pair["same"]
    assert pair["reversed"] == []  # an undecided verdict names no GPU, so it reverses nothing
    assert one_machine["design_decided"] == one_machine["same_where_design_decided"] == 0

    _repeats(tmp_path, "H200", "H200-b", [2.5, 2.53], preloaded=True)
    both = today.design_verdicts(tmp_path, design="jax:preloaded")
    assert both["h200_side"] == {"jax": "preloaded"}
    [pair] = both["pairs"]
    assert pair["h200_repeats"] == {"fresh": 6, "jax:preloaded": 6}
    assert pair["jax:preloaded"]["faster"] == "H100" and pair["same"]
    assert both["design_decided"] == both["same_where_design_decided"] == 1
    counts = {"compared": 4, "same": 4, "reversed": 0}  # faster, and cheaper at each of three clouds
    assert both["verdicts"] == counts
    assert both["by_backend"] == {"jax": {"compared": 1, "design_decided": 1, "same": 1, "verdicts": counts}}


def test_the_verdicts_from_each_runs_first_steady_epochs_follow_those_epochs(tmp_path: Path) -> None:
    """H100 runs whose first steady epoch is slow (2.0 s, then 0.5 s twice) against H200 runs at 1.0 s: the H100 is
    faster from all three steady epochs, slower from the first alone or the first two (their median is their
    mean), and the steady epochs of a run spread where the H200's do not."""
    for gpu, epochs in (("H100", (9.0, 2.0, 0.5, 0.5)), ("H200", (9.0, 1.0, 1.0, 1.0))):
        for machine in ("a", "b", "c"):
            for index in (1, 2):
                write_run(tmp_path, platform=today.PLATFORMS[gpu], run_id=f"gpu-repeats-{gpu}-{machine}",
                          repeat=index, elapsed=epochs, host_id=f"{gpu}-{machine}",
                          schema2={"repeat": {"group": f"gpu-repeats-{gpu}-{machine}", "index": index}})  # fmt: skip
    result = today.steady_epochs(tmp_path, counts=(1, 2, 3))
    assert [(c["steady_epochs"], c["same"], c["compared"]) for c in result["cut"]] == [(1, 0, 1), (2, 0, 1), (3, 1, 1)]
    assert result["cut"][0]["changed"] == ["mnist_mlp jax"]
    h100, h200 = result["spread"]["H100 jax"], result["spread"]["H200 jax"]
    assert h100["epochs_within_run_sd"] > 0.5 and h200["epochs_within_run_sd"] == 0.0
    assert h100["runs_within_machine_sd"] == h200["runs_within_machine_sd"] == 0.0
    assert h100["steady_epochs_per_run"] == h200["steady_epochs_per_run"] == 3


def test_the_committed_runs_keep_every_machine_stable_verdict_from_two_steady_epochs(capsys) -> None:
    assert today.main([str(LOGS), "--epochs"]) == 0
    result = json.loads(capsys.readouterr().out)
    two = next(c for c in result["cut"] if c["steady_epochs"] == 2)
    assert two["same_where_fresh_stable"] == two["fresh_stable"] > 0
    for figures in result["spread"].values():
        if figures["runs_within_machine_sd"] is None:  # one run per machine (the native twins' so far): no spread
            continue
        assert figures["epochs_within_run_sd"] < figures["runs_within_machine_sd"]
