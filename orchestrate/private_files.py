"""A run's files on a host or a cluster are its user's alone: its folders 0700, its files 0600, whatever the
umask of the login shell, and the user's own files carried there without widening their mode.

A shared login node or file system (a university cluster's scratch) is where this matters: another user lists
and reads whatever the umask leaves readable (0755 folders, 0644 files by default). Every command that creates
something of a run on a host runs under `private(...)` (the run's payload unpacks so too, in
orchestrate.container_command), a run's folder is closed to 0700, and what a container wrote with its own umask
(Docker's is 022) is closed by `owner_only`. A container reads the user's files as the user (`--user`,
Apptainer, a venv) or as root, both of which read a 0600 file.
"""

from __future__ import annotations

UMASK = "umask 077"


def private(command: str) -> str:
    """`command` with every file and folder it creates readable by its owner alone."""
    return f"{UMASK} && {command}"


def owner_only(quoted: str) -> str:
    """Take every permission of group and others from everything under the folder (a quoted path)."""
    return f"chmod -R go= {quoted}"


def carried_mode(mode: int) -> int:
    """The mode a user's file travels with: its own permission bits (never widened, only made readable by its
    owner, who reads it in the container)."""
    return (mode & 0o777) | 0o400
