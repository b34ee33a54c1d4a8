"""The package as users install it: the built wheel, with each extra alone, in a fresh
virtual environment, runs what that extra promises and says in one line what it lacks.

Offline and fast: the wheel is built without build isolation (hatchling is in the test
group) and installed with ``--no-deps``; each environment then sees, through a ``.pth`` file,
only the distributions the extra declares (and theirs), linked from the environment running
the tests. A dependency missing from pyproject.toml therefore fails here as it would for a
user. The docs' install lines are run too, with the commands that follow them. The
``packaging`` marker lets a quick run leave these tests out (``-m "not packaging"``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

if sys.version_info < (3, 11):  # tomllib; CI runs 3.11
    pytest.skip("reads pyproject.toml with tomllib (Python 3.11+)", allow_module_level=True)

import tomllib
from packaging.requirements import Requirement

from support import POSTGRES_URL, require_postgres
from turnstore.domain import extras

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_extras_table_is_pyprojects() -> None:
    """``turnstore.domain.extras.EXTRAS`` names every extra pyproject.toml declares, and each module
    it lists is what one of the extra's distributions provides."""
    declared = PYPROJECT["project"]["optional-dependencies"]
    assert set(extras.EXTRAS) == set(declared)
    for extra, modules in extras.EXTRAS.items():
        provided = {
            top
            for requirement in declared[extra]
            for top in _top_levels(Requirement(requirement).name)
        }
        assert set(modules) <= provided, (extra, modules, provided)


def test_the_readme_names_every_extra() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (listed,) = re.findall(r"^The extras: (.*?)\. The library alone", readme, re.M | re.S)
    assert set(re.findall(r"`(\w+)` \(", listed)) == set(extras.EXTRAS)


def test_no_development_tool_is_published() -> None:
    """The tools that build and test turnstore are dependency groups, not extras users see."""
    published = " ".join(
        " ".join(requirements)
        for requirements in PYPROJECT["project"]["optional-dependencies"].values()
    )
    for tool in ("pytest", "ruff", "mypy", "playwright", "mutmut", "hypothesis"):
        assert tool not in published
    assert "dev" in PYPROJECT["dependency-groups"]


def test_the_license_file_is_the_metadata_license() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def _top_levels(distribution: str) -> set[str]:
    top_level = metadata.distribution(distribution).read_text("top_level.txt")
    if top_level:
        return set(top_level.split())
    files = metadata.distribution(distribution).files or []
    return {
        f.parts[0].removesuffix(".py")
        for f in files
        if not f.parts[0].endswith((".dist-info", ".pth")) and f.parts[0] != ".."
    }


def _closure(requirements: list[str], extras_: set[str]) -> set[str]:
    """The distributions ``requirements`` need, transitively, as installed here."""
    seen: set[str] = set()
    pending = [(Requirement(r), extras_) for r in requirements]
    while pending:
        requirement, active = pending.pop()
        env = {"extra": ""}
        if requirement.marker is not None and not any(
            requirement.marker.evaluate({**env, "extra": e}) for e in active | {""}
        ):
            continue
        name = metadata.distribution(requirement.name).metadata["Name"]
        key = f"{name}{sorted(requirement.extras)}"
        if key in seen:
            continue
        seen.add(key)
        for sub in metadata.requires(name) or []:
            pending.append((Requirement(sub), set(requirement.extras)))
    return {key.split("[")[0] for key in seen}


def _link_distributions(names: set[str], into: Path) -> None:
    """Link each distribution's top-level files from this environment into ``into``."""
    into.mkdir()
    for name in names:
        dist = metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            target = into / top
            if not target.exists() and (base / top).exists():
                target.symlink_to(base / top)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
    )
    (built,) = out.glob("turnstore-*.whl")
    return built


class Environment:
    """A fresh virtual environment with the wheel and the dependencies of ``extras``."""

    def __init__(self, root: Path, wheel: Path, *extras: str) -> None:
        self.root = root
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        self.python = root / "bin" / "python"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(self.python),
                "install",
                "--quiet",
                "--no-deps",
                str(wheel),
            ],
            check=True,
        )
        project = PYPROJECT["project"]
        requirements = list(project["dependencies"])
        for extra in extras:
            requirements += project["optional-dependencies"][extra]
        linked = root / "linked"
        _link_distributions(_closure(requirements, set()), linked)
        (self._site() / "linked.pth").write_text(f"{linked}\n", encoding="utf-8")

    def _site(self) -> Path:
        (site,) = (self.root / "lib").glob("python3*/site-packages")
        return site

    def run(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TURNSTORE_DB")}
        env.pop("OPENAI_API_KEY", None)
        result = subprocess.run(
            args, capture_output=True, text=True, env=env, cwd=self.root, timeout=120
        )
        assert result.returncode == code, (args, result.returncode, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def turnstore(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.root / "bin" / "turnstore"), *args, code=code)

    def python_c(self, code_: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.python), "-c", code_, code=code)


def _one_line(result: subprocess.CompletedProcess[str], extra: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert re.fullmatch(
        rf"error: .* needs the {extra} extra \(\w+ is missing\): "
        rf"pip install 'turnstore\[{extra}\]'",
        lines[0],
    ), lines[0]


def test_the_library_alone(wheel: Path, tmp_path: Path) -> None:
    env = Environment(tmp_path / "env", wheel)
    env.python_c(
        "import asyncio\n"
        "from turnstore import Store\n"
        "async def main():\n"
        "    async with Store.open('x.db') as store:\n"
        "        await store.add_items('s', [{'role': 'user', 'content': 'hi'}])\n"
        "        assert await store.get_items('s') == [{'role': 'user', 'content': 'hi'}]\n"
        "asyncio.run(main())\n"
    )
    _one_line(env.turnstore("--version", code=1), "cli")
    _one_line(env.run(str(env.python), "-m", "turnstore", "sessions", code=1), "cli")
    result = env.python_c(
        "import sys\n"
        "from turnstore import ConfigurationError, Store\n"
        "try:\n"
        "    Store.open('postgresql://x@127.0.0.1/y')\n"
        "except ConfigurationError as exc:\n"
        "    sys.exit(str(exc))\n",
        1,
    )
    assert "pip install 'turnstore[postgres]'" in result.stderr


def test_the_cli_extra(wheel: Path, tmp_path: Path) -> None:
    env = Environment(tmp_path / "env", wheel, "cli")
    version = env.turnstore("--version").stdout.strip()
    assert version == f"turnstore {PYPROJECT['project']['version']}"
    assert "Usage" in env.turnstore("-h").stdout
    env.turnstore("migrate", "--db", "x.db")
    assert "No sessions." in env.turnstore("sessions", "--db", "x.db").stdout
    assert env.turnstore("query", "SELECT 1 AS one", "--db", "x.db", "--csv").stdout == "one\n1\n"
    _one_line(env.turnstore("demo", "--db", "x.db", code=1), "agents")
    _one_line(env.turnstore("serve", "--db", "x.db", code=1), "web")
    _one_line(env.turnstore("sessions", "--db", "postgresql://x@127.0.0.1/y", code=1), "postgres")
    assert "pip install 'turnstore[web]'" in env.turnstore("serve", "--help").stdout


def test_the_agents_extra(wheel: Path, tmp_path: Path) -> None:
    env = Environment(tmp_path / "env", wheel, "agents")
    out = env.run(str(env.python), "-m", "turnstore.agents.demo", "--db", "demo.db").stdout
    assert "Refund for order 1234 is on its way." in out
    _one_line(env.turnstore("demo", code=1), "cli")


def test_the_web_extra(wheel: Path, tmp_path: Path) -> None:
    env = Environment(tmp_path / "env", wheel, "web")
    env.python_c(
        "import asyncio\n"
        "from turnstore import Store\n"
        "from turnstore.web import create_app\n"
        "async def main():\n"
        "    async with Store.open('x.db') as store:\n"
        "        await store.add_items('s', [{'role': 'user', 'content': 'hi'}])\n"
        "        app = create_app(store)\n"
        "        sent = []\n"
        "        async def receive():\n"
        "            return {'type': 'http.request', 'body': b''}\n"
        "        async def send(message):\n"
        "            sent.append(message)\n"
        "        scope = {'type': 'http', 'method': 'GET', 'path': '/sessions/s',\n"
        "                 'raw_path': b'/sessions/s',\n"
        "                 'query_string': b'', 'headers': [(b'host', b'127.0.0.1')],\n"
        "                 'scheme': 'http', 'server': ('127.0.0.1', 80), 'root_path': '',\n"
        "                 'http_version': '1.1', 'client': ('127.0.0.1', 1)}\n"
        "        await app(scope, receive, send)\n"
        "        assert sent[0]['status'] == 200, sent[0]\n"
        "        assert b'hi' in b''.join(m.get('body', b'') for m in sent[1:])\n"
        "asyncio.run(main())\n"
    )


def test_the_postgres_extra(wheel: Path, tmp_path: Path) -> None:
    require_postgres()
    env = Environment(tmp_path / "env", wheel, "postgres")
    schema = f"pkg_{os.getpid()}"
    url = f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}"
    env.python_c(
        "import asyncio, psycopg\n"
        "from turnstore import Store\n"
        "async def main():\n"
        f"    async with Store.open({url!r}) as store:\n"
        "        await store.add_items('s', [{'role': 'user', 'content': 'hi'}])\n"
        "        assert await store.get_items('s') == [{'role': 'user', 'content': 'hi'}]\n"
        "asyncio.run(main())\n"
        f"with psycopg.connect({POSTGRES_URL!r}, autocommit=True) as conn:\n"
        f"    conn.execute('DROP SCHEMA {schema} CASCADE')\n"
    )


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.S)
INSTALL = re.compile(r"pip install '[^']*turnstore\[([\w,]+)\]'")


def _install_blocks() -> list[tuple[str, list[str], list[list[str]]]]:
    """(page, the extras installed, the turnstore commands after the install line) of each
    shell block of the docs that installs turnstore with extras and then runs it."""
    found = []
    for page in PAGES:
        for block in SHELL_BLOCK.findall(page.read_text(encoding="utf-8")):
            lines = [line.removeprefix("$ ") for line in block.splitlines()]
            for index, line in enumerate(lines):
                install = INSTALL.search(line)
                if install is None:
                    continue
                commands = [shlex.split(later, comments=True) for later in lines[index + 1 :]]
                commands = [args[1:] for args in commands if args[:1] == ["turnstore"]]
                if commands:
                    found.append((page.name, install.group(1).split(","), commands))
    return found


INSTALL_BLOCKS = _install_blocks()

# `turnstore ARGS`, with uvicorn.run a stub: `serve` returns instead of serving until stopped.
_TURNSTORE = """
import json, sys
try:
    import uvicorn
except ImportError:
    pass
else:
    uvicorn.run = lambda app, **options: print("serving on port", options["port"])
from turnstore.console import main
sys.argv = ["turnstore", *json.loads(sys.argv[1])]
main()
"""


def test_the_docs_install_check_sees_what_it_checks() -> None:
    assert "web.md" in {page for page, _, _ in INSTALL_BLOCKS}


@pytest.mark.parametrize(
    ("page", "extras_", "commands"), INSTALL_BLOCKS, ids=[page for page, _, _ in INSTALL_BLOCKS]
)
def test_an_install_line_of_the_docs_installs_what_the_commands_after_it_need(
    wheel: Path, tmp_path: Path, page: str, extras_: list[str], commands: list[list[str]]
) -> None:
    # docs/web.md installed turnstore[web] and then ran `turnstore demo` and `turnstore serve`,
    # which need the cli extra (and demo the agents extra).
    assert set(extras_) <= set(extras.EXTRAS), f"{page} installs an extra turnstore lacks"
    env = Environment(tmp_path / "env", wheel, *extras_)
    for args in commands:
        env.run(str(env.python), "-c", _TURNSTORE, json.dumps(args))


def test_the_lowest_constraints_pin_every_floor() -> None:
    """constraints/lowest.txt (scripts/test.sh's second pass) pins each dependency of the
    library and its extras at its floor in pyproject.toml, and pins nothing else."""
    project = PYPROJECT["project"]
    requirements = [Requirement(r) for r in project["dependencies"]] + [
        Requirement(r) for group in project["optional-dependencies"].values() for r in group
    ]
    floors = {}
    for requirement in requirements:
        (floor,) = [s.version for s in requirement.specifier if s.operator == ">="]
        floors[requirement.name.lower()] = floor
        for extra in requirement.extras:  # psycopg[binary]: psycopg-binary, of the same release
            floors[f"{requirement.name}-{extra}".lower()] = floor
    lines = (ROOT / "constraints" / "lowest.txt").read_text(encoding="utf-8").splitlines()
    pins = dict(line.split("==") for line in (line.split("#")[0].strip() for line in lines) if line)
    assert {name.lower(): version for name, version in pins.items()} == floors
