"""The detached machine's agent signs its S3 and EC2 requests with SigV4 written out by hand (the machine has only
the standard library). moto does not check signatures, so the agent's signature is checked here against botocore's
own signer on the same request, time and credentials."""

from __future__ import annotations

import datetime
import urllib.parse

import pytest
from botocore import auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from orchestrate.providers.aws.agent import sigv4_headers

STAMP = "20261123T101500Z"
CREDENTIALS = {
    "AccessKeyId": "ASIAEXAMPLEKEYID0001",
    "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Token": "IQoJb3JpZ2luX2VjEXAMPLE//session+token=",
}
EC2_BODY = urllib.parse.urlencode(
    {"Action": "TerminateInstances", "InstanceId.1": "i-0123456789abcdef0", "Version": "2016-11-15"}
).encode()


def _botocore_authorization(
    monkeypatch, method: str, url: str, service: str, headers: dict, body: bytes, signer: type
) -> str:
    monkeypatch.setattr(auth, "get_current_datetime", lambda: datetime.datetime(2026, 11, 23, 10, 15, 0))
    request = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    if signer is auth.S3SigV4Auth:
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    else:  # the agent signs this header on every request; botocore signs whatever headers the request has
        request.headers["X-Amz-Content-SHA256"] = sigv4_headers(
            method, url, service, "eu-west-1", headers, body, CREDENTIALS, STAMP
        )["x-amz-content-sha256"]
    credentials = Credentials(CREDENTIALS["AccessKeyId"], CREDENTIALS["SecretAccessKey"], CREDENTIALS["Token"])
    signer(credentials, service, "eu-west-1").add_auth(request)
    return request.headers["Authorization"]


@pytest.mark.parametrize(
    ("method", "url", "service", "headers", "body", "signer"),
    [
        (
            "PUT",
            "https://bench-bucket.s3.eu-west-1.amazonaws.com/runs/r-1/NVIDIA-H200/mnist_mlp_jax.r01.csv",
            "s3",
            {"content-type": "application/octet-stream"},
            b"epoch,seconds\n1,2.5\n",
            auth.S3SigV4Auth,
        ),
        (
            "GET",
            "https://bench-bucket.s3.eu-west-1.amazonaws.com/runs/r-1/status%20now.json",
            "s3",
            {},
            b"",
            auth.S3SigV4Auth,
        ),
        (
            "POST",
            "https://ec2.eu-west-1.amazonaws.com/",
            "ec2",
            {"content-type": "application/x-www-form-urlencoded; charset=utf-8"},
            EC2_BODY,
            auth.SigV4Auth,
        ),
    ],
    ids=["s3-put", "s3-get-quoted-key", "ec2-terminate"],
)
def test_the_agents_signature_is_botocores(monkeypatch, method, url, service, headers, body, signer) -> None:
    ours = sigv4_headers(method, url, service, "eu-west-1", headers, body, CREDENTIALS, STAMP)
    assert ours["authorization"] == _botocore_authorization(monkeypatch, method, url, service, headers, body, signer)
    assert ours["x-amz-security-token"] == CREDENTIALS["Token"]


def test_a_different_secret_gives_a_different_signature() -> None:
    url = "https://ec2.eu-west-1.amazonaws.com/"
    ours = sigv4_headers("POST", url, "ec2", "eu-west-1", {}, EC2_BODY, CREDENTIALS, STAMP)
    other = sigv4_headers("POST", url, "ec2", "eu-west-1", {}, EC2_BODY, {**CREDENTIALS, "SecretAccessKey": "x"}, STAMP)
    assert ours["authorization"] != other["authorization"]
