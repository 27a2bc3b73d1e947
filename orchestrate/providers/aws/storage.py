"""Amazon S3, the AWS provider's object storage (`Capability.OBJECT_STORE`), through boto3.

The endpoint is redirected the way the provider's is: boto3's own `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3`.
"""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path
from typing import Any, BinaryIO

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from orchestrate.provider import PROJECT_TAG
from orchestrate.storage import StorageError, StorageURL

# No dots: a dotted name breaks TLS on the virtual-hosted address the machine uses (bucket.s3.region...).
BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
UNFINISHED_UPLOAD_DAYS = 2  # the project's own bucket aborts multipart uploads unfinished after this long
WEEK_S = 7 * 24 * 3600  # the longest a SigV4 presigned URL lasts


def bucket_problem(bucket: str) -> str | None:
    if BUCKET_RE.fullmatch(bucket) and not bucket.startswith("xn--") and "--" not in bucket[:4]:
        return None
    return "must be 3-63 lowercase letters, digits and '-', no dots"


def account_name(region: str) -> str:
    """The AWS account and the region: the project's own bucket is one per account and region."""
    try:
        account = boto3.Session().client("sts", region_name=region).get_caller_identity()["Account"]
    except (ClientError, BotoCoreError) as error:
        raise StorageError(f"cannot read the AWS account that names the run's bucket: {error}") from None
    return f"{account}-{region}"


class S3Store:
    def __init__(self, url: StorageURL, session: Any = None) -> None:
        self.url = url
        self._session = session or boto3.Session()
        # A redirected endpoint (VPC endpoint, LocalStack, moto) serves buckets by path, not by host name.
        redirected = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
        self._config = Config(
            retries={"mode": "standard", "max_attempts": 4}, s3={"addressing_style": "path" if redirected else "auto"}
        )
        self._client = self._session.client("s3", config=self._config)

    def _calling(self, what: str, error: Exception) -> StorageError:
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", "")
            return StorageError(f"{self.url}: {what} failed ({code}): {message}")
        return StorageError(f"{self.url}: {what} failed: {error}")

    def ensure_bucket(self, create: bool, location: str | None) -> str:
        """The bucket's region; created (tagged project=keras-cloud-bench, no public access) when `create`."""
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
        try:
            self._client.put_object(Bucket=self.url.bucket, Key=key, Body=b"keras-cloud-bench write check\n")
            self._client.delete_object(Bucket=self.url.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"writing {key}", error) from None

    def put(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.url.bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"writing {key}", error) from None

    def upload_file(self, key: str, source: BinaryIO) -> None:
        """A seekable file, in parts when large (boto3's multipart upload, which it aborts when a part fails)."""
        from boto3.exceptions import S3UploadFailedError

        try:
            self._client.upload_fileobj(source, self.url.bucket, key)
        except (ClientError, BotoCoreError, S3UploadFailedError) as error:
            raise self._calling(f"uploading {key}", error) from None

    def upload_url(self, key: str, expires_s: int) -> str:
        """A presigned URL that PUTs `key` with no credentials, for `expires_s` (at most a week, SigV4's limit)."""
        params = {"Bucket": self.url.bucket, "Key": key}
        try:
            url: str = self._client.generate_presigned_url(
                "put_object", Params=params, ExpiresIn=min(expires_s, WEEK_S)
            )
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"presigning an upload of {key}", error) from None
        return url

    def read(self, key: str) -> bytes | None:
        try:
            return self._client.get_object(Bucket=self.url.bucket, Key=key)["Body"].read()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._calling(f"reading {key}", error) from None
        except BotoCoreError as error:
            raise self._calling(f"reading {key}", error) from None

    def list(self, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.url.bucket, Prefix=prefix):
                found.update({item["Key"]: item["Size"] for item in page.get("Contents", [])})
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"listing {prefix}", error) from None
        return found

    def download(self, key: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._client.download_file(self.url.bucket, key, str(path))
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"downloading {key}", error) from None

    def delete(self, key: str) -> None:
        """Gone, whether or not it was there (S3 answers a missing key's delete with success)."""
        try:
            self._client.delete_object(Bucket=self.url.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._calling(f"deleting {key}", error) from None

    def abort_uploads(self, prefix: str) -> builtins.list[str]:
        """Abort the unfinished multipart uploads under `prefix`; the keys they were for. An uploader killed
        mid-way leaves one: no object to list, yet its parts are stored and billed until it is aborted."""

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
        try:
            self._client.abort_multipart_upload(Bucket=self.url.bucket, Key=key, UploadId=upload_id)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "NoSuchUpload":  # completed or aborted meanwhile
                raise
