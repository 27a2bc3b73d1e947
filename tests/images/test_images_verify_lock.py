"""docker/verify_lock.py, the check every image build runs: against real pip resolutions and a real venv."""

from __future__ import annotations

import subprocess
from pathlib import Path

from image_helpers import REPO, VENV_PYTHON, run

SCRIPT = str(REPO / "docker" / "verify_lock.py")


def pip_dry_run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A real `pip install --dry-run` resolution against the index, nothing installed."""
    command = [str(VENV_PYTHON), "-m", "pip", "install", "--dry-run", "--ignore-installed", *args]
    return run(command, check=check, timeout=300)


def pip_report(tmp_path: Path, *requirements: str) -> Path:
    report = tmp_path / "report.json"
    pip_dry_run("--quiet", "--report", str(report), *requirements)
    return report


def verify(*args: str) -> tuple[int, str]:
    result = run([str(VENV_PYTHON), SCRIPT, *args], check=False)
    return result.returncode, result.stderr


def write_lock(tmp_path: Path, *lines: str) -> Path:
    lock = tmp_path / "test.lock"
    lock.write_text("# a comment\n" + "\n".join(f"{line}\n    # via -r x.in" for line in lines) + "\n")
    return lock


def test_report_equal_to_lock_passes(tmp_path: Path) -> None:
    report = pip_report(tmp_path, "six==1.17.0", "Mdurl==0.1.2")
    assert verify("report", str(report), str(write_lock(tmp_path, "six==1.17.0", "mdurl==0.1.2"))) == (0, "")


def test_report_with_other_version_or_unpinned_package_fails(tmp_path: Path) -> None:
    report = pip_report(tmp_path, "six==1.16.0", "mdurl==0.1.2")
    code, errors = verify("report", str(report), str(write_lock(tmp_path, "six==1.17.0")))
    assert code == 1
    assert "six: pinned 1.17.0, found 1.16.0" in errors
    assert "mdurl: 0.1.2 present but not pinned" in errors


def test_installed_mode_reads_the_real_environment(tmp_path: Path) -> None:
    assert verify("installed", str(write_lock(tmp_path, "pytest==0.0.1")))[0] == 1
    code, errors = verify("expect", "typing_extensions==0.0.1", "no-such-project==1.0")
    assert code == 1
    assert "typing-extensions: pinned 0.0.1, found" in errors
    assert "no-such-project: pinned 1.0, not present" in errors


def test_bad_input_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.lock"
    empty.write_text("# nothing\n")
    assert verify("installed", str(empty)) == (2, f"verify_lock: {empty}: no pins found\n")
    assert verify("expect", "numpy>=1")[0] == 2


def test_every_committed_lock_carries_hashes_and_pip_refuses_a_tampered_one(tmp_path: Path) -> None:
    for lock in ("bench-cpu", "bench-gpu", "dev"):
        assert verify("hashed", str(REPO / "requirements" / f"{lock}.lock")) == (0, "")
    # pip's hash-checking mode, as the venv and the images run it: a file whose hash differs is refused.
    wrong = "0" * 64
    tampered = tmp_path / "tampered.lock"
    tampered.write_text(f"six==1.17.0 \\\n    --hash=sha256:{wrong}\n")
    target = str(tmp_path / "t")
    result = pip_dry_run("--require-hashes", "--no-deps", "--target", target, "-r", str(tampered), check=False)
    assert result.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in result.stderr


def test_without_drops_one_pin_with_its_hashes(tmp_path: Path) -> None:
    lock = tmp_path / "h.lock"
    lock.write_text(
        "a==1 \\\n    --hash=sha256:aa \\\n    --hash=sha256:ab\n    # via x\nb==2 \\\n    --hash=sha256:bb\n"
    )
    result = run([str(VENV_PYTHON), SCRIPT, "without", "a", str(lock)])
    assert result.stdout == "    # via x\nb==2 \\\n    --hash=sha256:bb\n"
    assert verify("without", "c", str(lock)) == (2, f"verify_lock: {lock}: no pin for c\n")
    unhashed = tmp_path / "u.lock"
    unhashed.write_text("a==1 \\\n    --hash=sha256:aa\nb==2\n")
    assert verify("hashed", str(unhashed)) == (1, "verify_lock: b: pinned without a --hash\n")
