"""Google Cloud: Compute Engine VMs (`compute`), Cloud Storage buckets (`storage`), Cloud Scheduler (`scheduler`).
Every google-cloud call of the project is in this package."""

from orchestrate.providers.gce.compute import GCEProvider

__all__ = ["GCEProvider"]
