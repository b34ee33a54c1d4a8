#!/usr/bin/env bash
# Mutation testing of turnstore's core modules with mutmut (docs/mutation.md). Not part of CI:
# a full run takes about an hour on two cores. mutmut keeps its copy of the tree and the results
# in mutants/ (git-ignored); `.venv/bin/mutmut show NAME` shows one mutant's diff.
#
#   scripts/mutation.sh                                  # every mutant of the core functions
#   scripts/mutation.sh 'turnstore.core.history.*'   # only these (mutmut name patterns)
#   MUTMUT_WORKERS=2 scripts/mutation.sh                 # workers (default 1: CPU is shared)
#
# It ends with the score over the mutants it was asked for and the list of the survivors.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/mutmut" ]; then
    echo "mutmut is missing: run scripts/test.sh (or pip install -e . --group dev) first" >&2
    exit 2
fi
# The core functions: pairing (plan, append), the tree (history), path reads (reads),
# migrations (schema) and search rendering (search).
CORE=(
    'turnstore.core.plan.*'
    'turnstore.core.append.*'
    'turnstore.core.history.*'
    'turnstore.core.reads.*'
    'turnstore.core.schema.*'
    'turnstore.core.search.*'
)
if [ $# -gt 0 ]; then
    CORE=("$@")
fi
# The tests select their own backends (SQLite only here): a CI=true environment would make the
# deselected PostgreSQL cases fail instead of being skipped.
unset CI
"$VENV/bin/mutmut" run --max-children "${MUTMUT_WORKERS:-1}" "${CORE[@]}"
"$VENV/bin/mutmut" results --all true |
    "$VENV/bin/python" scripts/mutation_score.py "${CORE[@]}"
