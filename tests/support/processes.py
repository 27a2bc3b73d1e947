"""Whether a process still runs, as the kernel reports it."""

from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
