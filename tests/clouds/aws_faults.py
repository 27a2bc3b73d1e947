"""moto's EC2 server with AWS-side faults: capacity errors, throttling, spot interruptions.

`FaultyMotoServer` is moto's `ThreadedMotoServer` whose WSGI app is wrapped in `FaultInjector`: a request that
matches a rule (an EC2 action, optionally some of its query parameters) is answered with the error AWS sends for
that condition (EC2's XML error body and HTTP status) instead of reaching moto. Everything else is moto. The
client under test therefore goes through botocore's real parsing and retry path (throttling and 5xx answers are
retried by botocore's standard retry mode, as against AWS).

`interrupt_spot_instance` plays EC2 reclaiming a Spot instance: it terminates the instance in moto's backend
(the server runs in this process) with the state reason AWS records, `Server.SpotInstanceTermination`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.instances import StateReason
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

# HTTP statuses EC2 answers these errors with.
STATUS = {
    "InsufficientInstanceCapacity": 500,
    "InsufficientCapacity": 500,
    "RequestLimitExceeded": 503,
    "VcpuLimitExceeded": 400,
    "MaxSpotInstanceCountExceeded": 400,
    "Unsupported": 400,
    "AccessDenied": 403,
}


@dataclass
class Fault:
    action: str  # EC2 API action, e.g. RunInstances; for S3 (a REST API) `s3:<HTTP method>`, e.g. s3:PUT
    code: str
    message: str
    times: int | None  # None: until cleared
    params: dict[str, str] = field(default_factory=dict)  # query parameters that must match
    hits: int = 0


class FaultInjector:
    """WSGI middleware in front of moto's app (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.faults: list[Fault] = []
        self.calls: list[dict[str, str]] = []  # every EC2 query seen: Action and parameters
        self.after: dict[str, Callable[[], None]] = {}  # action -> called once moto has done it, before replying
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.calls.clear()
            self.after.clear()

    def count(self, action: str) -> int:
        with self._lock:
            return sum(1 for call in self.calls if call.get("Action") == action)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = BytesIO(body)
        params = {key: values[-1] for key, values in parse_qs(body.decode(errors="replace")).items()}
        if "Action" not in params and "Action=" not in environ.get("QUERY_STRING", ""):
            params = {"Action": f"s3:{environ['REQUEST_METHOD']}", "Path": environ.get("PATH_INFO", "")}
        fault = self._match(params)
        if fault is None:
            response = list(self.app(environ, start_response))
            hook = self.after.pop(params.get("Action", ""), None)
            if hook is not None:
                hook()
            return response
        status = STATUS.get(fault.code, 400)
        error = f"<Code>{escape(fault.code)}</Code><Message>{escape(fault.message)}</Message>"
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error>{error}<RequestId>{uuid.uuid4()}</RequestId></Error>'
            if fault.action.startswith("s3:")  # S3's REST error body
            else '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"{error}</Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
        ).encode()
        start_response(f"{status} Error", [("Content-Type", "text/xml"), ("Content-Length", str(len(xml)))])
        return [xml]

    def _match(self, params: dict[str, str]) -> Fault | None:
        with self._lock:
            if "Action" in params:
                self.calls.append(params)
            for fault in self.faults:
                if params.get("Action") != fault.action:
                    continue
                if any(params.get(key) != value for key, value in fault.params.items()):
                    continue
                fault.hits += 1
                if fault.times is not None and fault.hits >= fault.times:
                    self.faults.remove(fault)
                return fault
        return None


class QuietRequestHandler(MotoRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """No access log: test output shows failures, not every EC2 call."""


class FaultyMotoServer(ThreadedMotoServer):
    """ThreadedMotoServer with `FaultInjector` around its app (moto's own server entry, one line changed)."""

    def __init__(self) -> None:
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self.injector = FaultInjector(DomainDispatcherApplication(create_backend_app))

    def _server_entry(self) -> None:
        self._server = make_server(
            self._ip_address, self._port, self.injector, True, request_handler=QuietRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"


def interrupt_spot_instance(region: str, instance_id: str) -> None:
    """EC2 reclaims a Spot instance: terminated, with the state reason AWS gives a Spot interruption."""
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    instance = backend.get_instance(instance_id)
    assert instance.lifecycle == "spot", f"{instance_id} is not a Spot instance; EC2 only interrupts Spot"
    instance.terminate()
    instance.state_reason = StateReason(
        "Server.SpotInstanceTermination: Spot instance termination", "Server.SpotInstanceTermination"
    )
