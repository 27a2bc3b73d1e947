"""Timing, metadata and the loop that runs one workload on one backend."""
