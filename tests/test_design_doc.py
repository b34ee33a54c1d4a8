"""docs/design.md's map of the packages is the tree as it is: every module named, none stale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "turnstore"


def _layout() -> str:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    match = re.search(r"```\n(src/turnstore/\n.*?)```", text, re.S)
    assert match is not None, "docs/design.md lost its layout block"
    return match.group(1)


def _documented() -> set[str]:
    """The modules the layout block names, as paths relative to src/turnstore."""
    found: set[str] = set()
    folder = ""
    for line in _layout().splitlines()[1:]:
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0] if line.strip() else ""
        if indent == 2:
            folder = name if name.endswith("/") else ""
            if not folder:
                found.add(name)
        elif indent == 4 and folder:
            found.add(folder + name)
        # deeper lines continue a description
    return found


def _modules() -> set[str]:
    """Every module of the package, but the web viewer's (named as a whole) and dunder mains."""
    modules = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("web/") or path.name == "__main__.py":
            continue
        modules.add(relative)
    return modules


def test_the_layout_names_every_module_of_the_package() -> None:
    undocumented = {
        module
        for module in _modules() - _documented()
        # a package's __init__ is documented by the package's own line unless it says more
        if not module.endswith("/__init__.py")
    }
    assert not undocumented, f"docs/design.md's layout misses {sorted(undocumented)}"


def test_the_layout_names_no_module_that_is_gone() -> None:
    documented = {name for name in _documented() if name.endswith(".py")}
    stale = documented - _modules()
    assert not stale, f"docs/design.md's layout names modules that do not exist: {sorted(stale)}"


def test_every_package_of_the_layout_exists() -> None:
    packages = [name for name in _documented() if "/" in name]
    for package in {name.split("/")[0] for name in packages}:
        assert (PACKAGE / package / "__init__.py").is_file(), package
