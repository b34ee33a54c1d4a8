"""The ``turnstore`` Typer application and its entry point; the commands register on ``app``
from their modules (reading, analytics, data, server), imported by the package."""

from __future__ import annotations

import typer

from .options import DEFAULT_DB, ENV_DB, DbOption

__all__ = ["app", "main"]

app = typer.Typer(
    name="turnstore",
    help=(
        "Inspect, search, export, import and migrate agent conversations stored by turnstore.\n\n"
        f"The database is --db (before or after the command), else ${ENV_DB}, else "
        f"./{DEFAULT_DB}: a SQLite path or a postgresql:// URL."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(ctx: typer.Context, db: DbOption = None) -> None:
    ctx.obj = db


def main() -> None:
    """Entry point of the ``turnstore`` command."""
    app()
