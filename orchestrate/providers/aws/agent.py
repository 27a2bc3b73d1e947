"""The AWS side of a detached run's agent (`orchestrate/machine_agent.py`), run ON the EC2 instance: who it is
(IMDSv2), its bucket (S3) and deleting itself (EC2), through requests signed with SigV4 by the instance role's
short-lived credentials. Standard library only, Python 3.8+: the boot script writes it beside the agent as
`cloud.py`, and the agent passes its retrying `request(method, url, headers, data)`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
import urllib.error
import urllib.parse


def utc(offset_s: float = 0.0, form: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    return time.strftime(form, time.gmtime(time.time() + offset_s))


def sigv4_headers(
    method: str, url: str, service: str, region: str, headers: dict, body: bytes, credentials: dict, stamp: str
) -> dict:
    """The request's headers signed with SigV4 (docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html),
    S3 bodies unsigned; written out because the machine has only the standard library (no botocore)."""
    parts = urllib.parse.urlsplit(url)
    day = stamp[:8]
    payload = "UNSIGNED-PAYLOAD" if service == "s3" else hashlib.sha256(body).hexdigest()
    signed = {k.lower(): v for k, v in headers.items()}
    signed.update({"host": parts.netloc, "x-amz-date": stamp, "x-amz-content-sha256": payload})
    if credentials.get("Token"):
        signed["x-amz-security-token"] = credentials["Token"]
    names = ";".join(sorted(signed))
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    header_lines = "".join(f"{k}:{signed[k].strip()}\n" for k in sorted(signed))
    canonical = "\n".join([method, parts.path or "/", query, header_lines, names, payload])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = ("AWS4" + credentials["SecretAccessKey"]).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials['AccessKeyId']}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    return signed


class Cloud:
    """EC2 instance metadata (IMDSv2), S3 and EC2 through SigV4-signed requests with the instance role."""

    def __init__(self, spec: dict, request) -> None:
        self._request = request
        self.imds = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254").rstrip("/")
        self.instance_id = self._meta("instance-id")
        self.zone = self._meta("placement/availability-zone")
        self.region = self._meta("placement/region")
        storage = spec["storage"]
        self.bucket, self.bucket_region = storage["bucket"], storage.get("region") or self.region
        endpoints = spec.get("endpoints", {})
        self.s3 = endpoints.get("s3")  # None: the bucket's virtual-hosted address
        self.ec2 = endpoints.get("ec2") or f"https://ec2.{self.region}.amazonaws.com"
        self._credentials: dict = {}

    def _meta(self, path: str) -> str:
        token = self._request(
            "PUT", f"{self.imds}/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}
        ).read()
        answer = self._request(
            "GET", f"{self.imds}/latest/meta-data/{path}", {"X-aws-ec2-metadata-token": token.decode()}
        )
        return answer.read().decode().strip()

    def credentials(self) -> dict:
        if not self._credentials or self._credentials.get("Expiration", "") < utc(300):  # ISO 8601 sorts as time
            role = self._meta("iam/security-credentials/").splitlines()[0]
            self._credentials = json.loads(self._meta(f"iam/security-credentials/{role}"))
        return self._credentials

    def _object_url(self, key: str) -> str:
        quoted = urllib.parse.quote(key, safe="/-_.~")
        if self.s3:
            return f"{self.s3.rstrip('/')}/{self.bucket}/{quoted}"
        return f"https://{self.bucket}.s3.{self.bucket_region}.amazonaws.com/{quoted}"

    def _signed(self, method: str, url: str, service: str, region: str, headers: dict, body: bytes = b""):
        stamp = utc(form="%Y%m%dT%H%M%SZ")
        signed = sigv4_headers(method, url, service, region, headers, body, self.credentials(), stamp)
        del signed["host"]  # urllib sets it from the URL
        return self._request(method, url, signed, body or None)

    def put(self, key: str, data: bytes) -> None:
        # an explicit type: urllib's default for a body (form-urlencoded) would invite parsing it as a form
        headers = {"content-type": "application/octet-stream"}
        self._signed("PUT", self._object_url(key), "s3", self.bucket_region, headers, data).read()

    def open(self, key: str):
        """The object's body as a stream; None when it does not exist (403 too: the machine may not list the
        bucket, and S3 then answers a missing object with 403, not 404)."""
        try:
            return self._signed("GET", self._object_url(key), "s3", self.bucket_region, {})
        except urllib.error.HTTPError as error:
            if error.code in (403, 404):
                return None
            raise

    def delete_self(self) -> None:
        body = urllib.parse.urlencode(
            {"Action": "TerminateInstances", "InstanceId.1": self.instance_id, "Version": "2016-11-15"}
        ).encode()
        headers = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}
        self._signed("POST", f"{self.ec2.rstrip('/')}/", "ec2", self.region, headers, body).read()
