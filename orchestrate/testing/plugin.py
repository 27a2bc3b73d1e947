"""The pytest plug-in of `orchestrate.testing`: its fixtures, for `pytest -p orchestrate.testing.plugin`."""

from orchestrate.testing.sshd import sshd

__all__ = ["sshd"]
