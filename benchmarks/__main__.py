import sys

from benchmarks.cli import main

if sys.argv[1:2] == ["preloaded"]:  # its own parser and entry: the parent of runner processes (benchmarks.preload)
    from benchmarks.preload import main as preloaded

    sys.exit(preloaded(sys.argv[2:]))
sys.exit(main())
