from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """An empty log root; tests fill it with report_helpers.write_run."""
    root = tmp_path / "logs"
    root.mkdir()
    return root
