"""``python -m turnstore``: the ``turnstore`` command."""

from .console import main

main()
