"""A rented machine that ends itself first saves the run's logs where the sweep finds them.

An attached run's machine ends itself at its max lifetime (the provider's backstop, for when its orchestrator is
gone); nothing pulls its logs then, and its disk goes with it. So when the host is prepared, a small routine is
started on it in the background: it sleeps until shortly before the machine's expiry, stops the run's containers
(the runner records the epochs it finished and a partial run), packs the run's logs folder and PUTs it to one
object, `<prefix>runs/<run-id>/saved-logs.tar.gz` of the project's own bucket, through an upload URL made here
for that object alone (an S3 presigned PUT, a Cloud Storage resumable upload session): the machine holds no
credentials. The orchestrator's teardown stops the routine; the sweep unpacks the object into the run's logs
when the machine is gone (`fetch_saved`). A provider whose object store makes no upload URL is left as before.
"""

from __future__ import annotations

import io
import shlex
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from orchestrate.capabilities import open_store, region_of, storage_of
from orchestrate.hostprep import HostInfo
from orchestrate.remote import Host, RemoteError
from orchestrate.storage import StorageURL, own_bucket_name
from records.catalog import Profile
from records.ledger import RunRecord

SAVED_NAME = "saved-logs.tar.gz"
HOST_KEY = "saved_to"  # RunRecord.host: the bucket the machine saves to
STOP_GRACE_S = 10  # the runner's SIGTERM handler records a partial run at once
MAX_LEAD_S = 300  # how long before the expiry the routine saves, at most (a quarter of a short lifetime)


def save_lead_s(lifetime_s: int) -> int:
    """Seconds before the machine's expiry that its routine saves: time to stop, pack and upload."""
    return max(1, min(MAX_LEAD_S, lifetime_s // 4))


def folder(run_dir: str) -> str:
    """The routine's own files, in the run's folder on the host: beside its logs, never among them."""
    return f"{run_dir}/keepsafe"


def saved_key(bucket: StorageURL, run_id: str) -> str:
    return bucket.run_prefix(run_id) + SAVED_NAME


def upload_url(profile: Profile, run_id: str, expires_s: int) -> tuple[StorageURL, str] | None:
    """The project's own bucket (created if missing, as for detached runs) and a URL that uploads the run's saved
    logs there; None where the store makes no upload URL. StorageError when the bucket cannot be used."""
    storage = storage_of(profile.provider)
    bucket = StorageURL(storage.storage_scheme, own_bucket_name(storage.storage_account(region_of(profile))))
    store: Any = open_store(profile.provider, bucket)
    if not hasattr(store, "upload_url"):
        return None
    store.ensure_bucket(True, region_of(profile))
    return bucket, store.upload_url(saved_key(bucket, run_id), expires_s)


def start(host: Host, info: HostInfo, run_id: str, url: str, save_at: float) -> None:
    """The routine onto the host, started in its own session so that it outlives the connection. The URL goes
    through stdin into a file only its owner reads: it never appears on a command line."""
    where = folder(info.run_dir(run_id))
    files = {"url": url.encode(), "save.sh": _script(info, run_id, int(save_at)).encode()}
    for name, data in files.items():
        target = host.quote(f"{where}/{name}")
        code = host.stream(f"umask 077 && mkdir -p {host.quote(where)} && cat > {target}", io.BytesIO(), stdin=[data])
        if code != 0:
            raise RemoteError(f"could not write {where}/{name} on {host.description} (exit {code})")
    script = host.quote(f"{where}/save.sh")
    # `&` applies to this one command, whose own descriptors are redirected: the connection does not wait for it
    host.run(f"setsid nohup sh {script} > /dev/null 2>&1 < /dev/null & echo $! > {host.quote(where)}/pid")


def stop(host: Host, run_dir: str) -> None:
    """The routine ends with the run it guarded (a machine deleted by its teardown takes it along anyway)."""
    pid = host.quote(f"{folder(run_dir)}/pid")
    host.run(f'[ -f {pid} ] && kill -TERM -- "-$(cat {pid})" 2>/dev/null; rm -f {pid}; true')  # its group: sleep too


def _script(info: HostInfo, run_id: str, save_at: int) -> str:
    where, logs = folder(info.run_dir(run_id)), info.logs_dir(run_id)
    archive, url = shlex.quote(f"{where}/{SAVED_NAME}"), shlex.quote(f"{where}/url")
    label = shlex.quote(f"label=run-id={run_id}")
    return f"""#!/bin/sh
# keras-cloud-bench (orchestrate.keepsafe): before this machine ends itself, save run {run_id}'s logs
cd / || exit 1
now=$(date +%s)
[ {save_at} -gt "$now" ] && sleep $(({save_at} - now))
ids=$({info.docker} ps -q --filter {label})
[ -n "$ids" ] && {info.docker} stop -t {STOP_GRACE_S} $ids > /dev/null 2>&1
tar -czf {archive} -C {shlex.quote(logs)} . || exit 1
if command -v curl > /dev/null 2>&1; then
  curl -fsS -X PUT -T {archive} "$(cat {url})"
else
  python3 -c 'import sys, urllib.request as u; u.urlopen(u.Request(open(sys.argv[2]).read().strip(), \\
open(sys.argv[1], "rb").read(), method="PUT"), timeout=300)' {archive} {url}
fi
"""


def fetch_saved(run: RunRecord) -> str | None:
    """The logs the run's machine saved before it ended itself, unpacked into the run's log folder (each file
    under it, none outside); what was done, or None when the machine saved nothing."""
    if not run.host.get(HOST_KEY) or not run.logs_dir:
        return None
    bucket = StorageURL.parse(run.host[HOST_KEY])
    store = open_store(run.provider, bucket)
    key = saved_key(bucket, run.run_id)
    if key not in store.list(key):
        return None
    target = Path(run.logs_dir).parents[1]  # the archive holds <platform>/<run-id>/..., as the host's logs/ does
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / SAVED_NAME
        store.download(key, archive)
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if _inside(m, run)]
            tar.extractall(target, members=members, filter="data")
    return f"unpacked {len(members)} saved file(s) from {bucket}{key.removeprefix(bucket.prefix)}"


def _inside(member: tarfile.TarInfo, run: RunRecord) -> bool:
    """A regular file of this run's own folder (`<platform>/<run-id>/...`): nothing else is written."""
    parts = PurePosixPath(member.name).parts
    parts = parts[1:] if parts[:1] == (".",) else parts
    return member.isfile() and len(parts) > 2 and parts[:2] == (run.platform, run.run_id) and ".." not in parts
