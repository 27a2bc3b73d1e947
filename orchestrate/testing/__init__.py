"""Test support for provider packages, installed with this project: the provider contract suite, the contracts of
the optional capabilities with a local object-store double, and a real sshd.

    from orchestrate.testing import ProviderContract, SSHLoginContract   # the contract (orchestrate.testing.contract)
    from orchestrate.testing import CapabilityContract, ObjectStoreContract, LocalObjectStore   # (.capabilities)
    from orchestrate.testing.sshd import SSHServer, start_sshd           # a real OpenSSH server on loopback

As a pytest plug-in (the `sshd` fixture): `pytest -p orchestrate.testing.plugin`, or
`pytest_plugins = ["orchestrate.testing.plugin"]` in your test suite's root conftest.py.
"""

from orchestrate.testing.capabilities import CapabilityContract, LocalObjectStore, ObjectStoreContract
from orchestrate.testing.contract import ProviderContract, SSHLoginContract

__all__ = ["CapabilityContract", "LocalObjectStore", "ObjectStoreContract", "ProviderContract", "SSHLoginContract"]
