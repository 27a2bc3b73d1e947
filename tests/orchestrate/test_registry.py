"""Providers come from the `keras_cloud_bench.providers` entry points: ours, and a third-party package's."""

from __future__ import annotations

import os
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
from orchestrate.provider import Capability, Instance, InstanceState, Provider


class DemoProvider(Provider):
    name = "democloud"
    host_capabilities = frozenset({Capability.PERSISTENT_HOST})

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


# ---- a provider package outside this repository: profiles, contract suite, make target, no tracked file edited --

PACKAGE = """
from pathlib import Path

from orchestrate.providers.ssh import SSHProvider

CATALOG = Path(__file__).with_name("kcb_outside_catalog.toml")


class OutsideProvider(SSHProvider):
    name = "outsidecloud"
"""
PACKAGE_CATALOG = """
[profiles.outside-a10]
provider = "outsidecloud"
description = "1x A10 at outsidecloud"
accelerator = "A10"
accelerator_count = 1
docker_image = "gpu"
"""
PACKAGE_TESTS = """
from records.catalog import load_catalogs
from orchestrate.provider import SSHTarget
from orchestrate.testing import ProviderContract

from kcb_outside import OutsideProvider


class TestOutsideContract(ProviderContract):
    def make_provider(self):
        return OutsideProvider(SSHTarget("127.0.0.1", "bench", 22))

    def make_profile(self):
        return load_catalogs()["outside-a10"]


def test_the_sshd_fixture_comes_with_the_plugin(sshd):
    assert sshd.port > 0
"""


def install_outside_package(site: Path) -> None:
    (site / "kcb_outside.py").write_text(PACKAGE)
    (site / "kcb_outside_catalog.toml").write_text(PACKAGE_CATALOG)
    dist = site / "kcb_outside-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kcb-outside\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\noutsidecloud = kcb_outside:OutsideProvider\n"
        "[keras_cloud_bench.catalogs]\noutsidecloud = kcb_outside:CATALOG\n"
    )


@pytest.mark.sshd
def test_a_provider_package_outside_the_repository_plugs_in_completely(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_outside_package(site)
    tests = tmp_path / "outside_tests"
    tests.mkdir()
    (tests / "test_outside.py").write_text(PACKAGE_TESTS)
    env = {**os.environ, "PYTHONPATH": f"{site}:{ROOT}"}

    contract = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "orchestrate.testing.plugin", "-p", "no:cacheprovider",
         "--rootdir", str(tests), str(tests)],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert contract.returncode == 0, contract.stdout[-3000:]
    assert " passed" in contract.stdout

    make = subprocess.run(
        ["make", "-s", "bench-outside-a10", "HOST=bench@gpu-box", "DRY_RUN=1", "GPUS=all", f"VENV={sys.prefix}"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert make.returncode == 0, make.stderr
    assert "Plan (dry run: nothing is launched)" in make.stdout and "outside-a10: bench@gpu-box" in make.stdout

    providers = subprocess.run(
        [sys.executable, "-m", "orchestrate", "providers"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert "outsidecloud kcb_outside:OutsideProvider (kcb-outside 0.1)" in providers.stdout
    assert "local    orchestrate.providers.local:LocalProvider" in providers.stdout
    assert "capabilities: persistent-host; settings: host, port, identity_file" in providers.stdout
    # nothing of this project names the package: its profile came from its own catalog, its target from a pattern
    assert "outside" not in (ROOT / "records" / "catalog.toml").read_text()
    assert "outside" not in "".join(path.read_text() for path in (ROOT / "mk").glob("*.mk"))


def test_user_env_and_flag_catalogs_merge_and_clash_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from records.catalog import CatalogError, load_catalogs, user_catalog_path

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    user = user_catalog_path()
    user.parent.mkdir(parents=True)
    user.write_text('[profiles.home-1080ti]\nprovider = "ssh"\n')
    env_file = tmp_path / "env.toml"
    env_file.write_text('[profiles.lab-a100]\nprovider = "ssh"\n')
    monkeypatch.setenv("KCB_CATALOG", str(env_file))
    flag = tmp_path / "flag.toml"
    flag.write_text('[profiles.rented-h200]\nprovider = "ssh"\n')
    merged = load_catalogs([flag])
    assert {"home-1080ti", "lab-a100", "rented-h200", "gce-t4", "local"} <= set(merged)
    clash = tmp_path / "clash.toml"
    clash.write_text('[profiles.gce-t4]\nprovider = "ssh"\n')
    with pytest.raises(CatalogError, match=r"profile 'gce-t4' is defined in both .*catalog.toml and .*clash.toml"):
        load_catalogs([clash])
    twice = tmp_path / "twice.toml"
    twice.write_text('[profiles.lab-a100]\nprovider = "ssh"\n')
    with pytest.raises(CatalogError, match=r"'lab-a100' is defined in both .*env.toml and .*twice.toml: rename one"):
        load_catalogs([twice])


def test_a_plugin_that_fails_on_import_is_one_line_and_the_rest_works(tmp_path: Path) -> None:
    """A provider package whose import raises (not ImportError) and a catalog plug-in that does: `providers`
    lists every other provider, `profiles` every other profile, each fault one line naming the package."""
    (tmp_path / "kcb_boom.py").write_text('raise RuntimeError("half-installed")\n')
    dist = tmp_path / "kcb_boom-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kcb-boom\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nboomcloud = kcb_boom:BoomProvider\n\n"
        "[keras_cloud_bench.catalogs]\nboomcloud = kcb_boom:catalog\n"
    )
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    providers = subprocess.run(
        [sys.executable, "-m", "orchestrate", "providers"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert providers.returncode == 0 and "Traceback" not in providers.stdout + providers.stderr
    broken = [line for line in providers.stdout.splitlines() if line.startswith("boomcloud")]
    assert broken == [
        "boomcloud BROKEN: provider 'boomcloud' (kcb_boom:BoomProvider) fails on import: RuntimeError: "
        "half-installed; kcb_boom:BoomProvider (kcb-boom 0.1)"
    ]
    assert {"aws", "gce", "local", "ssh"} <= {
        line.split()[0] for line in providers.stdout.splitlines() if line[:1].strip()
    }
    profiles = subprocess.run(
        [sys.executable, "-m", "orchestrate", "profiles", "--names"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert profiles.returncode == 0 and "local" in profiles.stdout.split()
    assert profiles.stderr.strip().splitlines() == [
        "warning: catalog plug-in 'boomcloud' (kcb_boom:catalog) cannot be loaded: RuntimeError: half-installed; "
        "package kcb-boom 0.1's profiles are left out"
    ]


@pytest.mark.parametrize(
    ("declaration", "said"),
    [
        ("capabilities = None", "declares capabilities=None; expected a frozenset of orchestrate.provider.Capability"),
        ('capabilities = frozenset({"spot"})', "declares capabilities=frozenset({'spot'}); expected a frozenset"),
        ('settings = "host"', "declares settings='host'; expected a tuple of setting names (str)"),
        # a batch scheduler without BatchQueue, its interface: declared either way, it is one line, not a traceback
        (
            "capabilities = frozenset({Capability.PERSISTENT_HOST, Capability.BATCH})",
            "fails on import: TypeError: DemoProvider: capabilities batch come from implementing their interfaces",
        ),
        (
            "host_capabilities = frozenset({Capability.PERSISTENT_HOST, Capability.BATCH})",
            "fails on import: TypeError: DemoProvider: capabilities batch come from implementing their interfaces",
        ),
    ],
)
def test_a_provider_with_bad_declarations_is_isolated_like_an_import_failure(
    tmp_path: Path, declaration: str, said: str
) -> None:
    """`providers`, `schedule list` and `schedule create` read every provider's capabilities: one plug-in that
    declares them wrongly is one line, and every command still works for the rest."""
    plugin = PLUGIN.replace("    host_capabilities = frozenset({Capability.PERSISTENT_HOST})", f"    {declaration}")
    assert plugin != PLUGIN
    install_plugin(tmp_path, "kcb_wrong", "kcb_wrong:DemoProvider")
    (tmp_path / "kcb_wrong.py").write_text(plugin)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def orchestrate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrate", *args], capture_output=True, text=True, env=env, cwd=tmp_path
        )

    providers = orchestrate("providers")
    assert providers.returncode == 0 and "Traceback" not in providers.stdout + providers.stderr
    broken = [line for line in providers.stdout.splitlines() if line.startswith("democloud")]
    assert len(broken) == 1 and broken[0].startswith("democloud BROKEN: provider 'democloud' (kcb_wrong:DemoProvider)")
    assert said in broken[0]
    assert "capabilities: persistent-host, runs-locally" in providers.stdout  # local is still listed

    listed = orchestrate("schedule", "list")
    assert "Traceback" not in listed.stdout + listed.stderr, listed.stderr
    create = orchestrate("schedule", "create", "--profile", "ssh", "--cron", "cron(0 3 * * ? *)", "--image", "cpu")
    assert "Traceback" not in create.stdout + create.stderr, create.stderr
    assert "scheduled runs need a cloud profile (aws, gce)" in create.stderr


def test_a_plugin_catalog_whose_retired_profile_names_no_replacement_is_left_out(tmp_path: Path) -> None:
    """The replacement a retired profile names is checked per plug-in: a plug-in that names a missing one is one
    warning line, and catalog commands and runs on every other profile go on."""
    module = "from pathlib import Path\nCATALOG = Path(__file__).with_suffix('.toml')\n"
    (tmp_path / "kcb_retired.py").write_text(module)
    (tmp_path / "kcb_retired.toml").write_text(
        '[profiles.retired-k80]\nprovider = "ssh"\nretired = true\nretired_on = "2024-01-01"\n'
        'replacement = "no-such-profile"\n\n[profiles.lab-k80]\nprovider = "ssh"\n'
    )
    dist = tmp_path / "kcb_retired-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kcb-retired\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[keras_cloud_bench.catalogs]\nretiredcloud = kcb_retired:CATALOG\n")
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    warning = (
        f"warning: {tmp_path}/kcb_retired.toml: profile 'retired-k80': field 'replacement': no profile named "
        "'no-such-profile'; package kcb-retired 0.1's profiles are left out"
    )

    profiles = subprocess.run(
        [sys.executable, "-m", "orchestrate", "profiles", "--names"], capture_output=True, text=True, env=env
    )
    assert profiles.returncode == 0, profiles.stderr
    names = profiles.stdout.split()
    assert {"local", "ssh", "gce-t4"} <= set(names) and "lab-k80" not in names and "retired-k80" not in names
    assert profiles.stderr.strip().splitlines() == [warning]

    dry_run = subprocess.run(
        [sys.executable, "-m", "orchestrate", "run", "--profile", "local", "--suite", "quick",
         "--workloads", "mnist_mlp", "--backends", "jax", "--dry-run"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert dry_run.returncode == 0, dry_run.stderr
    assert "Plan (dry run: nothing is launched)" in dry_run.stdout and warning in dry_run.stderr
