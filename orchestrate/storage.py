"""Object storage for detached runs: an S3 bucket (boto3) or a Cloud Storage bucket (google-cloud-storage).

A detached run's machine uploads its logs, status and summary under `<prefix>runs/<run-id>/` of a bucket; the
orchestrator checks before launch that it can write there (creating and tagging the project's own bucket when the
user names none), and `orchestrate status` / `collect` list and download from it. The machine itself never uses
this module (it has only its image's python3: see `orchestrate.machine_agent`).

Endpoints are redirected the way the providers' are: boto3's own `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3`, and
`KCB_GCS_API_ENDPOINT` (Private Service Connect, or the tests' storage emulator) for Cloud Storage.
"""

from __future__ import annotations

import builtins
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from orchestrate.provider import PROJECT_TAG

GCS_ENDPOINT_ENV = "KCB_GCS_API_ENDPOINT"
SCHEMES = {"s3": "aws", "gs": "gce"}  # URL scheme -> the provider whose machines write there
# No dots: a dotted name breaks TLS on the virtual-hosted address the machine uses (bucket.s3.region...).
S3_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
GCS_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
PREFIX_RE = re.compile(r"(?:[A-Za-z0-9_.-]+/)*")
UNFINISHED_UPLOAD_DAYS = 2  # the project's own S3 bucket aborts multipart uploads unfinished after this long


class StorageError(RuntimeError):
    """The bucket cannot be used; one line saying which bucket, what failed and what to do."""


@dataclass(frozen=True)
class StorageURL:
    """`s3://bucket[/prefix]` or `gs://bucket[/prefix]`; a run's objects go under `<prefix>runs/<run-id>/`."""

    scheme: str
    bucket: str
    prefix: str = ""  # "" or "a/b/": always ends with a slash

    @classmethod
    def parse(cls, url: str) -> StorageURL:
        """The URL's parts; StorageError naming what is wrong with it."""
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in SCHEMES:
            raise StorageError(f"--bucket {url!r}: expected s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX]")
        bucket, _, prefix = rest.partition("/")
        pattern = S3_BUCKET_RE if scheme == "s3" else GCS_BUCKET_RE
        if not pattern.fullmatch(bucket) or bucket.startswith(("xn--", "goog")) or "--" in bucket[:4]:
            allowed = "lowercase letters, digits and '-'" + (" or '_'" if scheme == "gs" else "")
            raise StorageError(f"--bucket {url!r}: bucket name {bucket!r} must be 3-63 {allowed}, no dots")
        prefix = prefix.strip("/")
        prefix = f"{prefix}/" if prefix else ""
        if not PREFIX_RE.fullmatch(prefix) or ".." in prefix.split("/"):
            raise StorageError(f"--bucket {url!r}: prefix {prefix!r} may hold letters, digits, '/', '.', '_', '-'")
        return cls(scheme, bucket, prefix)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}"

    @property
    def provider(self) -> str:
        return SCHEMES[self.scheme]

    def run_prefix(self, run_id: str) -> str:
        return f"{self.prefix}runs/{run_id}/"


class Store(Protocol):
    url: StorageURL

    def ensure_bucket(self, create: bool, location: str | None) -> str: ...
    def check_writable(self, key: str) -> None: ...
    def put(self, key: str, data: bytes) -> None: ...
    def upload_file(self, key: str, source: BinaryIO) -> None: ...
    def read(self, key: str) -> bytes | None: ...
    def list(self, prefix: str) -> dict[str, int]: ...
    def download(self, key: str, path: Path) -> None: ...
    def delete(self, key: str) -> None: ...
    def abort_uploads(self, prefix: str) -> builtins.list[str]: ...


def open_store(url: StorageURL) -> Store:
    return S3Store(url) if url.scheme == "s3" else GCSStore(url)


def default_bucket(provider: str, account: str) -> StorageURL:
    """The project's own bucket when the user names none: one per AWS account and region / GCP project."""
    scheme = "s3" if provider == "aws" else "gs"
    name = re.sub(r"[^a-z0-9-]", "-", f"{PROJECT_TAG}-{account}".lower())[:63].strip("-")
    return StorageURL(scheme, name)


# ---- S3 ------------------------------------------------------------------------------------------------------


class S3Store:
    def __init__(self, url: StorageURL, session: Any = None) -> None:
        import boto3
        from botocore.config import Config

        self.url = url
        self._session = session or boto3.Session()
        # A redirected endpoint (VPC endpoint, LocalStack, moto) serves buckets by path, not by host name.
        redirected = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
        self._config = Config(
            retries={"mode": "standard", "max_attempts": 4}, s3={"addressing_style": "path" if redirected else "auto"}
        )
        self._client = self._session.client("s3", config=self._config)

    def _calling(self, what: str, error: Exception) -> StorageError:
        from botocore.exceptions import ClientError

        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", "")
            return StorageError(f"{self.url}: {what} failed ({code}): {message}")
        return StorageError(f"{self.url}: {what} failed: {error}")

    def ensure_bucket(self, create: bool, location: str | None) -> str:
        """The bucket's region; created (tagged project=keras-cloud-bench, no public access) when `create`."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.get_bucket_location(Bucket=self.url.bucket)
            region = answer.get("LocationConstraint") or "us-east-1"  # AWS's null means us-east-1
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code not in ("NoSuchBucket", "404") or not create:
                if code == "NoSuchBucket":
                    raise StorageError(
                        f"bucket {self.url.bucket} does not exist: create it, or leave --bucket out and the project "
                        "creates its own"
                    ) from None
                raise self._calling("reading the bucket's location", error) from None
            region = self._create(location or "us-east-1")
        except BotoCoreError as error:
            raise self._calling("reading the bucket's location", error) from None
        # Objects are read and written in the bucket's own region (a machine elsewhere is redirected otherwise).
        self._client = self._session.client("s3", region_name=region, config=self._config)
        return region

    def _create(self, region: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._session.client("s3", region_name=region, config=self._config)
        configuration = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        try:
            client.create_bucket(Bucket=self.url.bucket, **configuration)
            client.put_bucket_tagging(
                Bucket=self.url.bucket, Tagging={"TagSet": [{"Key": "project", "Value": PROJECT_TAG}]}
            )
            client.put_public_access_block(
                Bucket=self.url.bucket,
                PublicAccessBlockConfiguration={
                    "BlockPublicAcls": True,
                    "IgnorePublicAcls": True,
                    "BlockPublicPolicy": True,
                    "RestrictPublicBuckets": True,
                },
            )
            # An uploader killed mid-way (`orchestrate run --detach --image-source load`) leaves an unfinished
            # multipart upload, invisible but billed until aborted: the bucket aborts it if `collect` never does.
            client.put_bucket_lifecycle_configuration(
                Bucket=self.url.bucket,
                LifecycleConfiguration={
                    "Rules": [
                        {
                            "ID": "abort-unfinished-uploads",
                            "Status": "Enabled",
                            "Filter": {"Prefix": ""},
                            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": UNFINISHED_UPLOAD_DAYS},
                        }
                    ]
                },
            )
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"creating bucket {self.url.bucket} in {region}", error) from None
        return region

    def check_writable(self, key: str) -> None:
        """Write and delete one small object where the run's files will go."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_object(Bucket=self.url.bucket, Key=key, Body=b"keras-cloud-bench write check\n")
            self._client.delete_object(Bucket=self.url.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"writing {key}", error) from None

    def put(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_object(Bucket=self.url.bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"writing {key}", error) from None

    def upload_file(self, key: str, source: BinaryIO) -> None:
        """A seekable file, in parts when large (boto3's multipart upload, which it aborts when a part fails)."""
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.upload_fileobj(source, self.url.bucket, key)
        except (ClientError, BotoCoreError, S3UploadFailedError) as error:
            raise self._calling(f"uploading {key}", error) from None

    def read(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self._client.get_object(Bucket=self.url.bucket, Key=key)["Body"].read()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._calling(f"reading {key}", error) from None
        except BotoCoreError as error:
            raise self._calling(f"reading {key}", error) from None

    def list(self, prefix: str) -> dict[str, int]:
        from botocore.exceptions import BotoCoreError, ClientError

        found: dict[str, int] = {}
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.url.bucket, Prefix=prefix):
                found.update({item["Key"]: item["Size"] for item in page.get("Contents", [])})
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"listing {prefix}", error) from None
        return found

    def download(self, key: str, path: Path) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._client.download_file(self.url.bucket, key, str(path))
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"downloading {key}", error) from None

    def delete(self, key: str) -> None:
        """Gone, whether or not it was there (S3 answers a missing key's delete with success)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.delete_object(Bucket=self.url.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"deleting {key}", error) from None

    def abort_uploads(self, prefix: str) -> builtins.list[str]:
        """Abort the unfinished multipart uploads under `prefix`; the keys they were for. An uploader killed
        mid-way leaves one: no object to list, yet its parts are stored and billed until it is aborted."""
        from botocore.exceptions import BotoCoreError, ClientError

        aborted: list[str] = []
        try:
            pages = self._client.get_paginator("list_multipart_uploads").paginate(Bucket=self.url.bucket, Prefix=prefix)
            for page in pages:
                for upload in page.get("Uploads", []):
                    self._abort(upload["Key"], upload["UploadId"])
                    aborted.append(upload["Key"])
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"aborting the unfinished uploads under {prefix}", error) from None
        return aborted

    def _abort(self, key: str, upload_id: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._client.abort_multipart_upload(Bucket=self.url.bucket, Key=key, UploadId=upload_id)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "NoSuchUpload":  # completed or aborted meanwhile
                raise


# ---- Cloud Storage ---------------------------------------------------------------------------------------------


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

    def ensure_bucket(self, create: bool, location: str | None) -> str:
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
                bucket = self._client.create_bucket(bucket, location=location)
        except (exceptions.GoogleAPIError, GoogleAuthError) as error:
            raise self._calling(f"looking up or creating bucket {self.url.bucket}", error) from None
        return str(bucket.location or location or "")

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
