"""Run a command with the shell words of a make variable appended, split as a shell would split them (quotes
group words) but without a shell: nothing in the value is run. Usage: words.py NAME VALUE COMMAND [ARG...]."""

import os
import shlex
import sys


def main() -> None:
    name, value, *command = sys.argv[1:]
    try:
        words = shlex.split(value)
    except ValueError as exc:  # an unclosed quote
        print(f"error: {name}={value!r}: {exc}", file=sys.stderr)
        sys.exit(2)
    os.execvp(command[0], [*command, *words])


if __name__ == "__main__":
    main()
