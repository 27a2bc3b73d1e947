"""Test fixtures shared across this project's test packages: the Docker engine and images, the datasets.

The real sshd and the provider contract are installed with the project, for provider packages too:
`orchestrate.testing` (`from orchestrate.testing.sshd import sshd  # noqa: F401` in a conftest.py).
"""
