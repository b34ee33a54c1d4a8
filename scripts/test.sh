#!/usr/bin/env bash
# Set up a virtual environment (once) with every extra and the dev dependency group, then run
# lint, types and the test suite. Postgres tests use TURNSTORE_TEST_POSTGRES_URL (default: the
# local server); under CI=true a missing server fails the run instead of skipping those tests.
# The web viewer's browser tests drive Debian's chromium (installed here when missing and
# running as root, as CI does); without it they skip, and under CI=true they fail.
#
# pytest runs the test files on every core (pytest-xdist: -n auto), each file's tests in one
# worker (--dist loadfile), so that what a module builds once it builds once; each test's
# database is its own (a tmp dir, a PostgreSQL schema of a random name, a free port).
#
# The suite runs against the newest release of every dependency pyproject.toml accepts; then
# the tests that reach a dependency (the SDK, the CLI, the viewer, PostgreSQL) run once more
# with the lowest release of every one (constraints/lowest.txt: each floor of pyproject.toml),
# in a second environment (.venv-lowest). LOWEST=0 skips that second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
EXTRAS='.[agents,postgres,cli,web,otel]'
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# pip 25.1 or newer installs dependency groups (--group).
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e "$EXTRAS" --group dev
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
PARALLEL=(-n auto --dist loadfile)
"$VENV/bin/python" -m pytest "${PARALLEL[@]}" "$@"
[ "${LOWEST:-1}" = 0 ] && exit 0
LOWEST_VENV=${LOWEST_VENV:-.venv-lowest}
[ -x "$LOWEST_VENV/bin/python" ] || python3 -m venv "$LOWEST_VENV"
"$LOWEST_VENV/bin/python" -m pip install --quiet --upgrade pip
"$LOWEST_VENV/bin/python" -m pip install --quiet -c constraints/lowest.txt -e "$EXTRAS" \
    --group test
echo "Again with the lowest release of every dependency (constraints/lowest.txt):"
"$LOWEST_VENV/bin/python" -m pip list --format freeze 2>/dev/null \
    | grep -iE '^(msgspec|openai-agents|psycopg|psycopg-binary|psycopg-pool|typer|rich|starlette|jinja2|uvicorn)==' \
    | tr '\n' ' '
echo
# Not the multi-process stress tests (turnstore's locking, whatever the versions), nor the
# browser or packaging tests (the newest releases suffice for what they check).
exec "$LOWEST_VENV/bin/python" -m pytest "${PARALLEL[@]}" "$@" -m "not slow and not browser and not packaging" \
    tests/test_e2e_runner.py tests/test_dropin.py tests/test_compaction.py tests/test_adopt.py \
    tests/test_cli.py tests/test_cli_safety.py tests/test_cli_scripting.py tests/test_web.py \
    tests/test_postgres.py tests/test_tracing.py
