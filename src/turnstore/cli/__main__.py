"""``python -m turnstore.cli``: the ``turnstore`` command."""

from ..console import main

main()
