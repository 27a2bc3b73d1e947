"""How long a suite will take on a machine profile and what it will cost, before anything is rented: the estimate
that `python -m orchestrate run --dry-run` prints and the report's backtest checks. Standard library only (no
pandas): it sits below `report` and above `records`, so the orchestrator plans without the report package."""

from pathlib import Path

# The figures the estimate reads (estimate.toml, buyable.toml, the published studies) are bundled with the report,
# which shows them too.
DATA_DIR = Path(__file__).resolve().parents[1] / "report" / "data"
