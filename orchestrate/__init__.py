"""Orchestration: launch machines, run the benchmark containers there, pull the logs, tear down."""
