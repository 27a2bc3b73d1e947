"""Remote execution through Fabric against a real sshd: commands, streams, interrupts, file pulls, SSH config."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest

from orchestrate.provider import SSHTarget
from orchestrate.remote import ConnectionLost, LocalHost, RemoteError, SSHHost, wait_for_ssh
from orchestrate.testing.sshd import SSHServer, free_port

pytestmark = pytest.mark.sshd


class Stop(Exception):
    pass


def connected(server: SSHServer) -> SSHHost:
    host = SSHHost(server.target(), verify_known_hosts=False)
    wait_for_ssh(host, 15)
    return host


def test_run_captures_output_and_failures_name_the_command(sshd: SSHServer) -> None:
    host = connected(sshd)
    try:
        assert host.run("echo hello; echo oops >&2").stdout == "hello\n"
        with pytest.raises(RemoteError, match=r"`ls /no/such/dir` exited 2: .*No such file"):
            host.run("ls /no/such/dir")
        assert host.run("exit 7", check=False).exit_code == 7
    finally:
        host.close()


def test_stream_feeds_stdin_and_merges_output(sshd: SSHServer) -> None:
    host = connected(sshd)
    try:
        out = io.BytesIO()
        payload = [os.urandom(1 << 16) for _ in range(64)]  # 4 MiB
        assert host.stream("sha256sum; echo done >&2", out, stdin=payload) == 0
        import hashlib

        assert out.getvalue().decode().split()[0] == hashlib.sha256(b"".join(payload)).hexdigest()
        assert out.getvalue().endswith(b"done\n")
    finally:
        host.close()


def test_a_poll_exception_stops_a_long_command_at_once(sshd: SSHServer) -> None:
    host = connected(sshd)
    started = time.monotonic()

    def poll() -> None:
        raise Stop

    try:
        with pytest.raises(Stop):
            host.stream("sleep 60", io.BytesIO(), poll=poll, poll_interval_s=0.5)
        assert time.monotonic() - started < 5
        assert host.run("echo still usable").exit_code == 0  # the connection survives for teardown
    finally:
        host.close()


def test_a_dead_server_mid_command_is_connection_lost(sshd: SSHServer) -> None:
    host = connected(sshd)
    threading.Timer(1.0, sshd.kill).start()
    try:
        with pytest.raises(ConnectionLost):
            host.stream("sleep 30", io.BytesIO())
    finally:
        host.close()


def test_fetch_tree_copies_new_and_changed_files_only(sshd: SSHServer, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    (remote / "p" / "r1").mkdir(parents=True)
    (remote / "p" / "r1" / "a.csv").write_text("epoch,elapsed\n0,1.0\n")
    local = tmp_path / "local"
    host = connected(sshd)
    try:
        assert [p.relative_to(local) for p in host.fetch_tree(str(remote), local)] == [Path("p/r1/a.csv")]
        assert host.fetch_tree(str(remote), local) == []  # unchanged: nothing copied
        (remote / "p" / "r1" / "a.csv").write_text("epoch,elapsed\n0,1.0\n1,0.9\n")
        (remote / "p" / "r1" / "a.json").write_text("{}")
        copied = sorted(p.name for p in host.fetch_tree(str(remote), local))
        assert copied == ["a.csv", "a.json"]
        assert (local / "p" / "r1" / "a.csv").read_text().endswith("1,0.9\n")
        assert host.fetch_tree(str(tmp_path / "absent"), local) == []
    finally:
        host.close()


def test_ssh_config_aliases_and_jump_hosts_are_honoured(sshd: SSHServer) -> None:
    for alias in (sshd.alias, sshd.jump_alias):
        host = SSHHost(SSHTarget(host=alias), ssh_config=sshd.config_path, verify_known_hosts=False)
        try:
            wait_for_ssh(host, 15)
            assert host.description == f"{sshd.user}@127.0.0.1:{sshd.port}"
            assert host.run("echo via-config").stdout == "via-config\n"
        finally:
            host.close()


def test_unreachable_host_fails_after_the_timeout_with_the_last_error() -> None:
    host = SSHHost(SSHTarget(host="127.0.0.1", user="nobody", port=free_port()), connect_timeout_s=1)
    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"cannot reach nobody@127.0.0.1:\d+ over SSH within 2 s \(last error: "):
        wait_for_ssh(host, 2)
    assert time.monotonic() - started < 10


def test_a_name_that_does_not_resolve_fails_at_once() -> None:
    """`make bench-ssh HOST=me@gpu-box` once waited the whole --ssh-timeout, saying the DNS error every 5 s."""
    host = SSHHost(SSHTarget(host="gpu-box.invalid", user="me"))  # .invalid: never a host name (RFC 6761)
    retries: list[str] = []
    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"^cannot reach me@gpu-box.invalid: the host name gpu-box.invalid of "):
        wait_for_ssh(host, 300, on_retry=retries.append)
    assert retries == [] and time.monotonic() - started < 10


def test_an_alias_resolves_by_its_host_name_and_a_jump_host_resolves_for_itself(
    sshd: SSHServer, tmp_path: Path
) -> None:
    for alias in (sshd.alias, sshd.jump_alias):  # HostName 127.0.0.1; the jump alias's target, through the jump
        assert SSHHost(SSHTarget(host=alias), ssh_config=sshd.config_path).unresolvable() is None
    config = tmp_path / "ssh_config"
    config.write_text("Host box\n    HostName gpu-box.invalid\nHost far\n    HostName gpu-box.invalid\n"
                      f"    ProxyJump {sshd.alias}\n" + sshd.config_path.read_text())  # fmt: skip
    problem = SSHHost(SSHTarget(host="box", user="me"), ssh_config=config).unresolvable()
    assert problem is not None and problem.startswith("the host name gpu-box.invalid of me@gpu-box.invalid does not")
    assert SSHHost(SSHTarget(host="far"), ssh_config=config).unresolvable() is None  # the jump host resolves it


def _host_with_unknown_key(sshd: SSHServer, tmp_path: Path) -> tuple[SSHHost, Path]:
    """A host whose only key is a new one that the server does not (yet) authorize."""
    import subprocess

    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    target = SSHTarget(host=sshd.host, user=sshd.user, port=sshd.port, key_filename=str(other))
    host = SSHHost(target, verify_known_hosts=False)
    host.connection.connect_kwargs.update(look_for_keys=False, allow_agent=False)
    return host, other


def test_a_rejected_key_fails_at_once(sshd: SSHServer, tmp_path: Path) -> None:
    host, _ = _host_with_unknown_key(sshd, tmp_path)
    started = time.monotonic()
    with pytest.raises(RemoteError, match="cannot log in to"):
        wait_for_ssh(host, 30)
    assert time.monotonic() - started < 10


def test_a_fresh_machine_gets_time_to_install_the_key(sshd: SSHServer, tmp_path: Path) -> None:
    """A launched machine's sshd can answer before its first-boot agent installs the key: retry the login."""
    import threading

    host, other = _host_with_unknown_key(sshd, tmp_path)
    authorized = sshd.workdir / "authorized_keys"
    original = authorized.read_text()
    install = threading.Timer(2.0, lambda: authorized.write_text(original + other.with_suffix(".pub").read_text()))
    install.start()
    retries: list[str] = []
    try:
        waited = wait_for_ssh(host, 30, on_retry=retries.append, retry_auth=True)
    finally:
        install.cancel()
        authorized.write_text(original)
        host.close()
    assert waited >= 2.0 and retries and "Authentication failed" in retries[0]


def test_local_host_streams_and_copies(tmp_path: Path) -> None:
    host = LocalHost()
    out = io.BytesIO()
    assert host.stream("cat; exit 3", out, stdin=[b"abc", b"def"]) == 3
    assert out.getvalue() == b"abcdef"
    (tmp_path / "src" / "d").mkdir(parents=True)
    (tmp_path / "src" / "d" / "f.txt").write_text("x")
    assert [p.name for p in host.fetch_tree(str(tmp_path / "src"), tmp_path / "dst")] == ["f.txt"]
    assert host.fetch_tree(str(tmp_path / "src"), tmp_path / "dst") == []


# A container that prints a line every 0.1 s for 6 s: output arrives between every two polls.
CHATTY = (
    "docker run --rm --name {name} {image} "
    "sh -c 'i=0; while [ $i -lt 60 ]; do echo line $i; i=$((i+1)); sleep 0.1; done'"
)


def _polls_of_chatty_container(host: LocalHost | SSHHost) -> tuple[int, bytes]:
    from tests.support.docker import BASE_IMAGE, require_engine

    require_engine()
    polls: list[float] = []
    out = io.BytesIO()
    command = CHATTY.format(name=f"kcb-chatty-{os.getpid()}-{type(host).__name__.lower()}", image=BASE_IMAGE)
    assert host.stream(command, out, poll=lambda: polls.append(time.monotonic()), poll_interval_s=1.0) == 0
    return len(polls), out.getvalue()


@pytest.mark.docker
def test_a_chatty_container_is_still_polled_over_ssh(sshd: SSHServer) -> None:
    host = connected(sshd)
    try:
        polls, out = _polls_of_chatty_container(host)
    finally:
        host.close()
    assert out.count(b"line ") == 60
    assert polls >= 4  # about 6 s of output, a poll due every second whatever arrived


@pytest.mark.docker
def test_a_chatty_container_is_still_polled_on_this_machine() -> None:
    polls, out = _polls_of_chatty_container(LocalHost())
    assert out.count(b"line ") == 60
    assert polls >= 4
