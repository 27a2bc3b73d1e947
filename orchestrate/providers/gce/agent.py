"""The Google Cloud side of a detached run's agent (`orchestrate/machine_agent.py`), run ON the VM: who it is and
its service account's token (the metadata server), its bucket (Cloud Storage's JSON API) and deleting itself
(Compute Engine's API). Standard library only, Python 3.8+: the boot script writes it beside the agent as
`cloud.py`, and the agent passes its retrying `request(method, url, headers, data)`.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse


class Cloud:
    """The Compute Engine metadata server, Cloud Storage's JSON API and Compute's API with the VM's account."""

    def __init__(self, spec: dict, request) -> None:
        self._request = request
        self.metadata = "http://" + os.environ.get("GCE_METADATA_HOST", "metadata.google.internal")
        self.instance_id = self._meta("instance/name")
        self.zone = self._meta("instance/zone").rsplit("/", 1)[-1]
        self.project = self._meta("project/project-id")
        self.bucket = spec["storage"]["bucket"]
        endpoints = spec.get("endpoints", {})
        self.gcs = (endpoints.get("gcs") or "https://storage.googleapis.com").rstrip("/")
        self.compute = (endpoints.get("compute") or "https://compute.googleapis.com").rstrip("/")
        self._token: tuple[str, float] = ("", 0.0)

    def _meta(self, path: str) -> str:
        answer = self._request("GET", f"{self.metadata}/computeMetadata/v1/{path}", {"Metadata-Flavor": "Google"})
        return answer.read().decode().strip()

    def _auth(self) -> dict:
        if time.time() > self._token[1] - 300:
            answer = json.loads(self._meta("instance/service-accounts/default/token"))
            self._token = (answer["access_token"], time.time() + float(answer["expires_in"]))
        return {"Authorization": f"Bearer {self._token[0]}"}

    def put(self, key: str, data: bytes) -> None:
        name = urllib.parse.quote(key, safe="")
        url = f"{self.gcs}/upload/storage/v1/b/{self.bucket}/o?uploadType=media&name={name}"
        self._request("POST", url, {**self._auth(), "Content-Type": "application/octet-stream"}, data).read()

    def open(self, key: str):
        url = f"{self.gcs}/storage/v1/b/{self.bucket}/o/{urllib.parse.quote(key, safe='')}?alt=media"
        try:
            return self._request("GET", url, self._auth())
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def delete_self(self) -> None:
        url = f"{self.compute}/compute/v1/projects/{self.project}/zones/{self.zone}/instances/{self.instance_id}"
        self._request("DELETE", url, self._auth()).read()
