#!/usr/bin/env bash
# Set up a virtual environment (once) and run the demo conversation into demo.db.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e '.[agents,cli]'
exec "$VENV/bin/python" -m turnstore.agents.demo "$@"
