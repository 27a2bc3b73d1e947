"""A local fake of the Cloud Scheduler v1 REST API: the subset scheduled runs use, nothing more.

Google ships no Cloud Scheduler emulator, so the schedule tests talk to this HTTP server through the real
google-cloud-scheduler client (REST transport, `api_endpoint` pointed here). It follows the documented shapes:

- `projects.locations.list` and `projects.locations.jobs` create, get, list (pageSize/pageToken), delete and run;
- a Job is `{name, description, schedule, timeZone, httpTarget{uri, httpMethod, headers, body (base64),
  oauthToken{serviceAccountEmail, scope}}, retryConfig, attemptDeadline, state, status, userUpdateTime,
  lastAttemptTime}`; request bodies are parsed against the v1 message descriptors (unknown names and wrong types
  are refused) and checked against the documented rules: job ids of letters, digits, hyphens and underscores;
  a unix-cron schedule and a tz database time zone ("Schedule or time zone is invalid."); a request body only
  with POST, PUT or PATCH; an OAuth token only for Google APIs on *.googleapis.com; an existing name is
  ALREADY_EXISTS and a missing one NOT_FOUND, in the error body `{"error": {code, message, status}}`;
- `jobs.run` does what Cloud Scheduler does when a job fires: it sends the job's HTTP request, with
  `Authorization: Bearer <an OAuth token of the service account>`, and records the attempt in the job's
  `status` (a google.rpc.Status: 0 when the target answered 2xx) and `lastAttemptTime`. It runs synchronously
  here, so a test sees the attempt's result as soon as `run` returns.

The fake's own API takes any bearer token or none (tests use AnonymousCredentials). Two things stand in for
Google's network: `routes` maps a googleapis.com host to the local server playing it (the Compute fake), and
`token_for(service_account, scope)` mints the access token Cloud Scheduler would get for that account (None for
an account it may not act as).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from google.cloud import scheduler_v1
from google.protobuf import json_format

JOB_NAME = re.compile(r"projects/([^/]+)/locations/([^/]+)/jobs/([A-Za-z0-9_-]{1,500})")
# One unix-cron field: *, numbers or names, ranges, steps, lists.
_CRON_ITEM = r"(?:\*|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/\d+)?"
CRON_FIELD = re.compile(f"{_CRON_ITEM}(?:,{_CRON_ITEM})*")
BODY_METHODS = {"POST", "PUT", "PATCH"}
# google.rpc.Code for an HTTP status (the subset a target answers with).
RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 429: 8, 500: 13, 503: 14}


class ApiError(Exception):
    def __init__(self, code: int, message: str, status: str) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "status": self.status}}


def timestamp() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass
class Attempt:
    """One dispatch of a job: what was sent where, and what came back."""

    job: str
    url: str
    method: str
    body: bytes
    status: int | None  # the target's HTTP status; None when it could not be reached
    response: str


@dataclass
class CloudSchedulerFake:
    project: str = "kcb-test-project"
    locations: tuple[str, ...] = ("us-central1", "us-east1", "europe-west1")
    routes: dict[str, str] = field(default_factory=dict)  # "compute.googleapis.com" -> "http://127.0.0.1:PORT"
    token_for: Callable[[str, str], str | None] = lambda email, scope: None
    attempts: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._jobs: dict[str, dict[str, Any]] = {}
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def jobs(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(job) for job in self._jobs.values()]

    # -- API -------------------------------------------------------------------------------------------------

    def list_locations(self, project: str) -> dict[str, Any]:
        self._check_project(project)
        return {
            "locations": [
                {"name": f"projects/{project}/locations/{location}", "locationId": location}
                for location in self.locations
            ]
        }

    def create_job(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        project, location = self._parent(parent)
        job = _parse_job(body)
        name = job.get("name", "")
        match = JOB_NAME.fullmatch(name)
        if match is None or (match.group(1), match.group(2)) != (project, location):
            raise ApiError(
                400,
                f'Job name must be formatted: "projects/<PROJECT_ID>/locations/<LOCATION_ID>/jobs/<JOB_ID>" '
                f"under {parent}, got {name!r}.",
                "INVALID_ARGUMENT",
            )
        _check_schedule(job)
        _check_target(job)
        with self._lock:
            if name in self._jobs:
                raise ApiError(409, f"Job {name} already exists.", "ALREADY_EXISTS")
            stored = {**job, "timeZone": job.get("timeZone") or "Etc/UTC", "state": "ENABLED"}
            stored["userUpdateTime"] = timestamp()
            self._jobs[name] = stored
            return dict(stored)

    def get_job(self, name: str) -> dict[str, Any]:
        with self._lock:
            if name not in self._jobs:
                raise ApiError(404, "Job not found.", "NOT_FOUND")
            return dict(self._jobs[name])

    def list_jobs(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        self._parent(parent)
        size = int(query.get("pageSize") or 100)
        start = int(query.get("pageToken") or 0)
        with self._lock:
            found = [dict(job) for name, job in sorted(self._jobs.items()) if name.startswith(f"{parent}/jobs/")]
        page: dict[str, Any] = {"jobs": found[start : start + size]}
        if start + size < len(found):
            page["nextPageToken"] = str(start + size)
        return page

    def delete_job(self, name: str) -> dict[str, Any]:
        with self._lock:
            if self._jobs.pop(name, None) is None:
                raise ApiError(404, "Job not found.", "NOT_FOUND")
        return {}

    def run_job(self, name: str) -> dict[str, Any]:
        """Dispatch the job now, as its schedule would: its HTTP request, with a token of its service account."""
        job = self.get_job(name)
        target = job["httpTarget"]
        headers = dict(target.get("headers", {}))
        oauth = target.get("oauthToken")
        status: dict[str, Any]
        if oauth is not None:
            token = self.token_for(oauth["serviceAccountEmail"], oauth.get("scope", ""))
            if token is None:
                status = {"code": 7, "message": f"cannot get a token for {oauth['serviceAccountEmail']}"}
                return self._record(name, status)
            headers["Authorization"] = f"Bearer {token}"
        body = base64.b64decode(target.get("body", ""))
        url = self._routed(target["uri"])
        method = target.get("httpMethod", "POST")
        try:
            response = requests.request(method, url, data=body or None, headers=headers, timeout=30)
        except requests.RequestException as error:
            self.attempts.append(Attempt(name, target["uri"], method, body, None, str(error)))
            return self._record(name, {"code": 14, "message": f"target unreachable: {error}"})
        self.attempts.append(Attempt(name, target["uri"], method, body, response.status_code, response.text))
        if 200 <= response.status_code < 300:
            return self._record(name, {})
        code = RPC_CODES.get(response.status_code, 2)
        return self._record(name, {"code": code, "message": f"HTTP {response.status_code}: {response.text[:200]}"})

    def _record(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            job = self._jobs[name]
            job["status"] = status
            job["lastAttemptTime"] = timestamp()
            return dict(job)

    def _routed(self, uri: str) -> str:
        parts = urlsplit(uri)
        base = self.routes.get(parts.hostname or "")
        if base is None:
            return uri
        return base.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")

    def _check_project(self, project: str) -> None:
        if project != self.project:
            raise ApiError(403, f"Permission denied on resource project {project}.", "PERMISSION_DENIED")

    def _parent(self, parent: str) -> tuple[str, str]:
        match = re.fullmatch(r"projects/([^/]+)/locations/([^/]+)", parent)
        if match is None:
            raise ApiError(400, f"Invalid resource field value in the request: {parent}", "INVALID_ARGUMENT")
        self._check_project(match.group(1))
        if match.group(2) not in self.locations:
            raise ApiError(404, f"Location {match.group(2)} is not found or access is unauthorized.", "NOT_FOUND")
        return match.group(1), match.group(2)


def _parse_job(body: Any) -> dict[str, Any]:
    """The Job as the API stores it (camelCase, enum names); unknown fields and wrong types are refused."""
    if not isinstance(body, dict):
        raise ApiError(400, "Invalid JSON payload received. Expected an object.", "INVALID_ARGUMENT")
    message = scheduler_v1.Job.pb()()
    try:
        json_format.ParseDict(body, message, ignore_unknown_fields=False)
    except json_format.ParseError as error:
        raise ApiError(400, f"Invalid JSON payload received. {error}", "INVALID_ARGUMENT") from None
    return json_format.MessageToDict(message)


def _check_schedule(job: dict[str, Any]) -> None:
    fields = job.get("schedule", "").split()
    tz = job.get("timeZone") or "Etc/UTC"
    if len(fields) != 5 or not all(CRON_FIELD.fullmatch(f) for f in fields) or tz not in zoneinfo.available_timezones():
        raise ApiError(400, "Schedule or time zone is invalid.", "INVALID_ARGUMENT")


def _check_target(job: dict[str, Any]) -> None:
    target = job.get("httpTarget")
    if target is None:
        raise ApiError(400, "A job must have a target.", "INVALID_ARGUMENT")
    uri = urlsplit(target.get("uri", ""))
    if uri.scheme not in ("http", "https") or not uri.hostname:
        raise ApiError(400, "HttpTarget.uri must be an http or https URL.", "INVALID_ARGUMENT")
    method = target.get("httpMethod", "POST")
    if target.get("body") and method not in BODY_METHODS:
        raise ApiError(
            400, "A request body is allowed only if the HTTP method is POST, PUT, or PATCH.", "INVALID_ARGUMENT"
        )
    try:
        base64.b64decode(target.get("body", ""), validate=True)
    except binascii.Error:
        raise ApiError(400, "HttpTarget.body is not valid base64.", "INVALID_ARGUMENT") from None
    oauth = target.get("oauthToken")
    if oauth is not None:
        if not uri.hostname.endswith(".googleapis.com"):
            raise ApiError(
                400, "An OAuth token may only be used for Google APIs hosted on *.googleapis.com.", "INVALID_ARGUMENT"
            )
        if not oauth.get("serviceAccountEmail"):
            raise ApiError(400, "OAuthToken.serviceAccountEmail is required.", "INVALID_ARGUMENT")


_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(r"/v1/projects/([^/]+)/locations"), "locations"),
    ("POST", re.compile(r"/v1/(projects/[^/]+/locations/[^/]+)/jobs"), "create"),
    ("GET", re.compile(r"/v1/(projects/[^/]+/locations/[^/]+)/jobs"), "list"),
    ("GET", re.compile(r"/v1/(projects/[^/]+/locations/[^/]+/jobs/[^/:]+)"), "get"),
    ("DELETE", re.compile(r"/v1/(projects/[^/]+/locations/[^/]+/jobs/[^/:]+)"), "delete"),
    ("POST", re.compile(r"/v1/(projects/[^/]+/locations/[^/]+/jobs/[^/:]+):run"), "run"),
]


class _Handler(BaseHTTPRequestHandler):
    fake: CloudSchedulerFake
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not traffic
        return

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            self._send(200, self._route(url.path, query, raw))
        except ApiError as error:
            self._send(error.code, error.body())
        except Exception as error:  # a bug in the fake: answer 500 so the test fails loudly, not a hang
            self._send(500, ApiError(500, f"fake internal error: {error!r}", "INTERNAL").body())
            raise

    def _route(self, path: str, query: dict[str, str], raw: bytes) -> dict[str, Any]:
        fake = self.fake
        for method, pattern, action in _ROUTES:
            match = pattern.fullmatch(path)
            if method != self.command or match is None:
                continue
            if action == "locations":
                return fake.list_locations(match.group(1))
            if action == "create":
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError as error:
                    raise ApiError(400, f"Invalid JSON payload received. {error}", "INVALID_ARGUMENT") from None
                return fake.create_job(match.group(1), body)
            if action == "list":
                return fake.list_jobs(match.group(1), query)
            if action == "get":
                return fake.get_job(match.group(1))
            if action == "delete":
                return fake.delete_job(match.group(1))
            return fake.run_job(match.group(1))
        raise ApiError(404, f"Not Found: {self.command} {path}", "NOT_FOUND")

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
