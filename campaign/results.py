"""docs/results.md, regenerated from the reference measurements (logs/reference): the product's report of those
logs next to benchmark-gpus-2017-11 (its summary first), then the campaign's two sections over them: the study on
the measured H100 and H200 (campaign.today) and those runs on their rooflines (campaign.roofline).

    python -m campaign.results                                   # logs/reference -> docs/results.md
    python -m campaign.results --logs DIR --out FILE

The file is generated only; notes on how the reference runs were made are in campaign/notes/.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from campaign import roofline, today
from report.cli import main as report

LOGS = Path("logs/reference")
OUT = Path("docs/results.md")


def regenerate(logs: Path, out: Path) -> int:
    """Write `out`; the report's exit code (0: written)."""
    code = report([str(logs), "--study", today.STUDY, "--markdown", str(out)])
    if code != 0:
        return code
    sections = [today.section(logs), roofline.section(logs, markdown=out)]
    text = out.read_text().rstrip() + "\n"
    out.write_text(text + "".join("\n" + part.rstrip() + "\n" for part in sections if part.strip()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaign.results", description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=Path, default=LOGS, help=f"the reference logs (default: {LOGS})")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the markdown file (default: {OUT})")
    args = parser.parse_args(argv)
    if not args.logs.is_dir():
        print(f"error: --logs: {args.logs} is not a folder", file=sys.stderr)
        return 2
    return regenerate(args.logs, args.out)


if __name__ == "__main__":
    sys.exit(main())
