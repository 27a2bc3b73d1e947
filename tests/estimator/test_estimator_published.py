"""The estimator reads the published studies with the standard library; the report reads the same files through
its pandas pipeline (group, median, the study's whole-run times). Both must give the same figures, in the same
order: the estimate's published basis is what the report shows."""

from __future__ import annotations

import math

import pytest

from estimator.published import Figures, load_studies, published_figures
from report.studies import published_results


def _number(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


@pytest.mark.parametrize("name", sorted(load_studies()))
def test_published_figures_match_the_reports_table_of_the_same_study(name: str) -> None:
    study = load_studies()[name]
    table = published_results(study).results
    expected = [
        Figures(
            workload=str(row.workload),
            config=str(row.config),
            platform=str(row.platform),
            backend=str(row.backend),
            epochs=int(row.epochs),
            first_epoch_s=_number(row.first_epoch_s),
            steady_epoch_s=_number(row.steady_epoch_s),
            total_s=float(row.total_s),
        )
        for row in table.itertuples()
    ]
    assert list(published_figures(study)) == expected
    assert expected  # every study has figures
