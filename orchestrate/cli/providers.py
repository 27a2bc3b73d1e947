"""`providers`: the installed providers, their settings and where they come from."""

from __future__ import annotations

import argparse

from orchestrate.provider import ProviderError
from orchestrate.registry import load_provider_class, provider_names, provider_source


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("providers", help="list the installed providers, their settings and where they come from")
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    for name in provider_names():
        source = provider_source(name)
        try:
            cls = load_provider_class(name)
        except ProviderError as exc:
            print(f"{name:<8} BROKEN: {exc}")
            continue
        capabilities = ", ".join(sorted(cls.capabilities)) or "-"
        settings = ", ".join(cls.settings) or "none"
        print(f"{name:<8} {source}\n         capabilities: {capabilities}; settings: {settings}")
    return 0
