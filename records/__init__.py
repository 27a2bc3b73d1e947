"""The data formats that the orchestrator writes and the report reads: the catalog of machine profiles (prices,
billing rules), the ledger of orchestrated runs and the run logs read as runs (`records.loading`). Standard library
and `benchmarks` only; imports none of `orchestrate`, `report` and `estimator`, which sit above it."""
