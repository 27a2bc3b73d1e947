"""Test fixtures shared across test packages: a real sshd, the Docker engine and images, the datasets.

Import the helpers (`from tests.support.sshd import start_sshd`) or the pytest fixtures
(`from tests.support.sshd import sshd  # noqa: F401` in a conftest.py).
"""
