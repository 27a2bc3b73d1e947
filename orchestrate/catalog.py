"""The catalog types a provider plug-in sees (docs/providers.md), where plug-ins have always imported them from.

The catalog's format lives in `records.catalog`, below both the orchestrator and the report; this module only
re-exports the part of it that is the plug-in API.
"""

from records.catalog import CatalogError, Price, PricePoint, Profile

__all__ = ["CatalogError", "Price", "PricePoint", "Profile"]
