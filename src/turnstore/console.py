"""The ``turnstore`` console script (and ``python -m turnstore``): the command line, or, where
the ``cli`` extra is not installed, one line that says how to install it."""

from __future__ import annotations

import sys

from .domain.extras import missing, missing_extra

__all__ = ["main"]


def main() -> None:
    """Run the ``turnstore`` command line."""
    module = missing("cli")
    if module is not None:  # the console script is installed with the library alone
        sys.exit(f"error: {missing_extra('cli', 'the turnstore command', module)}")
    try:
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        # Ctrl-C before a command runs (while the CLI loads; a running command says so
        # itself): the same one line and status, not a traceback of the import.
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
