"""The data formats that the orchestrator writes and the report reads: the catalog of machine profiles (prices,
billing rules) and the ledger of orchestrated runs. Standard library only; imports neither `orchestrate` nor
`report`, which both sit above it."""
