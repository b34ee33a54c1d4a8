#!/usr/bin/env bash
# Set up a virtual environment (once) with every extra, then run lint, types and the test suite.
# Postgres tests use TURNSTORE_TEST_POSTGRES_URL (default: the local server); under CI=true a
# missing server fails the run instead of skipping those tests. The web viewer's browser tests
# drive Debian's chromium (installed here when missing and running as root, as CI does); without
# it they skip, and under CI=true they fail.
#
# The suite runs against the newest openai-agents release turnstore[agents] accepts; then the
# tests that drive the SDK run once more against the lowest (constraints/sdk-lowest.txt), in a
# second environment (.venv-sdk-lowest). SDK_LOWEST=0 skips that second pass.
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
"$VENV/bin/python" -m pytest "$@"
[ "${SDK_LOWEST:-1}" = 0 ] && exit 0
LOWEST=${LOWEST_VENV:-.venv-sdk-lowest}
[ -x "$LOWEST/bin/python" ] || python3 -m venv "$LOWEST"
"$LOWEST/bin/python" -m pip install --quiet --upgrade pip
"$LOWEST/bin/python" -m pip install --quiet -c constraints/sdk-lowest.txt -e '.[dev]'
echo "Again against $("$LOWEST/bin/python" -m pip show openai-agents | grep '^Version')" \
    "of openai-agents, the lowest supported:"
# Not the multi-process stress tests: they test turnstore's locking, whatever the SDK.
exec "$LOWEST/bin/python" -m pytest "$@" -m "not slow" tests/test_e2e_runner.py \
    tests/test_dropin.py tests/test_compaction.py tests/test_adopt.py tests/test_cli.py \
    tests/test_cli_safety.py
