"""Providers come from the `keras_cloud_bench.providers` entry points: ours, and a third-party package's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from orchestrate.provider import ProviderError
from orchestrate.registry import BUILTIN_PROVIDERS, ENTRY_POINT_GROUP, load_provider_class

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = """
from orchestrate.provider import Instance, InstanceState, Provider


class DemoProvider(Provider):
    name = "democloud"
    creates_machines = False

    def check_credentials(self): pass
    def launch(self, request): return Instance(self.name, "demo-1", None, None)
    def wait_until_running(self, instance, timeout_s): return instance
    def state(self, instance): return InstanceState.RUNNING
    def terminate(self, instance): pass
    def list_instances(self): return []
"""


def install_plugin(site: Path, module: str, target: str, name: str = "democloud") -> None:
    """A real installed distribution: a module and a .dist-info with entry_points.txt, as pip would write."""
    (site / f"{module}.py").write_text(PLUGIN)
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")


def run_python(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{site}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)


def test_builtin_table_mirrors_pyproject_entry_points() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"][ENTRY_POINT_GROUP] == BUILTIN_PROVIDERS


def test_a_separate_package_adds_a_provider_without_editing_this_one(tmp_path: Path) -> None:
    install_plugin(tmp_path, "kcb_demo_plugin", "kcb_demo_plugin:DemoProvider")
    done = run_python(
        tmp_path,
        """
        from orchestrate.registry import load_provider_class, provider_names
        print(provider_names())
        cls = load_provider_class("democloud")
        print(cls.__module__, cls.from_settings({}).launch(None).instance_id)
        """,
    )
    assert done.returncode == 0, done.stderr
    names, loaded = done.stdout.splitlines()
    assert "democloud" in names and "local" in names and "ssh" in names
    assert loaded == "kcb_demo_plugin demo-1"


def test_broken_plugins_fail_with_a_message(tmp_path: Path) -> None:
    install_plugin(tmp_path, "kcb_bad_plugin", "kcb_bad_plugin:Missing", name="badcloud")
    done = run_python(
        tmp_path,
        """
        from orchestrate.registry import load_provider_class
        try:
            load_provider_class("badcloud")
        except Exception as exc:
            print(type(exc).__name__, exc)
        """,
    )
    assert done.stdout.startswith("ProviderError provider 'badcloud' (kcb_bad_plugin:Missing)"), done.stderr


def test_unknown_provider_lists_the_registered_ones() -> None:
    with pytest.raises(ProviderError, match=r"no provider named 'nimbus'; registered: .*local.*ssh"):
        load_provider_class("nimbus")
