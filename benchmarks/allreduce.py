"""`python -m benchmarks check-allreduce`: before a multi-node run is timed, every process joins one process group
and all-reduces a buffer, as MLPerf's Slurm scripts check their NCCL first.

Each process reads its rank, the world and the rank-0 process's address from the environment
(`benchmarks.harness.processes`), joins a `torch.distributed` group (NCCL on GPUs, gloo on CPUs) within
`--timeout-s`, sums a float32 buffer of `--megabytes` a few times and checks the sum. Rank 0 writes what it measured
to `--record` under `--out` (JSON) and prints one line:

    all-reduce check: 2 processes on 2 nodes (n1, n2), gloo over eth0 (10 Gb/s), 64 MiB: 1.92 GB/s bus bandwidth

A process that cannot join or whose sum is wrong prints one line saying so and exits EXIT_UNREACHABLE:

    all-reduce check failed: rank 1 on n2 could not join the process group at 10.0.0.1:29501 within 60 s (...)

Bandwidth is nccl-tests' definition: algorithm bandwidth = bytes / time of one all-reduce (the median of
`--repeats`, after one warm-up), bus bandwidth = that x 2 (n - 1) / n, the rate each link carried.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.processes import Place, ProcessEnvironmentError, from_environment, node_name

EXIT_UNREACHABLE = 4  # the processes could not all meet, or their sum was wrong: the job cannot train
EXIT_USAGE = 2
DEFAULT_MEGABYTES = 64
DEFAULT_REPEATS = 5
DEFAULT_TIMEOUT_S = 60.0
NCCL_NETWORK = "Using network "  # NCCL's INFO line naming its inter-node transport (IB, Socket, a plug-in)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks check-allreduce", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="the logs folder (the runner's --out)")
    parser.add_argument("--record", help="rank 0 writes the measurement to this file under --out (JSON)")
    parser.add_argument("--megabytes", type=float, default=DEFAULT_MEGABYTES, help="buffer size (MiB)")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed all-reduces after one warm-up")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="to join the process group")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.megabytes <= 0 or args.repeats < 1 or args.timeout_s <= 0:
        return _fail("--megabytes, --repeats and --timeout-s must be positive", EXIT_USAGE)
    try:
        place = from_environment()
    except ProcessEnvironmentError as exc:
        return _fail(f"the process environment is malformed: {exc}", EXIT_USAGE)
    if not place.several:
        return _fail(
            "no process group in the environment (RANK and WORLD_SIZE, or SLURM_PROCID and SLURM_NTASKS)", EXIT_USAGE
        )
    record = args.out / args.record if args.record else None
    return check(place, args.megabytes, args.repeats, args.timeout_s, record)


def check(place: Place, megabytes: float, repeats: int, timeout_s: float, out: Path | None) -> int:
    # c10d logs each failed connection with a C++ stack trace: the one-line verdict below says it (unless asked)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    import torch
    import torch.distributed as dist

    host = node_name()
    gpu = torch.cuda.is_available()
    nccl_log = _nccl_debug_file() if gpu else None
    if gpu:
        torch.cuda.set_device(place.local_rank % torch.cuda.device_count())
    try:
        dist.init_process_group(
            "nccl" if gpu else "gloo",
            init_method=f"tcp://{place.master_addr}:{place.master_port}",
            rank=place.rank,
            world_size=place.world,
            timeout=dt.timedelta(seconds=timeout_s),
        )
    except Exception as exc:  # torch raises DistNetworkError, DistStoreError or RuntimeError, by version
        return _fail(
            f"rank {place.rank} on {host} could not join the process group at "
            f"{place.master_addr}:{place.master_port} within {timeout_s:g} s ({_first_line(exc)})"
        )
    try:
        return _measure(place, host, megabytes, repeats, out, nccl_log)
    except Exception as exc:  # a peer that died mid-check: gloo and NCCL raise their own errors
        return _fail(f"rank {place.rank} on {host}: the all-reduce failed ({_first_line(exc)})")
    finally:
        dist.destroy_process_group()


def _measure(place: Place, host: str, megabytes: float, repeats: int, out: Path | None, nccl_log: Path | None) -> int:
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    elements = max(1, int(megabytes * 2**20) // 4)
    buffer = torch.ones(elements, dtype=torch.float32, device=device)
    hosts: list[Any] = [None] * place.world
    dist.all_gather_object(hosts, host)
    dist.all_reduce(buffer)  # warm-up: connections and buffers set up here, not timed
    seconds = []
    for _ in range(repeats):
        buffer.fill_(1.0)
        _synchronize(device)
        started = time.perf_counter()
        dist.all_reduce(buffer)
        _synchronize(device)
        seconds.append(time.perf_counter() - started)
    if not torch.all(buffer == float(place.world)):
        return _fail(f"rank {place.rank} on {host}: the all-reduce summed to {buffer[0].item()}, not {place.world}")
    if place.rank == 0:
        record = _record(place, [str(h) for h in hosts], elements * 4, seconds, dist.get_backend(), nccl_log)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, indent=2) + "\n")
        print(summary_line(record), flush=True)
    dist.barrier()
    return 0


def _record(
    place: Place, hosts: list[str], size: int, seconds: list[float], backend: str, nccl_log: Path | None
) -> dict[str, Any]:
    median = statistics.median(seconds)
    algorithm = size / median / 1e9
    world = place.world
    nodes = list(dict.fromkeys(hosts))
    return {
        "processes": world,
        "nodes": len(nodes),
        "processes_per_node": max(hosts.count(host) for host in nodes),
        "hosts": hosts,
        "backend": backend,
        "bytes": size,
        "repeats": len(seconds),
        "seconds": seconds,
        "median_s": median,
        "algorithm_gbps": algorithm,
        "bus_gbps": algorithm * 2 * (world - 1) / world,
        "interconnect": interconnect(place.master_addr, nccl_log),
        "checked_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def summary_line(record: dict[str, Any]) -> str:
    nodes = list(dict.fromkeys(record["hosts"]))
    link = record["interconnect"]
    over = f" over {link['interface']}" if link.get("interface") else ""
    speed = f" ({link['link_mbps'] / 1000:g} Gb/s)" if link.get("link_mbps") else ""
    network = f", NCCL network {link['nccl_network']}" if link.get("nccl_network") else ""
    plural = "s" if len(nodes) > 1 else ""
    return (
        f"all-reduce check: {record['processes']} processes on {len(nodes)} node{plural} ({', '.join(nodes)}), "
        f"{record['backend']}{over}{speed}{network}, {record['bytes'] / 2**20:g} MiB: "
        f"{record['bus_gbps']:.3g} GB/s bus bandwidth"
    )


def interconnect(master_addr: str, nccl_log: Path | None = None) -> dict[str, Any]:
    """What this process saw of the network to rank 0: the interface its address routes over, that link's speed
    (sysfs), the InfiniBand devices present, and NCCL's own choice of transport where NCCL ran."""
    address = _local_address(master_addr)
    interface = _interface_of(address) if address else None
    return {
        "address": address,
        "interface": interface,
        "link_mbps": _link_mbps(interface),
        "infiniband": sorted(p.name for p in Path("/sys/class/infiniband").glob("*")),
        "nccl_network": _nccl_network(nccl_log),
    }


def _local_address(master_addr: str) -> str | None:
    """The local address a connection to rank 0 leaves from (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((master_addr, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return None


def _interface_of(address: str) -> str | None:
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(entry.address == address for entry in addresses):
            return str(name)
    return None


def _link_mbps(interface: str | None) -> int | None:
    if not interface:
        return None
    try:
        speed = int(Path(f"/sys/class/net/{interface}/speed").read_text().strip())
    except (OSError, ValueError):
        return None  # loopback and virtual links have none
    return speed if speed > 0 else None


def _nccl_debug_file() -> Path:
    """NCCL's INFO lines to a file of this process (read back for the transport it chose), unless the user set
    NCCL_DEBUG themselves."""
    path = Path(tempfile.gettempdir()) / f"kcb-nccl-{os.getpid()}.log"
    if "NCCL_DEBUG" not in os.environ:
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=str(path))
    return path


def _nccl_network(log: Path | None) -> str | None:
    if log is None or not log.exists():
        return None
    for line in log.read_text(errors="replace").splitlines():
        if NCCL_NETWORK in line:
            return line.split(NCCL_NETWORK, 1)[1].strip()
    return None


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _fail(message: str, code: int = EXIT_UNREACHABLE) -> int:
    prefix = "all-reduce check: " if code == EXIT_USAGE else "all-reduce check failed: "
    print(prefix + message, file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
