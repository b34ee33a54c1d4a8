#!/usr/bin/env bash
# Set up a virtual environment (once) with every extra, then run lint, types and the test suite.
# Postgres tests use TURNSTORE_TEST_POSTGRES_URL (default: the local server); under CI=true a
# missing server fails the run instead of skipping those tests.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e '.[dev]'
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
exec "$VENV/bin/python" -m pytest "$@"
