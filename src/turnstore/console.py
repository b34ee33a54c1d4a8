"""The ``turnstore`` console script (and ``python -m turnstore``): the command line, or, where
the ``cli`` extra is not installed, one line that says how to install it."""

from __future__ import annotations

import sys

from .extras import missing, missing_extra

__all__ = ["main"]


def main() -> None:
    """Run the ``turnstore`` command line."""
    module = missing("cli")
    if module is not None:  # the console script is installed with the library alone
        sys.exit(f"error: {missing_extra('cli', 'the turnstore command', module)}")
    from .cli import main as cli_main

    cli_main()
