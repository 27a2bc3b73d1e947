"""Keras workloads on every backend, the harness that times them, and the runner CLI."""
