"""docs/cli.md names every command, argument and option of the real ``turnstore`` app.

The app's parameters are read from the Click command tree Typer builds (what ``--help``
prints), so a command or an option added without a word in the docs fails here, as does a
command the docs still list after it is gone. Each command has a row in the docs' table of
commands, whose first cell names it with its arguments (``show SESSION``) and whose text names
each of its options; the options every command shares (``--db``, ``--json``) are explained once,
above the table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from turnstore.cli import app

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
SHARED = {"--db", "--schema", "--json"}
ROOT_ONLY = {"--version"}  # the root command's own, explained above the table too


def command_tree() -> TyperGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return group


def long_options(command: typer.core.TyperCommand | TyperGroup) -> set[str]:
    """The long names of ``command``'s options (``--help`` aside)."""
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, TyperOption) and not param.hidden:
            names.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
    return names - {"--help"}


def arguments(command: typer.core.TyperCommand | TyperGroup) -> list[str]:
    """The metavars of ``command``'s arguments (SESSION, QUERY, …)."""
    return [
        str(param.metavar or param.name).upper()
        for param in command.params
        if isinstance(param, TyperArgument)
    ]


def doc_rows() -> tuple[str, dict[str, tuple[str, str]]]:
    """(the text above the table of commands, {command: (its first cell, its row)})."""
    text = DOCS.read_text(encoding="utf-8")
    rows: dict[str, tuple[str, str]] = {}
    intro_end = len(text)
    for match in re.finditer(r"^\| `([^`]+)` \|(.*)$", text, re.MULTILINE):
        cell, rest = match.group(1), match.group(2)
        rows[cell.split()[0]] = (cell, cell + " " + rest)
        intro_end = min(intro_end, match.start())
    return text[:intro_end], rows


def names(option: str, text: str) -> bool:
    """Whether ``text`` names ``option`` (``--session``, not ``--sessions``)."""
    return re.search(re.escape(option) + r"(?![\w-])", text) is not None


def test_every_command_has_a_row_and_no_row_is_stale() -> None:
    _, rows = doc_rows()
    assert sorted(rows) == sorted(command_tree().commands)


def test_the_shared_options_are_explained_once() -> None:
    intro, _ = doc_rows()
    group = command_tree()
    assert long_options(group) <= SHARED | ROOT_ONLY
    for option in SHARED | ROOT_ONLY:
        assert names(option, intro), f"docs/cli.md does not explain {option} above the table"
    # Shared means on (nearly) every command: the rows need not repeat them.
    for option in SHARED:
        having = [name for name, cmd in group.commands.items() if option in long_options(cmd)]
        assert len(having) >= len(group.commands) - 1, (option, having)


@pytest.mark.parametrize("name", sorted(command_tree().commands))
def test_each_command_row_names_its_arguments_and_options(name: str) -> None:
    command = command_tree().commands[name]
    cell, row = doc_rows()[1][name]
    for argument in arguments(command):
        assert argument in cell, f"docs/cli.md's row of {name} does not show {argument}"
    missing = sorted(o for o in long_options(command) - SHARED if not names(o, row))
    assert not missing, f"docs/cli.md's row of `{name}` does not name {missing}"


def test_the_check_sees_what_it_checks() -> None:
    """The walk finds real options (a test that found none would pass anything)."""
    commands = command_tree().commands
    assert {"show", "import", "serve", "adopt"} <= set(commands)
    assert {"--format", "--active", "--output"} <= long_options(commands["export"])
    assert {"--host", "--port", "--writable", "--allow-host"} <= long_options(commands["serve"])
    assert arguments(commands["show"]) == ["SESSION"]
    assert not names("--session", "`--sessions`")
