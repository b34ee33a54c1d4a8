#!/usr/bin/env bash
# Set up a virtual environment (once) with every extra, then run lint, types and the test suite.
# Postgres tests use TURNSTORE_TEST_POSTGRES_URL (default: the local server); under CI=true a
# missing server fails the run instead of skipping those tests. The web viewer's browser tests
# drive Debian's chromium (installed here when missing and running as root, as CI does); without
# it they skip, and under CI=true they fail.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e '.[dev]'
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
exec "$VENV/bin/python" -m pytest "$@"
