"""The ``turnstore`` command line: inspect, search, export, import and migrate conversations.

A thin layer over ``Store``: each command opens the database named by ``--db`` (or the
``TURNSTORE_DB`` environment variable, else ``turnstore.db``), calls the library, and prints
tables and trees for people or, with ``--json``, JSON for scripts. Errors are one line on
stderr and a non-zero exit status. Read commands open the database read-only: they never
create, migrate or write it, and work on a file or directory they cannot write.

The modules: ``app`` (the Typer app, ``main``), ``options`` (the options the commands share),
``database`` (opening the database a command names, errors as one line), ``output`` (safe
text, JSON, tables), and one module per group of commands: ``reading`` (show, runs),
``catalogue`` (sessions), ``window`` (which runs of a long session they print), ``branching``
(branches: list, name, switch), ``analytics`` (tools, search, usage), ``data`` (export,
import, migrate, adopt), ``query`` (read-only SQL), ``retention`` (prune), ``transfer``
(copy), ``server`` (demo, serve), ``traces`` (otel). A command is declared where it is
defined (``@command(rank)``, from ``app``); importing this package imports every module of
``cli/`` and adds their commands to ``app`` in rank order, the order ``--help`` lists them.
So a new command touches its module (and docs/cli.md) only.
"""

from __future__ import annotations

import importlib
import pkgutil

from .app import COMMANDS, Command, app, main
from .options import display_target as _shown
from .output import safe_text

__all__ = ["_shown", "app", "main", "safe_text"]

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "__main__":  # that one runs the command line
        importlib.import_module(f"{__name__}.{_module.name}")
for _rank, _command, _name in sorted(COMMANDS, key=lambda entry: entry[0]):
    app.command(_name, cls=Command)(_command)
