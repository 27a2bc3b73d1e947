"""foldercloud's side of the machine agent: standard library only, like every cloud's. The machine learns who it is
from `FOLDERCLOUD_INSTANCE` (its metadata server), and its bucket and its own record are under the cloud's folder."""

from __future__ import annotations

import json
import os
import time


class Cloud:
    def __init__(self, spec: dict, request) -> None:
        self.root = spec["endpoints"]["root"]
        self.instance_id = os.environ["FOLDERCLOUD_INSTANCE"]
        self.bucket = os.path.join(self.root, "buckets", spec["storage"]["bucket"])
        with open(self._machine()) as handle:
            self.zone = json.load(handle)["zone"]

    def _machine(self) -> str:
        return os.path.join(self.root, "machines", f"{self.instance_id}.json")

    def put(self, key: str, data: bytes) -> None:
        path = os.path.join(self.bucket, *key.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)

    def open(self, key: str):
        path = os.path.join(self.bucket, *key.split("/"))
        return open(path, "rb") if os.path.isfile(path) else None

    def delete_self(self) -> None:
        with open(self._machine()) as handle:
            record = json.load(handle)
        record.update(state="terminated", ended_at=time.time())
        with open(self._machine(), "w") as handle:
            json.dump(record, handle)
