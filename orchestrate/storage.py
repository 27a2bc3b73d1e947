"""Where a detached run's files go: a bucket URL, `<scheme>://bucket[/prefix]`, of the cloud whose machines write
there (`Capability.OBJECT_STORE`: each provider with buckets implements `orchestrate.capabilities.ObjectStorage`).

A detached run's machine uploads its logs, status and summary under `<prefix>runs/<run-id>/` of a bucket; the
orchestrator checks before launch that it can write there (creating and tagging the project's own bucket when the
user names none), and `orchestrate status` / `collect` list and download from it. The machine itself never uses
the orchestrator's storage code (it has only its image's python3: see `orchestrate.machine_agent`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrate.provider import PROJECT_TAG, safe_name

SCHEME_RE = re.compile(r"[a-z][a-z0-9]*")
PREFIX_RE = re.compile(r"(?:[A-Za-z0-9_.-]+/)*")


class StorageError(RuntimeError):
    """The bucket cannot be used; one line saying which bucket, what failed and what to do."""


@dataclass(frozen=True)
class StorageURL:
    """`s3://bucket[/prefix]`, `gs://bucket[/prefix]`; a run's objects go under `<prefix>runs/<run-id>/`. Whether
    the bucket's name suits its cloud is the cloud's rule (`orchestrate.capabilities.check_storage_url`)."""

    scheme: str
    bucket: str
    prefix: str = ""  # "" or "a/b/": always ends with a slash

    @classmethod
    def parse(cls, url: str) -> StorageURL:
        """The URL's parts; StorageError naming what is wrong with it."""
        scheme, sep, rest = url.partition("://")
        bucket, _, prefix = rest.partition("/")
        if not sep or not SCHEME_RE.fullmatch(scheme) or not bucket:
            raise StorageError(f"--bucket {url!r}: expected SCHEME://BUCKET[/PREFIX], e.g. s3://B or gs://B/P")
        prefix = prefix.strip("/")
        prefix = f"{prefix}/" if prefix else ""
        if not PREFIX_RE.fullmatch(prefix) or ".." in prefix.split("/"):
            raise StorageError(f"--bucket {url!r}: prefix {prefix!r} may hold letters, digits, '/', '.', '_', '-'")
        return cls(scheme, bucket, prefix)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}"

    def run_prefix(self, run_id: str) -> str:
        return f"{self.prefix}runs/{run_id}/"


def own_bucket_name(account: str) -> str:
    """The project's own bucket when the user names none: one per account (and region) or project."""
    return safe_name(f"{PROJECT_TAG}-{account}", 63)
