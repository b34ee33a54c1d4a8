"""``python -m turnstore.cli``: the ``turnstore`` command."""

from . import main

main()
