"""Running commands and copying files on the benchmark host: over SSH with Fabric, or on this machine.

Short commands go through Fabric's `Connection.run`. Long ones (a container run, an image transfer) go through
`stream`, which reads the command's output in a loop that Python signals can interrupt at once: Ctrl-C must
reach the orchestrator's teardown, not wait for a training run to finish. SSH settings come from the user's
~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump) unless a config file is given.
"""

from __future__ import annotations

import abc
import os
import select
import shlex
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import fabric
import invoke
import paramiko

from orchestrate.provider import SSHTarget

KEEPALIVE_S = 15  # SSH keepalive: a dead connection (a preempted machine) is noticed within a few of these
CHUNK = 1 << 16


LET_GO_S = 5.0  # how long a local command may take to exit after SIGTERM before it is killed
# The resolver's answers that no retry changes: no such name (unlike EAI_AGAIN, a resolver that did not answer).
NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None), socket.EAI_FAIL) if code is not None
)


class RemoteError(RuntimeError):
    """A command on the host failed; the message names the command and ends with its output."""


class ConnectionLost(RemoteError):
    """The SSH connection died while a command ran (network loss, or the machine went away)."""


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str


class Host(abc.ABC):
    """Where the containers run. `description` names it in messages (user@host:port or 'this machine')."""

    description: str

    @abc.abstractmethod
    def run(self, command: str, *, check: bool = True, timeout: float | None = 120) -> Result:
        """Run a short shell command and capture its output; RemoteError when `check` and it fails."""

    @abc.abstractmethod
    def stream(
        self,
        command: str,
        output: BinaryIO,
        *,
        stdin: Iterable[bytes] | None = None,
        poll: Callable[[], None] | None = None,
        poll_interval_s: float = 30.0,
    ) -> int:
        """Run a long command, copying its output (stderr merged) to `output`; return its exit code.

        `stdin` chunks are fed to the command. `poll` is called every `poll_interval_s` while it runs (the
        lifecycle checks for preemption there; whatever it raises propagates).
        """

    @abc.abstractmethod
    def fetch_tree(self, remote_dir: str, local_dir: Path) -> list[Path]:
        """Copy every file under `remote_dir` that is new or changed into `local_dir`; return the copies."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release the connection. Idempotent."""

    def quote(self, path: str) -> str:
        return shlex.quote(path)


class _PollClock:
    """Calls `poll` every `interval_s` by the clock, however much output arrives between two calls: a command
    that prints all the time must still get its log pulls and preemption checks."""

    def __init__(self, poll: Callable[[], None] | None, interval_s: float) -> None:
        self._poll = poll
        self._interval_s = interval_s
        self._due = time.monotonic() + interval_s

    def tick(self) -> None:
        if self._poll is not None and time.monotonic() >= self._due:
            self._poll()
            self._due = time.monotonic() + self._interval_s


def _error(command: str, result: Result) -> RemoteError:
    tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
    summary = command if len(command) <= 120 else command[:117] + "..."
    return RemoteError(f"`{summary}` exited {result.exit_code}: {' | '.join(tail) or 'no output'}")


# ---- over SSH ----------------------------------------------------------------------------------------------


class SSHHost(Host):
    def __init__(
        self,
        target: SSHTarget,
        *,
        ssh_config: Path | None = None,
        connect_timeout_s: float = 15,
        verify_known_hosts: bool = True,
    ) -> None:
        # A given file replaces ~/.ssh/config and /etc/ssh/ssh_config (Fabric's runtime_ssh_path).
        config = fabric.Config(runtime_ssh_path=str(ssh_config)) if ssh_config else fabric.Config()
        connect_kwargs: dict[str, object] = {
            "banner_timeout": connect_timeout_s,
            "auth_timeout": connect_timeout_s,
        }
        if target.key_filename:
            connect_kwargs["key_filename"] = target.key_filename
        self.connection = fabric.Connection(
            target.host,
            user=target.user,
            port=target.port,
            config=config,
            connect_timeout=connect_timeout_s,
            connect_kwargs=connect_kwargs,
        )
        if verify_known_hosts:
            # The user's known_hosts is honoured (a changed key fails); unknown hosts are accepted.
            self.connection.client.load_system_host_keys()
        self.description = _describe(self.connection)

    def unresolvable(self) -> str | None:
        """Why the host's name (an ~/.ssh/config alias's HostName, as Fabric reads it) names no host, or None: it
        resolves, a ProxyJump or ProxyCommand host resolves it, or the resolver may answer later."""
        if self.connection.gateway:
            return None
        try:
            socket.getaddrinfo(self.connection.host, self.connection.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno in NO_SUCH_NAME:
                return f"the host name {self.connection.host} of {self.description} does not resolve ({exc.strerror})"
        return None

    def connect(self) -> None:
        """Open the connection; raises paramiko/socket errors (`wait_for_ssh` retries on them)."""
        self.connection.open()
        self.connection.transport.set_keepalive(KEEPALIVE_S)

    def _transport(self) -> paramiko.Transport:
        transport = self.connection.transport
        if transport is None or not transport.is_active():
            raise ConnectionLost(f"the SSH connection to {self.description} is closed")
        return transport

    def run(self, command: str, *, check: bool = True, timeout: float | None = 120) -> Result:
        self._transport()
        try:
            raw = self.connection.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except invoke.CommandTimedOut as exc:
            raise RemoteError(f"`{command[:120]}` timed out after {timeout} s on {self.description}") from exc
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise ConnectionLost(f"lost the SSH connection to {self.description}: {exc}") from exc
        result = Result(raw.exited, raw.stdout, raw.stderr)
        if check and result.exit_code != 0:
            raise _error(command, result)
        return result

    def stream(
        self,
        command: str,
        output: BinaryIO,
        *,
        stdin: Iterable[bytes] | None = None,
        poll: Callable[[], None] | None = None,
        poll_interval_s: float = 30.0,
    ) -> int:
        try:
            channel = self._transport().open_session()
            channel.set_combine_stderr(True)
            channel.exec_command(command)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise ConnectionLost(f"lost the SSH connection to {self.description}: {exc}") from exc
        feeder = _start_feeder(channel, stdin) if stdin is not None else None
        try:
            return self._pump(channel, output, poll, poll_interval_s)
        finally:
            channel.close()
            if feeder is not None:
                feeder.join(timeout=5)

    def _pump(
        self,
        channel: paramiko.Channel,
        output: BinaryIO,
        poll: Callable[[], None] | None,
        poll_interval_s: float,
    ) -> int:
        clock = _PollClock(poll, poll_interval_s)
        while True:
            readable, _, _ = select.select([channel], [], [], 0.5)
            data = channel.recv(CHUNK) if readable else b""
            if data:
                output.write(data)
                output.flush()
            elif channel.exit_status_ready() and not channel.recv_ready():
                break
            if not self.connection.transport.is_active():
                raise ConnectionLost(f"lost the SSH connection to {self.description} while a command ran")
            clock.tick()
        code = channel.recv_exit_status()
        if code == -1:  # the server closed the channel without an exit status: the session died
            raise ConnectionLost(f"the command's SSH session on {self.description} ended without an exit status")
        return code

    def fetch_tree(self, remote_dir: str, local_dir: Path) -> list[Path]:
        try:
            sftp = self.connection.sftp()
            return _fetch_sftp(sftp, remote_dir.rstrip("/"), local_dir)
        except FileNotFoundError:
            return []
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise ConnectionLost(f"could not copy {remote_dir} from {self.description}: {exc}") from exc

    def close(self) -> None:
        self.connection.close()


def _describe(connection: fabric.Connection) -> str:
    port = f":{connection.port}" if connection.port and connection.port != 22 else ""
    return f"{connection.user}@{connection.host}{port}"


def _start_feeder(channel: paramiko.Channel, chunks: Iterable[bytes]) -> threading.Thread:
    def feed() -> None:
        try:
            for chunk in chunks:
                channel.sendall(chunk)
            channel.shutdown_write()
        except (OSError, paramiko.SSHException):
            return  # the command ended or the connection died; the reader reports it

    thread = threading.Thread(target=feed, name="ssh-stdin", daemon=True)
    thread.start()
    return thread


def _fetch_sftp(sftp: paramiko.SFTPClient, remote_dir: str, local_dir: Path) -> list[Path]:
    copied: list[Path] = []
    for entry in sftp.listdir_attr(remote_dir):
        remote_path = f"{remote_dir}/{entry.filename}"
        local_path = local_dir / entry.filename
        if stat.S_ISDIR(entry.st_mode or 0):
            copied += _fetch_sftp(sftp, remote_path, local_path)
        elif stat.S_ISREG(entry.st_mode or 0) and _changed(local_path, entry.st_size, entry.st_mtime):
            local_path.parent.mkdir(parents=True, exist_ok=True)
            partial = local_path.with_name(local_path.name + ".part")
            sftp.get(remote_path, str(partial))
            os.utime(partial, (entry.st_atime or 0, entry.st_mtime or 0))
            partial.replace(local_path)  # a reader never sees half a file
            copied.append(local_path)
    return copied


def _changed(local_path: Path, size: int | None, mtime: float | None) -> bool:
    try:
        st = local_path.stat()
    except FileNotFoundError:
        return True
    return st.st_size != size or int(st.st_mtime) != int(mtime or 0)


def wait_for_ssh(
    host: SSHHost,
    timeout_s: float,
    on_retry: Callable[[str], None] | None = None,
    retry_auth: bool = False,
) -> float:
    """Connect, retrying until `timeout_s`; return the seconds it took. RemoteError names the last failure.

    A refused login ends the wait at once, except with `retry_auth`: a machine just launched may run sshd before
    its first-boot agent (cloud-init, the guest agent) has installed the key.
    """
    started = time.monotonic()
    last_error = "no attempt made"
    while True:
        try:
            host.connect()
            host.run("true", timeout=30)
            return time.monotonic() - started
        except (OSError, paramiko.SSHException, EOFError, RemoteError) as exc:
            last_error = str(exc) or type(exc).__name__
            if isinstance(exc, socket.gaierror) and exc.errno in NO_SUCH_NAME:  # a typo: waiting will not fix it
                raise RemoteError(f"cannot reach {host.description}: {host.unresolvable() or last_error}") from exc
            refused = isinstance(exc, paramiko.AuthenticationException | paramiko.BadHostKeyException)
            if refused and not (retry_auth and isinstance(exc, paramiko.AuthenticationException)):
                raise RemoteError(f"cannot log in to {host.description}: {last_error}") from exc
        elapsed = time.monotonic() - started
        if elapsed >= timeout_s:
            raise RemoteError(
                f"cannot reach {host.description} over SSH within {timeout_s:g} s (last error: {last_error})"
            )
        if on_retry is not None:
            on_retry(last_error)
        host.close()
        time.sleep(min(5.0, max(0.5, timeout_s - elapsed)))


# ---- this machine ------------------------------------------------------------------------------------------


class LocalHost(Host):
    description = "this machine"

    def run(self, command: str, *, check: bool = True, timeout: float | None = 120) -> Result:
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(f"`{command[:120]}` timed out after {timeout} s on this machine") from exc
        result = Result(done.returncode, done.stdout, done.stderr)
        if check and result.exit_code != 0:
            raise _error(command, result)
        return result

    def stream(
        self,
        command: str,
        output: BinaryIO,
        *,
        stdin: Iterable[bytes] | None = None,
        poll: Callable[[], None] | None = None,
        poll_interval_s: float = 30.0,
    ) -> int:
        # A session of its own: the terminal's Ctrl-C reaches the orchestrator, which stops the container.
        process = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        feeder = _start_pipe_feeder(process, stdin) if stdin is not None else None
        try:
            clock = _PollClock(poll, poll_interval_s)
            assert process.stdout is not None
            while True:
                readable, _, _ = select.select([process.stdout], [], [], 0.5)
                if readable:
                    data = os.read(process.stdout.fileno(), CHUNK)
                    if not data:
                        break  # EOF: the command closed its output
                    output.write(data)
                    output.flush()
                clock.tick()
            return process.wait()
        finally:
            _end(process)
            if feeder is not None:
                feeder.join(timeout=5)

    def fetch_tree(self, remote_dir: str, local_dir: Path) -> list[Path]:
        source = Path(remote_dir).expanduser()
        copied: list[Path] = []
        if not source.is_dir():
            return copied
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            target = local_dir / path.relative_to(source)
            st = path.stat()
            if _changed(target, st.st_size, st.st_mtime):
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(target.name + ".part")
                shutil.copy2(path, partial)
                partial.replace(target)
                copied.append(target)
        return copied


def _end(process: subprocess.Popen[bytes]) -> None:
    """Let a command go (an interrupt or a poll ended the wait). `docker run` may outlast SIGTERM while its
    container ignores the signal: then it is killed, since stopping the container is the teardown's job, and
    waiting here must never replace the interrupt being handled with a timeout."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=LET_GO_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _start_pipe_feeder(process: subprocess.Popen[bytes], chunks: Iterable[bytes]) -> threading.Thread:
    def feed() -> None:
        assert process.stdin is not None
        try:
            for chunk in chunks:
                process.stdin.write(chunk)
            process.stdin.close()
        except (BrokenPipeError, OSError):
            return

    thread = threading.Thread(target=feed, name="local-stdin", daemon=True)
    thread.start()
    return thread
