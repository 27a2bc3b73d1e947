"""Cloud Storage, the GCE provider's object storage (`Capability.OBJECT_STORE`), through google-cloud-storage.

`KCB_GCS_API_ENDPOINT` redirects it (Private Service Connect, or the tests' storage emulator).
"""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path
from typing import Any, BinaryIO

from orchestrate.provider import PROJECT_TAG
from orchestrate.storage import StorageError, StorageURL

GCS_ENDPOINT_ENV = "KCB_GCS_API_ENDPOINT"
BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")


def bucket_problem(bucket: str) -> str | None:
    if BUCKET_RE.fullmatch(bucket) and not bucket.startswith(("xn--", "goog")) and "--" not in bucket[:4]:
        return None
    return "must be 3-63 lowercase letters, digits and '-' or '_', no dots"


def account_name(region: str) -> str:
    """The Google Cloud project: the project's own bucket is one per project."""
    import google.auth
    from google.auth.exceptions import GoogleAuthError

    try:
        _, project = google.auth.default()
    except GoogleAuthError as error:
        raise StorageError(f"no Google credentials to name the run's bucket: {error}") from None
    if not project:
        raise StorageError("no Google Cloud project to name the run's bucket: set GOOGLE_CLOUD_PROJECT or --bucket")
    return str(project)


class GCSStore:
    def __init__(self, url: StorageURL) -> None:
        self.url = url
        self._client_instance: Any = None

    @property
    def _client(self) -> Any:
        if self._client_instance is None:
            import google.cloud.storage as storage
            from google.api_core.client_options import ClientOptions

            endpoint = os.environ.get(GCS_ENDPOINT_ENV)
            options = ClientOptions(api_endpoint=endpoint) if endpoint else None
            self._client_instance = storage.Client(client_options=options)
        return self._client_instance

    def _calling(self, what: str, error: Exception) -> StorageError:
        message = getattr(error, "message", None) or str(error)
        return StorageError(f"{self.url}: {what} failed ({type(error).__name__}): {message}")

    def ensure_bucket(self, create: bool, location: str | None) -> None:
        """The bucket, created (labelled project=keras-cloud-bench, uniform access) when `create`; a machine
        addresses Cloud Storage the same from every region, so there is no region to return."""
        from google.api_core import exceptions
        from google.auth.exceptions import GoogleAuthError

        try:
            bucket = self._client.lookup_bucket(self.url.bucket)
            if bucket is None:
                if not create:
                    raise StorageError(
                        f"bucket {self.url.bucket} does not exist: create it, or leave --bucket out and the project "
                        "creates its own"
                    )
                bucket = self._client.bucket(self.url.bucket)
                bucket.labels = {"project": PROJECT_TAG}
                bucket.iam_configuration.uniform_bucket_level_access_enabled = True
                self._client.create_bucket(bucket, location=location)
        except (exceptions.GoogleAPIError, GoogleAuthError) as error:
            raise self._calling(f"looking up or creating bucket {self.url.bucket}", error) from None

    def check_writable(self, key: str) -> None:
        from google.api_core import exceptions

        blob = self._client.bucket(self.url.bucket).blob(key)
        try:
            blob.upload_from_string(b"keras-cloud-bench write check\n")
            blob.delete()
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"writing {key}", error) from None

    def put(self, key: str, data: bytes) -> None:
        from google.api_core import exceptions

        try:
            self._client.bucket(self.url.bucket).blob(key).upload_from_string(data)
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"writing {key}", error) from None

    def upload_file(self, key: str, source: BinaryIO) -> None:
        from google.api_core import exceptions

        try:
            self._client.bucket(self.url.bucket).blob(key).upload_from_file(source, rewind=True)
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"uploading {key}", error) from None

    def upload_url(self, key: str, expires_s: int) -> str:
        """A resumable upload session for `key`: a URL that takes the object's bytes in one PUT, with no
        credentials, for a week (Cloud Storage's limit; `expires_s` cannot lengthen it)."""
        from google.api_core import exceptions

        try:
            url: str = self._client.bucket(self.url.bucket).blob(key).create_resumable_upload_session()
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"opening an upload session for {key}", error) from None
        return url

    def read(self, key: str) -> bytes | None:
        from google.api_core import exceptions

        try:
            return self._client.bucket(self.url.bucket).blob(key).download_as_bytes()
        except exceptions.NotFound:
            return None
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"reading {key}", error) from None

    def list(self, prefix: str) -> dict[str, int]:
        from google.api_core import exceptions

        try:
            return {blob.name: blob.size or 0 for blob in self._client.list_blobs(self.url.bucket, prefix=prefix)}
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"listing {prefix}", error) from None

    def download(self, key: str, path: Path) -> None:
        from google.api_core import exceptions

        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._client.bucket(self.url.bucket).blob(key).download_to_filename(str(path))
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"downloading {key}", error) from None

    def delete(self, key: str) -> None:
        from google.api_core import exceptions

        try:
            self._client.bucket(self.url.bucket).blob(key).delete()
        except exceptions.NotFound:
            return
        except exceptions.GoogleAPIError as error:
            raise self._calling(f"deleting {key}", error) from None

    def abort_uploads(self, prefix: str) -> builtins.list[str]:
        """Nothing to abort: a resumable upload cut short leaves no object, and its session (which no API lists)
        expires a week after it began."""
        return []
