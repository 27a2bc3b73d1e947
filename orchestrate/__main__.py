import sys

from orchestrate.cli import main

sys.exit(main())
