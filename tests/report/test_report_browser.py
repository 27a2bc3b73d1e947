"""The HTML report in a real headless browser (Debian's chromium): it renders, every chart loads, a screenshot
is taken. Needs `apt-get install chromium`; without it these tests fail, they do not skip."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from report_helpers import REPO, compiled_and_pip_runs, write_run

from benchmarks.step_costs import recorded
from report.cli import main

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Appended to a copy of the page: after load, writes each image's state into the DOM for --dump-dom.
PROBE = """<script>
window.addEventListener("load", () => {
  const states = Array.from(document.images).map(
    (img) => ({src: img.getAttribute("src"), loaded: img.complete && img.naturalWidth > 0}));
  const out = document.createElement("pre");
  out.id = "image-check";
  out.textContent = JSON.stringify(states);
  document.body.appendChild(out);
});
</script>"""
BROKEN = '<img src="charts/no-such-chart.png" alt="deliberately missing">'
# After load, with every <details> section open or left as the page has it: the document's width against the
# window's, and where the first summary line sits and what it says.
LAYOUT = r"""<script>
window.addEventListener("load", () => {
  if (OPEN) document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const rows = Array.from(document.querySelectorAll("#glance-table tbody tr"));
  const box = document.querySelector("#glance-table .table-box");
  const out = document.createElement("pre");
  out.id = "layout-check";
  out.textContent = JSON.stringify({
    documentWidth: document.documentElement.scrollWidth,
    windowWidth: window.innerWidth,
    windowHeight: window.innerHeight,
    height: document.documentElement.scrollHeight,
    rows: rows.map((r) => ({
      cells: Array.from(r.cells).map((c) => c.textContent.replace(/\s+/g, " ").trim()),
      bottom: r.getBoundingClientRect().bottom,
    })),
    glanceScrolls: box ? box.scrollWidth > box.clientWidth : null,
  });
  document.body.appendChild(out);
});
</script>"""
WINDOW = (1366, 900)  # a laptop's screen


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is required for the report's browser tests: apt-get install -y chromium")
    return path


def _browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [_chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report with repeats, a partial run, synthetic data, an unreadable file and a published study."""
    root = tmp_path_factory.mktemp("browser")
    logs = root / "logs"
    for i, elapsed in enumerate([(6.0, 2.0, 2.1), (6.5, 2.2, 2.0), (5.8, 1.9, 2.3)]):
        write_run(logs, run_id=f"20260101T00000{i}Z-000{i}", backend="tensorflow", elapsed=elapsed)
        write_run(logs, run_id=f"20260101T00000{i}Z-000{i}", backend="jax", elapsed=[e * 0.6 for e in elapsed])
    write_run(logs, run_id="20260101T000009Z-0009", backend="torch", source="synthetic")
    write_run(
        logs,
        run_id="20260101T000009Z-0009",
        backend="torch",
        workload="mnist_cnn",
        status="partial",
        elapsed=(30.0,),
        epochs_planned=12,
    )
    write_run(
        logs, run_id="20260101T000009Z-0009", backend="tensorflow", workload="mnist_cnn", elapsed=(30.0, 20.0, 20.0)
    )
    (logs / "local" / "20260101T000009Z-0009" / "cifar10_cnn_jax.csv").write_text("")
    out = root / "report"
    assert main([str(logs), "--out", str(out), "--price", "local=0.10", "--study", "cpu-or-gpu-2017-07"]) == 0
    return out / "index.html"


def test_page_renders_and_every_chart_loads(page: Path, tmp_path: Path) -> None:
    images = re.findall(r'<img src="([^"]+)"', page.read_text())
    assert len(images) >= 6  # time and cost per workload, and the study's comparison charts
    probe = page.with_name("probe.html")  # beside the page: the same relative links
    probe.write_text(page.read_text().replace("</body>", BROKEN + PROBE + "</body>"))
    dom = _browse(probe, tmp_path / "profile", "--dump-dom", "--virtual-time-budget=10000").stdout
    found = re.search(r'<pre id="image-check">(.*?)</pre>', dom, re.S)
    assert found, "the page's scripts did not run to the end of load"
    states = {s["src"]: s["loaded"] for s in json.loads(html.unescape(found.group(1)))}
    assert states.pop("charts/no-such-chart.png") is False  # the probe does see a broken image
    assert states == dict.fromkeys(images, True)
    for heading in ("Benchmark report", "Results by workload", "Measured vs published", "Machine time"):
        assert heading in dom


def test_screenshot(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _browse(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,3000", "--hide-scrollbars")
    with Image.open(shot) as image:
        assert image.size == (1400, 3000)
        colours = image.convert("L").getextrema()
    assert colours[1] - colours[0] > 200, "the screenshot is blank"
    print(f"screenshot: {shot}")


@pytest.fixture(scope="module")
def own_or_rent_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The issue 12 pages: the committed H200 runs as a reference, and the home-server study alone."""
    root = tmp_path_factory.mktemp("own-or-rent")
    h200 = root / "h200"
    assert main([str(REPO / "logs"), "--reference", "NVIDIA-H200", "--out", str(h200)]) == 0
    assert main(["--study", "home-server-2018", "--out", str(root / "home")]) == 0
    return {"h200": h200 / "index.html", "home": root / "home" / "index.html"}


@pytest.mark.parametrize("name", ["h200", "home"])
def test_summary_break_even_and_energy_render(own_or_rent_pages: dict[str, Path], tmp_path: Path, name: str) -> None:
    page = own_or_rent_pages[name]
    dom = _browse(page, tmp_path / "profile", "--dump-dom", "--virtual-time-budget=10000").stdout
    for heading in ("Summary: where to train", "Own or rent", "Energy"):
        assert heading in dom
    # The two 2018 posts, recomputed from their inputs, on every page:
    assert "903.34 / 0.27 / 24 h = 139.4 days: the published 127 does not follow" in dom
    assert "0.90 x 24 h x 1 d = 21.60 USD a day" in dom
    assert "69.1 Wh for one siamese_lstm run" in dom  # the home server's peak draw x its published run time
    if name == "h200":
        assert "runpod-h200" in dom and "(reference)" in dom  # priced, and labelled as the committed runs
        # The repeats of 2026-11-23 recorded GPU energy through NVML's counter; the older runs did not.
        assert "nvml-energy-counter" in dom and "Wh" in dom
        assert "no base run" not in dom
    shot = tmp_path / f"{name}.png"
    _browse(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,2200", "--hide-scrollbars")
    with Image.open(shot) as image:
        colours = image.convert("L").getextrema()
    assert colours[1] - colours[0] > 200, "the screenshot is blank"


def _layout(page: Path, profile: Path, open_sections: bool) -> dict[str, object]:
    probe = page.with_name("layout-probe.html")  # beside the page: the same relative links
    script = LAYOUT.replace("OPEN", "true" if open_sections else "false")
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    size = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    dom = _browse(probe, profile, size, "--dump-dom", "--virtual-time-budget=10000").stdout
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.S)
    assert found, "the page's scripts did not run to the end of load"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.parametrize("open_sections", [False, True])
def test_the_reference_report_fits_a_1366_px_window(
    own_or_rent_pages: dict[str, Path], tmp_path: Path, open_sections: bool
) -> None:
    """No column cut off: with every section open too, the document is no wider than the window (wide tables scroll
    in their own box). The first screen is one table of workload by machine, every workload's row above the fold,
    its time and cost per epoch with their interval; with one machine priced, no "cheapest" is crowned."""
    layout = _layout(own_or_rent_pages["h200"], tmp_path / "profile", open_sections)
    assert layout["windowWidth"] == WINDOW[0]
    assert layout["documentWidth"] <= WINDOW[0], layout
    rows = layout["rows"]
    assert isinstance(rows, list) and not layout["glanceScrolls"], layout
    workloads = [r["cells"][0].split(",")[0] for r in rows]
    assert len(rows) == len(set(workloads)) >= 11  # one machine: a row per workload
    # No workload of the user's here: the reference runs' example files are among the others, in order.
    assert workloads == sorted(workloads) and {"small_cnn", "small_transformer"} <= set(workloads), workloads
    first = rows[0]["cells"]
    assert first[:3] == ["cifar10_cnn, 50,000 samples", "NVIDIA-H200 (reference, synthetic)", "jax"], first
    assert re.fullmatch(r"[\d.]+ s \([\d.]+-[\d.]+\)", first[3]) and re.fullmatch(
        r"\$[\d.]+ \([\d.]+-[\d.]+\)", first[4]
    )
    assert all(r["cells"][6] == "fastest; only machine priced" for r in rows)  # one machine: no "cheapest"
    assert max(float(r["bottom"]) for r in rows) <= float(layout["windowHeight"]), "a row is below the first screen"
    if not open_sections:
        assert int(layout["height"]) < 20_000, "the folded page is still very long"
    shot = tmp_path / "first-screen.png"
    _browse(
        own_or_rent_pages["h200"],
        tmp_path / "profile",
        f"--screenshot={shot}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    )
    with Image.open(shot) as image:
        assert image.size == WINDOW
    print(f"screenshot: {shot}")


@pytest.fixture(scope="module")
def own_model_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's own model, one run of it on this machine, beside the committed H200 runs: its step costs measured by
    `python -m benchmarks step-costs` as a dry run measures them."""
    root = tmp_path_factory.mktemp("own-model")
    logs = root / "logs"
    example = REPO / "examples" / "workloads" / "tiny_mlp.py"  # no run of it among the reference runs
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "step-costs", "--workload-file", str(example), "--out", str(logs)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (costs,) = recorded(logs)
    plugin = {"kind": "file", "file": example.name, "sha256": costs.sha256}
    extra = {"plugin": plugin, "distribution": {"devices": 1, "global_batch_size": 64}}
    write_run(logs, workload="tiny_mlp", source="synthetic", elapsed=(4.0, 2.2, 2.1), train_samples=512, schema2=extra)
    (logs / "reference").mkdir()
    (logs / "reference" / "NVIDIA-H200").symlink_to(REPO / "logs" / "reference" / "NVIDIA-H200")
    assert main([str(logs), "--reference", "NVIDIA-H200", "--out", str(root / "report")]) == 0
    return root / "report" / "index.html"


def test_the_users_own_model_is_first_marked_as_one_run_and_estimated_on_the_h200(
    own_model_page: Path, tmp_path: Path
) -> None:
    """The user's model heads the first screen, above the fold at 1366 x 900: its one run here, marked so, and its
    estimate on the H200 beside it, from its step costs, for the full epoch its file declares."""
    layout = _layout(own_model_page, tmp_path / "profile", False)
    rows = [r["cells"] for r in layout["rows"]]  # type: ignore[union-attr]
    ours = [r for r in rows if r[0].startswith("tiny_mlp")]
    assert rows[: len(ours)] == ours and len(ours) == 2, rows
    assert {r[0] for r in ours} == {"tiny_mlp, 8,192 samples"}  # SPEC.shapes.train_samples
    h200, local = ours
    assert h200[1:3] == ["NVIDIA-H200", "jax"] and h200[5] == "estimated: physics" and h200[6].startswith("fastest")
    assert local[1:3] == ["local (synthetic)", "jax"] and local[5] == "measured: 1 run" and local[4] == "no price"
    assert re.fullmatch(r"[\d.]+x its time", local[6]), local
    bottoms = [float(r["bottom"]) for r in layout["rows"]]  # type: ignore[union-attr]
    assert max(bottoms[: len(ours)]) <= float(layout["windowHeight"]) and not layout["glanceScrolls"], layout
    shot = tmp_path / "own-model.png"
    _browse(own_model_page, tmp_path / "profile", f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}")
    with Image.open(shot) as image:
        assert image.size == WINDOW and image.convert("L").getextrema()[0] < 100
    print(f"screenshot: {shot}")


# After load, every section open: where each claims table's verdict cells end against the window, and whether any
# claims table must scroll to show them.
VERDICTS_PROBE = r"""<script>
window.addEventListener("load", () => {
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const tables = Array.from(document.querySelectorAll("table.claims"));
  const cells = tables.flatMap((t) => Array.from(t.querySelectorAll("tbody tr td:nth-child(5)")));
  const out = document.createElement("pre");
  out.id = "verdict-check";
  out.textContent = JSON.stringify({
    windowWidth: window.innerWidth,
    tables: tables.length,
    verdicts: cells.map((c) => c.textContent.trim()),
    rightmost: Math.max(...cells.map((c) => c.getBoundingClientRect().right)),
    scrolls: tables.some((t) => t.parentElement.scrollWidth > t.parentElement.clientWidth),
  });
  document.body.appendChild(out);
});
</script>"""


def test_the_claims_verdicts_fit_a_1366_px_window(tmp_path: Path) -> None:
    """A study page whose claims carry the user's runs (the widest cells): every verdict is on screen, no claims
    table scrolls."""
    logs = tmp_path / "logs"
    compiled_and_pip_runs(logs, 6, 1.75)
    out = tmp_path / "report"
    assert main([str(logs), "--out", str(out), "--study", "cpu-or-gpu-2017-07"]) == 0
    probe = out / "verdict-probe.html"
    probe.write_text((out / "index.html").read_text().replace("</body>", VERDICTS_PROBE + "</body>"))
    size = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    dom = _browse(probe, tmp_path / "profile", size, "--dump-dom", "--virtual-time-budget=10000").stdout
    found = re.search(r'<pre id="verdict-check">(.*?)</pre>', dom, re.S)
    assert found, "the page's scripts did not run to the end of load"
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["tables"] == 2 and any("contradicted by our runs" in v for v in layout["verdicts"]), layout
    assert layout["rightmost"] <= layout["windowWidth"] == WINDOW[0] and not layout["scrolls"], layout
