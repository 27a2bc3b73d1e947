"""`run`'s options as typed requests: one mode each, an option of another mode refused in one line."""

from __future__ import annotations

import re

import pytest

from orchestrate.cli import build_parser
from orchestrate.cli.common import UsageError
from orchestrate.cli.request import AttachedRun, Detach, DetachedRun, Fanout, RunOptions, request_of


def _request(*argv: str) -> AttachedRun | DetachedRun | Fanout:
    return request_of(build_parser().parse_args(["run", *argv]))


def test_each_mode_holds_only_its_own_options() -> None:
    assert _request("--profile", "local") == AttachedRun("local", RunOptions())
    detached = _request("--profile", "aws-g4dn.xlarge", "--detach", "--bucket", "s3://b", "--upload-interval", "5")
    assert detached == DetachedRun("aws-g4dn.xlarge", RunOptions(), Detach(5.0, "s3://b"))
    fanout = _request("--profiles", "local,ssh", "--max-cost", "3", "--detach")
    assert fanout == Fanout("local,ssh", RunOptions(), 3.0, None, Detach())
    assert fanout.child("ssh", RunOptions(run_id="x-ssh")) == DetachedRun("ssh", RunOptions(run_id="x-ssh"), Detach())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--profile", "local", "--bucket", "s3://b"], "--bucket applies to detached runs (--detach)"),
        (["--profiles", "local", "--platform", "box"], "--platform names one machine"),
        (["--profile", "local", "--max-cost", "1"], "--max-cost applies to a fan-out (--profiles a,b,...)"),
        (["--profile", "gce-t4", "--detach", "--report-out", "r"], "--report-out applies to a fan-out"),
        (["--profile", "local", "--image-source", "load"], "--image-source load applies to detached runs (--detach)"),
    ],
)
def test_an_option_of_another_mode_is_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        _request(*argv)


def test_options_read_back_from_their_command_line() -> None:
    options = RunOptions(spot=False, catalog=(), provider_setting=("a=1", "b=2"), repeats=3, plain=True)
    request = AttachedRun("local", options)
    assert _request(*request.argv()) == request
    assert "--on-demand" in options.argv() and options.argv().count("--provider-setting") == 2
