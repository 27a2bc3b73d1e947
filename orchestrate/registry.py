"""Find providers: every class registered under the entry-point group `keras_cloud_bench.providers`.

A separate package adds a provider by declaring, in its own pyproject.toml,

    [project.entry-points."keras_cloud_bench.providers"]
    mycloud = "mycloud_bench.provider:MyCloudProvider"

This project's providers are registered the same way (see pyproject.toml). When the project runs from a source
checkout that was never installed, its entry points are not in the environment's metadata; the built-in table
below then stands in for them, so `python -m orchestrate` works from a plain clone.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import EntryPoint, entry_points

from orchestrate.provider import Capability, Provider, ProviderError

ENTRY_POINT_GROUP = "keras_cloud_bench.providers"
# Mirrors [project.entry-points."keras_cloud_bench.providers"] in pyproject.toml (a test keeps them equal).
BUILTIN_PROVIDERS: dict[str, str] = {
    "local": "orchestrate.providers.local:LocalProvider",
    "ssh": "orchestrate.providers.ssh:SSHProvider",
    "aws": "orchestrate.providers.aws:AWSProvider",
    "gce": "orchestrate.providers.gce:GCEProvider",
    "slurm": "orchestrate.providers.slurm:SlurmProvider",
}


def provider_names() -> list[str]:
    """Names of every provider that can be loaded here (installed entry points and the built-in ones)."""
    return sorted(_targets())


def load_provider_class(name: str) -> type[Provider]:
    """The provider class registered as `name`; ProviderError with the known names when there is none."""
    targets = _targets()
    target = targets.get(name)
    if target is None:
        raise ProviderError(f"no provider named '{name}'; registered: {', '.join(sorted(targets))}")
    try:
        cls = EntryPoint(name=name, group=ENTRY_POINT_GROUP, value=target).load()
    except (ImportError, AttributeError) as exc:
        raise ProviderError(f"provider '{name}' ({target}) cannot be loaded: {exc}. Is its package installed?") from exc
    except Exception as exc:  # broad on purpose: a package whose import fails is one line naming it, never more
        raise ProviderError(
            f"provider '{name}' ({target}) fails on import: {type(exc).__name__}: {exc}; {provider_source(name)}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ProviderError(f"provider '{name}' ({target}) is not a subclass of orchestrate.provider.Provider")
    if getattr(cls, "name", None) != name:
        raise ProviderError(f"provider '{name}' ({target}) declares name={getattr(cls, 'name', None)!r}")
    _check_declarations(cls, f"provider '{name}' ({target})")
    return cls


def _check_declarations(cls: type[Provider], who: str) -> None:
    """The class attributes every caller reads without a guard (`providers`, the schedule and sweep commands, the
    lifecycle): a wrong type there is the plug-in's fault, told here once, never a traceback wherever it is read."""
    capabilities = cls.capabilities
    if not isinstance(capabilities, frozenset | set) or not all(isinstance(c, Capability) for c in capabilities):
        raise ProviderError(
            f"{who} declares capabilities={capabilities!r}; expected a frozenset of orchestrate.provider.Capability"
        )
    settings = cls.settings
    if not isinstance(settings, tuple) or not all(isinstance(key, str) for key in settings):
        raise ProviderError(f"{who} declares settings={settings!r}; expected a tuple of setting names (str)")


def provider_source(name: str) -> str:
    """Where a provider comes from: `module:Class (distribution version)`, or `(built in)` for a source checkout."""
    for entry_point in entry_points(group=ENTRY_POINT_GROUP, name=name):
        dist = entry_point.dist
        origin = f"{dist.name} {dist.version}" if dist is not None else "an installed entry point"
        return f"{entry_point.value} ({origin})"
    return f"{BUILTIN_PROVIDERS.get(name, '?')} (built in, from this checkout)"


def _targets() -> dict[str, str]:
    installed = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    builtin = {name: target for name, target in BUILTIN_PROVIDERS.items() if _module_exists(target)}
    return {**builtin, **installed}  # an installed distribution wins: it is what the user installed


def _module_exists(target: str) -> bool:
    module = target.partition(":")[0]
    return importlib.util.find_spec(module) is not None
