"""A user's workload file in the report: read like a built-in workload, and never pooled across versions of the
file (its content hash, recorded by every run)."""

from __future__ import annotations

from pathlib import Path

from records.loading import load_runs
from tests.report.report_helpers import write_run


def _plugin(sha: str) -> dict[str, object]:
    return {"plugin": {"kind": "file", "file": "my_model.py", "sha256": sha, "entry_point": None, "distribution": None}}


def test_runs_of_one_workload_file_pool_and_two_versions_of_it_do_not(tmp_path: Path) -> None:
    one, other = "a" * 64, "b" * 64
    write_run(tmp_path, workload="my_model", run_id="20260101T000000Z-0001", schema2=_plugin(one))
    write_run(tmp_path, workload="my_model", run_id="20260101T000000Z-0002", schema2=_plugin(one))
    write_run(tmp_path, workload="mnist_mlp", run_id="20260101T000000Z-0002")
    runs = load_runs(tmp_path).runs
    assert {r.config.variant for r in runs} == {""}  # one version: nothing to tell apart, labels stay short
    assert {r.metadata.plugin.sha256 for r in runs if r.metadata.plugin} == {one}

    write_run(tmp_path, workload="my_model", run_id="20260101T000000Z-0003", schema2=_plugin(other))
    variants = {(r.run_id, r.config.variant) for r in load_runs(tmp_path).runs if r.workload == "my_model"}
    assert variants == {
        ("20260101T000000Z-0001", "my_model.py aaaaaaaa"),
        ("20260101T000000Z-0002", "my_model.py aaaaaaaa"),
        ("20260101T000000Z-0003", "my_model.py bbbbbbbb"),
    }
    assert {r.config.variant for r in load_runs(tmp_path).runs if r.workload == "mnist_mlp"} == {""}
