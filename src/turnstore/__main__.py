"""``python -m turnstore``: the ``turnstore`` command (needs the cli extra)."""

from .cli import main

main()
