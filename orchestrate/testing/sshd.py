"""A real OpenSSH server on a loopback port, with keys generated for the test.

    from orchestrate.testing.sshd import SSHServer, start_sshd, sshd   # sshd: a pytest fixture (see plugin.py)

`start_sshd(workdir)` starts Debian's /usr/sbin/sshd (package openssh-server) in the foreground on a free port
of 127.0.0.1 with its own host key, config and authorized_keys (nothing of the system's sshd is used or
changed), logs in the user running the tests (root in CI), and returns an `SSHServer`:

- `host`, `port`, `user`, `key_path` (a private key it accepts), `target()` -> orchestrate's SSHTarget,
  `user_at_host`;
- `config_path`: an ssh_config file where `Host kcb-sshd` (the `alias`) resolves to that server, and
  `Host kcb-sshd-jump` (the `jump_alias`) reaches it through a ProxyJump via itself (for jump-host tests);
- `workdir`: the server's own folder (sshd_config, sshd.log, its keys); `process`: sshd, None once stopped;
- `stop()`, `restart()` (same port and keys), `kill()` (SIGKILL: connections die at once).

SFTP works (Fabric's `get` needs it). The logged-in user can run `docker` when the user running the tests
can (root, or a member of the docker group). Missing openssh-server makes the fixture FAIL with the install
command, never skip: `apt-get install -y openssh-server`.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from orchestrate.provider import SSHTarget

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
ALIAS = "kcb-sshd"
JUMP_ALIAS = "kcb-sshd-jump"
INSTALL_HINT = "install Debian's openssh-server: apt-get install -y openssh-server"


@dataclass
class SSHServer:
    host: str
    port: int
    user: str
    key_path: Path
    config_path: Path
    workdir: Path
    alias: str = ALIAS
    jump_alias: str = JUMP_ALIAS
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def target(self) -> SSHTarget:
        return SSHTarget(host=self.host, user=self.user, port=self.port, key_filename=str(self.key_path))

    @property
    def user_at_host(self) -> str:
        return f"{self.user}@{self.host}"

    def restart(self) -> None:
        self.stop()
        self.process = _spawn(self.workdir / "sshd_config", self.workdir / "sshd.log")
        _wait_for_banner(self.host, self.port, self.process, self.workdir / "sshd.log")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        """SIGKILL sshd and every process under it (each connection has a session of its own): open
        connections drop at once, as with a machine that vanished."""
        if self.process is None:
            return
        victims: list[subprocess.Popen[bytes] | psutil.Process] = [
            self.process,
            *psutil.Process(self.process.pid).children(recursive=True),
        ]
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.kill()
        self.process.wait(timeout=10)
        self.process = None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]  # an AF_INET address: (host, port)
        return port


def start_sshd(workdir: Path, user: str | None = None) -> SSHServer:
    """Start sshd for `user` (default: the user running the tests) on a free loopback port."""
    for path, what in (
        (SSHD, "sshd"),
        (SFTP_SERVER, "sftp-server"),
        (shutil.which("ssh-keygen"), "ssh-keygen"),
    ):
        if not path or not Path(path).exists():
            pytest.fail(f"{what} not found; {INSTALL_HINT}")
    user = user or getpass.getuser()
    workdir.mkdir(parents=True, exist_ok=True)
    host_key = workdir / "ssh_host_ed25519_key"
    client_key = workdir / "id_ed25519"
    for key in (host_key, client_key):
        if not key.exists():  # a workdir used before keeps its keys
            command = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)]
            subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
    (workdir / "authorized_keys").write_text((workdir / "id_ed25519.pub").read_text())
    port = free_port()
    (workdir / "sshd_config").write_text(_sshd_config(workdir, port, host_key, user))
    if os.geteuid() == 0:  # privilege separation needs it even for a test server (Debian makes it at boot)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    config_path = workdir / "ssh_config"
    config_path.write_text(_client_config(port, user, client_key))
    server = SSHServer("127.0.0.1", port, user, client_key, config_path, workdir)
    server.restart()
    return server


def _sshd_config(workdir: Path, port: int, host_key: Path, user: str) -> str:
    return f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {workdir}/sshd.pid
AuthorizedKeysFile {workdir}/authorized_keys
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding yes
PrintMotd no
LogLevel ERROR
Subsystem sftp {SFTP_SERVER}
"""


def _client_config(port: int, user: str, key: Path) -> str:
    return f"""\
Host {ALIAS}
    HostName 127.0.0.1
    Port {port}
    User {user}
    IdentityFile {key}
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null

Host {JUMP_ALIAS}
    HostName 127.0.0.1
    Port {port}
    User {user}
    IdentityFile {key}
    ProxyJump {ALIAS}
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
"""


def _spawn(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for_banner(host: str, port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sshd exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection((host, port), timeout=1) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"sshd did not answer on {host}:{port} within 15 s: {log.read_text()[-2000:]}")


@pytest.fixture
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    """A running test sshd, stopped after the test."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()
