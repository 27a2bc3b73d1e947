"""`python -m report`: see report/cli.py."""

from report.cli import main

raise SystemExit(main())
