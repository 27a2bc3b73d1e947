"""The typed run-metadata schema: round trip, old logs, unknown keys, and the documented key list."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.metadata import (
    SCHEMA_VERSION,
    Energy,
    Fingerprint,
    Repeat,
    RunMetadata,
    RunSpecRecord,
    Settings,
    Stability,
    StabilityLabel,
    Status,
    Timing,
    key_list,
)

ROOT = Path(__file__).resolve().parents[2]


def _full() -> RunMetadata:
    return RunMetadata(
        run_id="r",
        workload="mnist_mlp",
        backend="jax",
        platform="local",
        status=Status.COMPLETE,
        settings=Settings(jit_compile=True, steps_per_execution=32, host_gc="frozen"),
        fingerprint=Fingerprint("gpu", "jax", 16.7, "million loop iterations/s", 1.3, gemm_tflops=392.2),
        repeat=Repeat("g", 2, planned=3),
        timing=Timing(first_epoch_s=6.3, steady_median_s=0.39, steady_epochs=4, total_s=7.9),
        stability=Stability(0.06, 4, [3], StabilityLabel.UNSTABLE, 0.9, True),
        energy=Energy(gpu_joules=52.3, gpu_wh=0.0145, gpu_joules_per_epoch=[52.3], gpu_method="nvml-energy-counter"),
        telemetry={"interval_s": 0.2, "samples": 10},
        run_spec=RunSpecRecord("a" * 64, "b" * 64, 3, 85052),
    )


def test_round_trip_through_json_keeps_every_typed_field() -> None:
    meta = _full()
    text = json.dumps(meta.to_dict())
    back = RunMetadata.from_dict(json.loads(text))
    assert back == meta
    assert json.loads(text)["stability"]["label"] == "unstable" and json.loads(text)["status"] == "complete"
    assert (
        back.status is Status.COMPLETE
        and back.stability is not None
        and back.stability.label is StabilityLabel.UNSTABLE
    )


def test_a_version_1_log_reads_with_the_newer_blocks_unknown() -> None:
    old = json.loads((ROOT / "logs/reference/NVIDIA-H200/gpu-suite-jax-default/mnist_mlp_jax.json").read_text())
    meta = RunMetadata.from_dict(old)
    assert meta.schema_version == 1 and meta.status is Status.COMPLETE and meta.timing is not None
    assert meta.repeat is None and meta.stability is None and meta.fingerprint is None and meta.energy is None


def test_unknown_keys_are_kept_not_dropped() -> None:
    raw = {**_full().to_dict(), "from_the_future": {"x": 1}}
    meta = RunMetadata.from_dict(raw)
    assert meta.extra == {"from_the_future": {"x": 1}} and meta.to_dict() == raw
    assert RunMetadata.from_dict({}).status is Status.PARTIAL  # a log that never said is not a result


def _block(text: str, name: str) -> str:
    """The text between `name {` and its matching `}`."""
    start = text.index(name + " {") + len(name) + 2
    depth, end = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        end += 1
    return text[start : end - 1]


def test_the_documented_key_list_matches_the_schema() -> None:
    doc = (ROOT / "docs/architecture.md").read_text()
    listing = doc[doc.index("Metadata JSON keys") :]
    listing = listing[listing.index("```") + 3 :]
    listing = listing[: listing.index("```")]
    top_level = re.sub(r"\{[^{}]*(\{[^{}]*\}[^{}]*)*\}|\([^()]*\)|\[[^\[\]]*\]", "", listing)
    documented = set(re.findall(r"[a-z_][a-z0-9_]*", top_level)) - {"null"}
    keys = key_list()
    assert documented == set(keys[""]) | {"schema_version"}
    for block, names in keys.items():
        if block:
            section = _block(listing, block)
            assert all(re.search(rf"\b{name}\b", section) for name in names), (block, names)
    assert SCHEMA_VERSION == 2 and "schema_version (2)" in listing


def test_a_process_design_is_recorded_as_given_and_older_flags_read_as_designs() -> None:
    """`process.design` is whatever the starter named; logs written before it said `preloaded`/`staged` as flags."""
    given = RunMetadata.from_dict({"process": {"position": 1, "workloads": 1, "design": "warm-pool"}})
    assert given.process is not None and given.process.design == "warm-pool"
    assert given.to_dict()["process"] == {"position": 1, "workloads": 1, "design": "warm-pool"}
    for flags, design in (
        ({"preloaded": True, "staged": True}, "staged"),
        ({"preloaded": True, "staged": False}, "preloaded"),
        ({"preloaded": False, "staged": False}, None),
    ):
        old = RunMetadata.from_dict({"process": {"position": 2, "workloads": 3, **flags}})
        assert old.process is not None and (old.process.position, old.process.design) == (2, design)


def test_the_run_spec_a_run_carried_is_read_from_the_orchestrators_variable(monkeypatch) -> None:
    from benchmarks.harness import sysinfo

    for value, expected in [
        ("a" * 64, RunSpecRecord("a" * 64)),
        (f"{'a' * 64} {'b' * 64} 3 85052", RunSpecRecord("a" * 64, "b" * 64, 3, 85052)),
        ("", None),
        ("not a spec at all", None),
    ]:
        monkeypatch.setenv("BENCH_RUN_SPEC", value)
        assert sysinfo.run_spec() == expected, value
