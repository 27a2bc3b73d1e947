"""`python -m orchestrate`, reading the catalog file named by $KCB_TEST_CATALOG instead of the packaged one.

The cloud tests need profiles of their own (zones the fake clouds have, an image moto can resolve); the CLI has
no catalog option, so this entry point swaps the default catalog path and runs the unchanged CLI.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orchestrate.catalog
from orchestrate.cli import main

if __name__ == "__main__":
    orchestrate.catalog.DEFAULT_CATALOG = Path(os.environ["KCB_TEST_CATALOG"])
    sys.exit(main())
