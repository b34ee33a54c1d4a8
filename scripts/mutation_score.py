"""The mutation score of the mutants named by patterns, from ``mutmut results --all true``.

Reads ``name: status`` lines on stdin; prints the count of each status, the score (killed, a
timeout included, over every mutant that was checked: survived and "no tests" count against
it) and the survivors, one per line, for docs/mutation.md.
"""

from __future__ import annotations

import fnmatch
import sys
from collections import Counter

KILLED = {"killed", "timeout", "segfault", "caught by type check"}
UNCHECKED = {"not checked", "skipped", "check was interrupted by user"}


def main(patterns: list[str]) -> int:
    statuses: dict[str, str] = {}
    for line in sys.stdin:
        name, sep, status = line.strip().rpartition(": ")
        if sep and any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            statuses[name] = status
    counts = Counter(statuses.values())
    checked = sum(n for status, n in counts.items() if status not in UNCHECKED)
    killed = sum(counts[status] for status in KILLED)
    print(", ".join(f"{status}: {n}" for status, n in sorted(counts.items())))
    score = f"{100 * killed / checked:.1f}%" if checked else "n/a"
    print(f"score: {killed}/{checked} killed = {score}")
    for name, status in sorted(statuses.items()):
        if status not in KILLED | UNCHECKED:
            print(f"{status}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
