"""The ``turnstore`` command line: inspect, search, export, import and migrate conversations.

A thin layer over ``Store``: each command opens the database named by ``--db`` (or the
``TURNSTORE_DB`` environment variable, else ``turnstore.db``), calls the library, and prints
tables and trees for people or, with ``--json``, JSON for scripts. Errors are one line on
stderr and a non-zero exit status. Read commands open the database read-only: they never
create, migrate or write it, and work on a file or directory they cannot write.

The modules: ``app`` (the Typer app, ``main``), ``options`` (the options the commands share),
``database`` (opening the database a command names, errors as one line), ``output`` (safe
text, JSON, tables), and one module per group of commands: ``reading`` (show, runs,
sessions), ``window`` (which runs of a long session they print), ``branching``
(branches: list, name, switch), ``analytics`` (tools, search, usage), ``data`` (export,
import, migrate, adopt), ``query`` (read-only SQL), ``retention`` (prune), ``transfer``
(copy), ``server`` (demo, serve), ``traces`` (otel). The commands are registered on ``app``
here, in the order ``--help`` lists them.
"""

from __future__ import annotations

from collections.abc import Callable

from .analytics import search, tools, usage
from .app import app, main
from .branching import branches
from .data import adopt, export, import_, migrate
from .options import display_target as _shown
from .output import safe_text
from .query import query
from .reading import runs, sessions, show
from .retention import prune
from .server import demo, serve
from .traces import otel_command
from .transfer import copy

__all__ = ["_shown", "app", "main", "safe_text"]

# In the order --help lists them; a name where the function's is not the command's.
_COMMANDS: tuple[tuple[Callable[..., None], str | None], ...] = (
    (show, None),
    (runs, None),
    (branches, None),
    (sessions, None),
    (tools, None),
    (search, None),
    (usage, None),
    (query, None),
    (export, None),
    (otel_command, "otel"),
    (import_, "import"),
    (copy, None),
    (migrate, None),
    (adopt, None),
    (prune, None),
    (demo, None),
    (serve, None),
)
for _command, _name in _COMMANDS:
    app.command(_name)(_command)
