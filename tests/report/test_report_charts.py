"""Charts: the same figures give the same files, so a regenerated report shows no spurious change."""

from __future__ import annotations

from pathlib import Path

from report.charts import Bar, relative_chart


def test_a_chart_drawn_twice_is_byte_identical(tmp_path: Path) -> None:
    bars = [Bar("published: k80-tensorflow", 1.0, "tensorflow", published=True), Bar("h200-jax", 0.06, "jax")]
    first = relative_chart(bars, "cifar10_cnn", "relative time", ["a note"], tmp_path / "a" / "chart")
    second = relative_chart(bars, "cifar10_cnn", "relative time", ["a note"], tmp_path / "b" / "chart")
    assert [p.suffix for p in first] == [".png", ".svg"]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
