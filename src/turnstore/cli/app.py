"""The ``turnstore`` Typer application and its entry point. A command registers where it is
defined, with ``@command(rank)``; the package imports every module of ``cli/`` and adds the
commands to ``app`` in rank order, the order ``--help`` lists them."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from .. import __version__
from .options import DEFAULT_DB, ENV_DB, DbOption, SchemaOption
from .output import error_text, fail, json_errors, json_requested

__all__ = ["COMMANDS", "Command", "app", "command", "main"]

# Click's base of the errors it reports itself (a bad option value, an unknown option),
# wherever this Typer takes Click from (newer releases carry a copy of their own).
_ClickException: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)


class _Commands(TyperGroup):
    """The root command: after ``--json`` (or ``--ndjson``), an error in the command line
    itself is written as JSON too."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        json_errors(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # output that cannot be written fails here, not at exit
            return result
        except _ClickException as exc:
            if not json_requested():  # Click's own usage message
                raise
            message = getattr(exc, "format_message", exc.__str__)()
            typer.echo(error_text(message, type(exc).__name__), err=True)
            raise typer.Exit(getattr(exc, "exit_code", 2)) from None
        except KeyboardInterrupt:
            # Ctrl-C: a command's statement was cancelled on its way out (the store's close
            # waits for that); one line and the shell's status for SIGINT, not Click's
            # "Aborted!" and 1.
            raise fail("interrupted", 130) from None
        except OSError as exc:
            # Printing the output failed (stdout on a full disk, a closed pipe): one line on
            # stderr, as for any error (none for a pipe its reader closed, as `| head` does),
            # and what stdout still buffers is dropped, so that the interpreter's exit does
            # not fail on it a second time.
            _drop_stdout()
            if isinstance(exc, BrokenPipeError):
                raise typer.Exit(1) from None
            message = f"cannot write the output: {exc.strerror or exc}"
            typer.echo(error_text(message, type(exc).__name__), err=True)
            raise typer.Exit(1) from None


class Command(TyperCommand):
    """A command whose arguments may start with a dash: SQL that opens with a comment
    (``-- what this reads``), a search for ``-refund policy``. A token that starts with ``-``
    and holds whitespace before any ``=`` cannot be an option (no option's name holds any), so
    it is taken as an argument, as if written after ``--`` (which still works)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        if not any(_not_an_option(token) for token in args[:end]):
            return super().parse_args(ctx, args)
        valued = {
            name
            for param in self.params
            if param.param_type_name == "option" and not getattr(param, "is_flag", False)
            for name in (*param.opts, *param.secondary_opts)
        }
        options: list[str] = []
        arguments: list[str] = []
        value_next = False  # the token before was an option that takes a value
        for token in args[:end]:
            if value_next or (token.startswith("-") and token != "-" and not _not_an_option(token)):
                options.append(token)
                value_next = not value_next and token in valued
            else:
                arguments.append(token)
        return super().parse_args(ctx, [*options, "--", *arguments, *args[end + 1 :]])


def _not_an_option(token: str) -> bool:
    return token.startswith("-") and any(c.isspace() for c in token.partition("=")[0])


def _drop_stdout() -> None:
    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


app = typer.Typer(
    cls=_Commands,
    name="turnstore",
    help=(
        "Inspect, search, export, import and migrate agent conversations stored by turnstore.\n\n"
        f"The database is --db (before or after the command), else ${ENV_DB}, else "
        f"./{DEFAULT_DB}: a SQLite path or a postgresql:// URL, whose schema --schema names."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Explicit, as Typer's default has changed between releases: help is Rich markup, so a
    # literal [ in it (turnstore\[web]) is escaped.
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


F = TypeVar("F", bound=Callable[..., None])

# Every command a module of cli/ declares: (rank, function, name), in import order.
COMMANDS: list[tuple[int, Callable[..., None], str | None]] = []


def command(rank: int, name: str | None = None) -> Callable[[F], F]:
    """Declare the decorated function a command: ``--help`` lists commands by ``rank``
    (ascending); ``name`` where the function's is not the command's."""

    def register(function: F) -> F:
        COMMANDS.append((rank, function, name))
        return function

    return register


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"turnstore {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: DbOption = None,
    schema: SchemaOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print turnstore's version and exit.",
            callback=_print_version,
            is_eager=True,
            metavar="",
        ),
    ] = False,
) -> None:
    ctx.obj = (db, schema)
    # The drivers' own warnings (psycopg's, on a dropped connection) would reach stderr
    # through logging's last resort, ahead of the one error a command prints (one JSON object
    # after --json): turnstore's error says what happened. Logging a program configures
    # still receives them.
    drivers = logging.getLogger("psycopg")
    if not drivers.handlers:
        drivers.addHandler(logging.NullHandler())


def main() -> None:
    """Entry point of the ``turnstore`` command."""
    app()
