"""Getting the image onto the host over SSH: streamed (`docker save | ssh docker load`), built on the host from a
build context that honours .dockerignore, and the `auto` choice between them."""

from __future__ import annotations

import io
import subprocess
import uuid
from pathlib import Path

import pytest

from orchestrate.images import BuildSpec, ImageError, _choose, ensure_image, is_registry_ref
from orchestrate.remote import LocalHost, SSHHost, wait_for_ssh
from orchestrate.testing.sshd import SSHServer
from tests.support.docker import BASE_IMAGE, build_mechanics_image, image_id

pytestmark = [pytest.mark.docker, pytest.mark.sshd]


@pytest.fixture
def host(sshd: SSHServer):
    host = SSHHost(sshd.target(), verify_known_hosts=False)
    wait_for_ssh(host, 15)
    yield host
    host.close()


def test_stream_sends_the_image_over_ssh(host: SSHHost, tmp_path: Path) -> None:
    """The test host shares this machine's engine, so `docker load` finds the layers it already has; the bytes
    still go through `docker save`, the SSH channel and `docker load`, which answers with what it loaded. That
    answer is checked by image id: on a shared engine another tag may name the same image, and `docker load`
    may answer with that tag or with the bare id."""
    image = build_mechanics_image(tmp_path / "mechanics")
    log = io.BytesIO()
    info = ensure_image(host, "docker", image, "stream", build=None, log=log, note=lambda _: None)
    assert info.how == "streamed" and info.image_id == image_id(image)
    loaded = [line.split(":", 1)[1].strip() for line in log.getvalue().decode().splitlines() if "Loaded image" in line]
    assert loaded and all(image_id(name) == image_id(image) for name in loaded), loaded


def test_build_on_host_sends_the_context_without_ignored_files(host: SSHHost, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile.test").write_text(f"FROM {BASE_IMAGE}\nCOPY . /ctx\nRUN ls -A /ctx > /ctx-list\n")
    (context / "kept.txt").write_text("kept")
    (context / "secret.env").write_text("never leaves this machine")
    (context / ".dockerignore").write_text("# comment\nsecret.env\n")
    tag = f"kcb-test/built-on-host:{uuid.uuid4().hex[:8]}"
    log = io.BytesIO()
    try:
        spec = BuildSpec(context, "Dockerfile.test", {"IMAGE_NAME": tag})
        info = ensure_image(host, "docker", tag, "build", build=spec, log=log, note=lambda _: None)
        assert info.how == "built on host"
        listing = subprocess.run(["docker", "run", "--rm", tag, "cat", "/ctx-list"], capture_output=True, text=True)
        assert listing.stdout.split() == [".dockerignore", "Dockerfile.test", "kept.txt"]
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_a_failed_build_names_the_log_and_leaves_no_container(host: SSHHost, tmp_path: Path) -> None:
    marker = uuid.uuid4().hex  # in the failing step's command, so its container can be told from any other
    (tmp_path / "Dockerfile.bad").write_text(f"FROM {BASE_IMAGE}\nRUN exit 42 # {marker}\n")
    spec = BuildSpec(tmp_path, "Dockerfile.bad", {})
    with pytest.raises(ImageError, match=r"building kcb-test/never:x on .* exited 42; see the run's image.log"):
        ensure_image(host, "docker", "kcb-test/never:x", "build", build=spec, log=io.BytesIO(), note=lambda _: None)
    listed = subprocess.run(
        ["docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Command}}"], capture_output=True, text=True
    )
    left = [line for line in listed.stdout.splitlines() if marker in line]
    for line in left:
        subprocess.run(["docker", "rm", "-f", line.split()[0]], capture_output=True)
    assert left == []


def test_auto_picks_the_cheapest_way() -> None:
    remote = {"Id": "sha256:aaa"}
    spec = BuildSpec(Path("."), "Dockerfile.cpu", {})
    ssh = object.__new__(SSHHost)
    ssh.description = "bench@box"
    assert _choose("auto", "kcb:cpu", remote, "sha256:aaa", spec, ssh) == "already on host"  # warm
    assert _choose("auto", "kcb:cpu", remote, None, spec, ssh) == "already on host"  # nothing here to compare
    assert _choose("auto", "kcb:cpu", remote, "sha256:bbb", spec, ssh) == "streamed"  # rebuilt here: update it
    assert _choose("auto", "kcb:cpu", None, "sha256:aaa", spec, ssh) == "streamed"
    assert _choose("auto", "ghcr.io/org/kcb:cpu", None, None, spec, ssh) == "pulled"
    assert _choose("auto", "kcb:cpu", None, None, spec, ssh) == "built on host"
    with pytest.raises(ImageError, match="neither on bench@box nor on this machine"):
        _choose("auto", "kcb:cpu", None, None, None, ssh)
    with pytest.raises(ImageError, match="this run is local"):
        _choose("stream", "kcb:cpu", None, "sha256:aaa", spec, LocalHost())
    assert is_registry_ref("localhost/x:1") and is_registry_ref("registry:5000/x") and not is_registry_ref("org/x")
