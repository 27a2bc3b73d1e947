"""What a user's environment holds for each cloud, pointed at the fake clouds: the providers are configured
the production way (boto3's endpoint variable, a service-account key file, KCB_* settings), nothing else."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.clouds.gce_fake import GCEFake

INGRESS_CIDR = "198.51.100.7/32"  # TEST-NET-2: stands in for checkip.amazonaws.com's answer
SERVICE_ACCOUNT = "bench-runner@kcb-test-project.iam.gserviceaccount.com"


def aws_environment(endpoint: str, home: Path) -> dict[str, str]:
    """What a user's shell would hold for an AWS account, with the endpoint redirected to moto."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "AKIAKCBTESTKEY000000",
        "AWS_SECRET_ACCESS_KEY": "kcb-test-secret-never-printed",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "aws-config-absent"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials-absent"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "KCB_SSH_INGRESS_CIDR": INGRESS_CIDR,
        "KCB_AWS_REGIONS": "us-east-1,us-west-2",  # where the tests launch; the sweep searches these
        "KCB_STATE_DIR": str(home / "state"),
    }


def gce_environment(fake: GCEFake, home: Path) -> dict[str, str]:
    key_file = write_service_account_key(fake, home / "service-account.json")
    return {
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "KCB_GCE_API_ENDPOINT": fake.url,
        "KCB_GCS_API_ENDPOINT": fake.storage_url,
        "CLOUDSDK_CONFIG": str(home / "gcloud-absent"),  # no gcloud ADC from the developer's machine
        "NO_GCE_CHECK": "true",  # no metadata-server probe (this is not a GCE VM)
        "KCB_STATE_DIR": str(home / "state"),
    }


def write_service_account_key(fake: GCEFake, path: Path) -> Path:
    """A service-account key file as the IAM console downloads it, its token_uri the fake's endpoint."""
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    fake.register_service_account(SERVICE_ACCOUNT, public_pem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": fake.project,
                "private_key_id": "0123456789abcdef",
                "private_key": private_pem,
                "client_email": SERVICE_ACCOUNT,
                "client_id": "100000000000000000001",
                "token_uri": fake.token_uri,
            }
        )
    )
    path.chmod(0o600)
    return path
