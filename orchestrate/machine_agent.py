"""The agent of a detached run: it runs ON the rented machine, started by the boot script that
`orchestrate.detached.boot_script` writes, with no orchestrator anywhere.

    python3 agent.py spec.json        # what the boot script runs, as root, in the folder holding spec.json

Standard library only, Python 3.8+: it runs on the machine image's own python3 (Ubuntu, Debian, the Deep Learning
AMI / VM), not in the project's environment. What it does:

1. asks the cloud's metadata server who it is (instance id, zone) and for the instance role's / service account's
   short-lived credentials (never written anywhere, never printed): the cloud's side of the agent, `cloud.py` beside
   it (the provider's `MachineIdentity.agent_source`, e.g. `orchestrate/providers/aws/agent.py`);
2. reads the run's `status.json` from the bucket: a relaunch after a preemption skips the items an earlier machine
   finished, and marks the one it was running `preempted`;
3. gets the image (`present`, `pull`, or `load`: `docker load` of the image tar the orchestrator put in the bucket),
   seeds the dataset cache from it, and unpacks the run's payload (`payload.tar`: the user's workload files and
   data folder), checked against the manifest the run spec names;
4. runs each pending item as one container (`container_command.py`, beside it: the command every mode runs),
   uploading the item's files to `partial/attempt-N/` while it runs
   (every `upload_interval_s`), and its CSV, metadata JSON and console log to `files/` as soon as it ends, then
   `status.json`;
5. at the end, on every path (failure and SIGTERM included): uploads its own console and the image log, writes
   `summary.json` when the run is over, and deletes its own instance through the cloud's API.

Bucket layout under `<prefix>/runs/<run-id>/`: `spec.json` (the orchestrator's, not a schedule's), `status.json`,
`summary.json`, `files/<name>` (the layout of `logs/<platform>/<run-id>/`), `partial/attempt-N/<name>`, `image.tar`
(image source `load` only), `payload.tar` (workload files or a data folder; a schedule's is `<prefix>payload.tar`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CLOUD_MODULE = "cloud.py"  # the cloud's side, beside this file on the machine
COMMAND_MODULE = "container_command.py"  # the container command every mode runs, beside this file
RUN_ID_TOKEN = "{run_id}"  # in the run spec of a run named at boot: replaced by the run id derived here
FINISHED = ("complete", "failed")  # an item in one of these states is never run again
EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
DOCKER_CANNOT_RUN = (125, 126, 127)
RETRIES = 5


class Stop(Exception):
    """SIGTERM: the machine is shutting down (a preemption notice, or someone stopping it)."""


class RunFailed(Exception):
    """The run cannot go on (the image is missing, docker cannot start a container); the message says why."""


def log(message: str) -> None:
    print(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), message, flush=True)


def request(method: str, url: str, headers: dict | None = None, data: bytes | None = None, timeout: float = 60):
    """An HTTP response; transient failures (connection errors, 429, 5xx) are retried with backoff."""
    for attempt in range(RETRIES):
        try:
            return urllib.request.urlopen(
                urllib.request.Request(url, data=data, method=method, headers=headers or {}), timeout=timeout
            )
        except urllib.error.HTTPError as error:
            if error.code not in (429, 500, 502, 503, 504) or attempt == RETRIES - 1:
                raise
        except (urllib.error.URLError, OSError):
            if attempt == RETRIES - 1:
                raise
        time.sleep(min(30, 2**attempt))
    raise AssertionError("unreachable")


# ---- the run -----------------------------------------------------------------------------------------------


def derived_run_id(instance_id: str) -> str:
    """A scheduled launch has no orchestrator to name it: UTC time + 4 hex of the instance id (the runner's format)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + hashlib.sha1(instance_id.encode()).hexdigest()[:4]


class Run:
    def __init__(self, spec: dict, cloud, work: str) -> None:
        self.spec, self.cloud, self.work = spec, cloud, work
        self.run = spec["run"]  # the run spec (orchestrate.runspec), as planned
        self.run_id = self.run.get("run_id") or derived_run_id(cloud.instance_id)
        base = spec["storage"].get("prefix", "")
        self.prefix = f"{base}runs/{self.run_id}/"
        self.run_dir = os.path.join(work, "logs", self.run["platform"], self.run_id)
        payload = os.path.join(work, "payload")
        self.places = {  # where each of the spec's mounts is on this machine
            "logs": os.path.join(work, "logs"),
            "cache": os.path.join(work, "cache", "keras"),
            "workloads": os.path.join(payload, "workloads"),
            "data": os.path.join(payload, "data"),
        }
        for folder in (os.path.join(self.run_dir, "orchestrate"), os.path.join(self.places["cache"], "datasets")):
            os.makedirs(folder, exist_ok=True)
        self.command = load_module(os.path.join(os.path.dirname(os.path.abspath(__file__)), COMMAND_MODULE))
        self.status: dict = {}
        self.attempt: dict = {}
        self.abort: str | None = None

    # -- status ----------------------------------------------------------------------------------------------

    def begin(self) -> None:
        previous = self.cloud.open(self.prefix + "status.json")
        self.status = json.loads(previous.read()) if previous is not None else self._new_status()
        for item in self.status["items"]:
            if item["status"] == "running":  # the machine before this one died under it
                item["status"], item["ended_at"] = "preempted", self.status.get("updated_at")
        for attempt in self.status["attempts"]:
            if attempt["outcome"] == "running":
                attempt["outcome"], attempt["ended_at"] = "preempted", self.status.get("updated_at")
        number = len(self.status["attempts"]) + 1
        self.attempt = {
            "attempt": number,
            "machine": self.cloud.instance_id,
            "zone": self.cloud.zone,
            "started_at": time.time(),
            "ended_at": None,
            "outcome": "running",
        }
        self.status["attempts"].append(self.attempt)
        self.status["state"] = "running"
        self.save()
        log(f"run {self.run_id}, attempt {number} on {self.cloud.instance_id} in {self.cloud.zone}")

    def _new_status(self) -> dict:
        return {
            "run_id": self.run_id,
            "provider": self.spec["provider"],
            "platform": self.run["platform"],
            "suite": self.run["suite"],
            "image": self.spec["image"]["ref"],
            "image_digest": None,
            "planned": [[i["workload"], i["backend"], i["repeat"]] for i in self.run["items"]],
            "state": "running",
            "message": "",
            "started_at": time.time(),
            "ended_at": None,
            "attempts": [],
            "items": [],
        }

    def save(self) -> None:
        self.status["updated_at"] = time.time()
        self.cloud.put(self.prefix + "status.json", json.dumps(self.status, indent=1).encode())

    def pending(self) -> list:
        latest = {(i["workload"], i["backend"], i["repeat"]): i["status"] for i in self.status["items"]}
        return [i for i in self.run["items"] if latest.get((i["workload"], i["backend"], i["repeat"])) not in FINISHED]

    # -- the machine and the image ---------------------------------------------------------------------------

    def prepare(self) -> None:
        if subprocess.call(["sh", "-c", "command -v docker"], stdout=subprocess.DEVNULL) != 0:
            log("installing Docker")
            self._shell(self.spec["install_docker"], "install Docker")
        gpu = self.spec.get("install_nvidia_toolkit")
        if gpu and subprocess.call(["sh", "-c", "command -v nvidia-ctk"], stdout=subprocess.DEVNULL) != 0:
            log("installing the NVIDIA container toolkit")
            self._shell(gpu, "install the NVIDIA container toolkit")

    def _shell(self, script: str, what: str) -> None:
        with open(os.path.join(self.run_dir, "orchestrate", "host.log"), "ab") as output:
            if subprocess.call(["sh", "-c", script], stdout=output, stderr=subprocess.STDOUT) != 0:
                raise RunFailed(f"could not {what} on {self.cloud.instance_id}: see orchestrate/host.log")

    def image(self) -> None:
        ref, source = self.spec["image"]["ref"], self.spec["image"]["source"]
        with open(os.path.join(self.run_dir, "orchestrate", "image.log"), "ab") as output:
            if source == "pull":
                for attempt in range(3):
                    if subprocess.call(["docker", "pull", ref], stdout=output, stderr=subprocess.STDOUT) == 0:
                        break
                    time.sleep(10 * (attempt + 1))
            elif source == "load":
                self.pipe(self.prefix + "image.tar", ["docker", "load"], output, f"image {ref}")
        found = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True)
        if found.returncode != 0:
            raise RunFailed(f"image {ref} is not on {self.cloud.instance_id} after `{source}` (see image.log)")
        inspect = json.loads(found.stdout)[0]
        self.status["image_digest"] = (inspect.get("RepoDigests") or [inspect["Id"]])[0]
        log(f"image {ref} ready ({source}): {self.status['image_digest']}")
        cache, marker = self.places["cache"], self.command.seed_marker(inspect["Id"])
        if not os.path.exists(os.path.join(cache, marker)):  # what the image holds, visible under the cache's mount
            with open(os.path.join(self.run_dir, "orchestrate", "image.log"), "ab") as output:
                seed = self.command.seed_argv("docker", ref, cache, marker, user="0:0")
                subprocess.call(seed, stdout=output, stderr=subprocess.STDOUT)

    def fetch_payload(self) -> None:
        """The run's payload (the user's workload files and data folder) from the bucket, unpacked once before the
        first item and checked against its manifest."""
        payload = self.run.get("payload")
        if not payload:
            return
        key = self.spec["payload_key"]
        script = self.command.unpack_payload(os.path.join(self.work, "payload"), payload["sha256"])
        with open(os.path.join(self.run_dir, "orchestrate", "host.log"), "ab") as output:
            if self.pipe(key, ["sh", "-c", script], output, "the run's payload") != 0:
                raise RunFailed(f"the run's payload {key} did not unpack whole (see orchestrate/host.log)")
        log(f"payload: {payload['files']} files, {payload['bytes']} bytes from {key}")

    def pipe(self, key: str, command: list, output, what: str) -> int:
        """The bucket's object `key` into `command`'s stdin; its exit code. RunFailed when the object is missing."""
        body = self.cloud.open(key)
        if body is None:
            raise RunFailed(f"{what}: {key} is not in the bucket")
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=output, stderr=output)
        assert process.stdin is not None  # stdin=PIPE
        for chunk in iter(lambda: body.read(1 << 20), b""):
            process.stdin.write(chunk)
        process.stdin.close()
        return process.wait()

    # -- the items -------------------------------------------------------------------------------------------

    def run_items(self) -> None:
        for item in self.pending():
            self.run_item(item)
            if self.abort:
                break

    def run_item(self, item: dict) -> None:
        record = {
            "workload": item["workload"],
            "backend": item["backend"],
            "repeat": item["repeat"],
            "status": "running",
            "exit_code": None,
            "started_at": time.time(),
            "ended_at": None,
            "attempt": self.attempt["attempt"],
        }
        self.status["items"].append(record)
        self.save()
        log(f"item {item['stem']}: started")
        console = os.path.join(self.run_dir, "orchestrate", f"{item['stem']}.console.log")
        with open(console, "ab") as output:
            process = subprocess.Popen(self.container(item), stdout=output, stderr=subprocess.STDOUT)
            while True:
                try:
                    code = process.wait(timeout=float(self.spec["upload_interval_s"]))
                    break
                except subprocess.TimeoutExpired:  # still running: keep its epochs safe, say we are alive
                    self.upload(item, f"partial/attempt-{self.attempt['attempt']}/")
                    self.put_console()
                    self.save()
        record["ended_at"], record["exit_code"] = time.time(), code
        self.upload(item, "files/")
        record["status"] = self._item_status(item, code, console)
        self.save()
        log(f"item {item['stem']}: {record['status']} (exit {code})")

    def container(self, item: dict) -> list:
        """The item's container, as the run spec says (orchestrate.runspec.RunSpec.container), run as root."""
        run = self.run
        env = {**run["env"], "BENCH_IMAGE_DIGEST": self.status["image_digest"], "BENCH_RUN_SPEC": self.spec["carried"]}
        labels = {**run["labels"], "run-id": self.run_id, "machine": self.cloud.instance_id}
        return self.command.container_argv(
            "docker",
            self.spec["image"]["ref"],
            [part.replace(RUN_ID_TOKEN, self.run_id) for part in item["argv"]],
            mounts=[(self.places[place], target, read_only) for place, target, read_only in run["mounts"]],
            env=env,
            labels=labels,
            name=item["container"].replace(RUN_ID_TOKEN, self.run_id),
            user="0:0",
            gpus=run["gpus"],
        )

    def _item_status(self, item: dict, code: int, console: str) -> str:
        if code == EXIT_OK:
            return "complete"
        if code == EXIT_INTERRUPTED:
            return "interrupted"
        if code == EXIT_USAGE or code in DOCKER_CANNOT_RUN:  # every later item would fail the same way
            with open(console, "rb") as handle:
                tail = " | ".join(handle.read()[-2000:].decode(errors="replace").strip().splitlines()[-3:])
            self.abort = f"{item['stem']} could not run (exit {code}): {tail}"
        return "failed"

    def upload(self, item: dict, folder: str) -> None:
        """The item's files: its CSV and metadata JSON (under any of the runner's names) and its console."""
        for name in item["files"]:
            self.put_file(os.path.join(self.run_dir, name), folder)
        self.put_file(os.path.join(self.run_dir, "orchestrate", f"{item['stem']}.console.log"), folder)

    def put_console(self) -> None:
        """This machine's own log (the agent's output): up while it runs too, so a preempted machine leaves it."""
        name = f"orchestrate/machine-attempt-{self.attempt.get('attempt', 0)}.log"
        self.put_file(os.path.join(self.work, "console.log"), "files/", name)

    def put_file(self, path: str, folder: str, name: str | None = None) -> None:
        """One file of the run's folder, under its path there (or `name`)."""
        # an empty file says nothing (and gcp-storage-emulator refuses empty media uploads)
        if os.path.isfile(path) and os.path.getsize(path) > 0:
            relative = name or os.path.relpath(path, self.run_dir)
            with open(path, "rb") as handle:
                self.cloud.put(self.prefix + folder + relative, handle.read())

    # -- the end ---------------------------------------------------------------------------------------------

    def finish(self, failure: str | None) -> None:
        latest = {(i["workload"], i["backend"], i["repeat"]): i["status"] for i in self.status["items"]}
        planned = len(self.run["items"])
        keys = [(i["workload"], i["backend"], i["repeat"]) for i in self.run["items"]]
        not_complete = [f"{k[0]} [{k[1]}] ({latest.get(k, 'not run')})" for k in keys if latest.get(k) != "complete"]
        if failure or self.abort:
            self.status["state"], self.status["message"] = "failed", failure or self.abort
        elif not_complete:
            self.status["state"] = "failed"
            failed = ", ".join(not_complete)
            self.status["message"] = f"{len(not_complete)} of {planned} container runs failed: {failed}"
        else:
            self.status["state"], self.status["message"] = "complete", f"all {planned} container runs complete"
        for item in self.status.get("items", []):
            if item["status"] == "running":
                item["status"], item["ended_at"] = "interrupted", time.time()

    def close(self, stopped: bool) -> None:
        """Console and logs up, the summary (unless a SIGTERM cut the run short: a relaunch goes on), delete self."""
        now = time.time()
        if self.attempt:
            self.attempt["ended_at"] = now
            self.attempt["outcome"] = "stopped" if stopped else self.status.get("state", "failed")
        if not stopped:
            self.status["ended_at"] = now
        for name in ("image.log", "host.log"):
            self.put_file(os.path.join(self.run_dir, "orchestrate", name), "files/")
        self.put_console()
        if self.status.get("attempts") is not None:
            self.save()
            if not stopped:
                self.cloud.put(self.prefix + "summary.json", json.dumps(self.status, indent=1).encode())


def load_module(path: str):
    """A module the boot script wrote beside this file: the container command, or the cloud's side of the agent
    (`MachineIdentity.agent_source`): a `Cloud(spec, request)` class with `instance_id`, `zone`, `put(key, data)`,
    `open(key)` (a stream, or None when the object does not exist) and `delete_self()`."""
    module_spec = importlib.util.spec_from_file_location("kcb_" + os.path.basename(path)[:-3], path)
    if module_spec is None or module_spec.loader is None:
        raise RunFailed(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def on_sigterm(signum, frame) -> None:
    raise Stop("SIGTERM")


def main(argv: list) -> int:
    spec_path = argv[1]
    with open(spec_path) as handle:
        spec = json.load(handle)
    signal.signal(signal.SIGTERM, on_sigterm)
    cloud = load_module(os.path.join(os.path.dirname(os.path.abspath(spec_path)), CLOUD_MODULE)).Cloud(spec, request)
    run = Run(spec, cloud, os.path.dirname(os.path.abspath(spec_path)))
    stopped, failure = False, None
    try:
        run.begin()
        run.prepare()
        run.image()
        run.fetch_payload()
        run.run_items()
    except Stop:
        stopped = True
        log("SIGTERM: the machine is going away; uploading what there is")
    except RunFailed as error:
        failure = str(error)
    except Exception as error:  # broad on purpose: whatever broke, the logs go up and the machine goes away
        failure = f"agent error: {type(error).__name__}: {error}"
    try:
        if run.status:
            if not stopped:
                run.finish(failure)
            log(f"run {run.run_id}: {run.status.get('state')}: {run.status.get('message') or failure or ''}")
        elif failure:
            log(f"run {run.run_id}: failed before it began: {failure}")
        log(f"deleting {cloud.instance_id} once this log is uploaded")
        try:
            run.close(stopped)
        except Exception as error:  # the bucket is unreachable: still delete the machine
            log(f"could not upload the last logs: {type(error).__name__}: {error}")
    finally:
        cloud.delete_self()
    return 0 if run.status.get("state") == "complete" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
