"""Layers import downward only: the core never imports the reports, data, workloads,
integrations or the CLI, and inside the core no floor imports one above it
(docs/architecture.md draws the layers and the floors; this test reads the drawing).

The check reads the source (AST), so it sees every import: at module level, inside
functions, under ``if TYPE_CHECKING:``, ``from ecopt import report``, and
``importlib.import_module("ecopt.report...")`` / ``"module:attribute"`` strings.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ecopt"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

#: What sits above (or beside) the core: the core may import none of these.
UPPER = ("ecopt.report", "ecopt.data", "ecopt.workloads", "ecopt.integrations", "ecopt.cli",
         "ecopt.quickstart", "ecopt.plot")
#: Modules that are not the core although they live at its level: the package facade
#: (``ecopt/__init__.py`` wires the layers together) and the upper modules themselves.
NOT_CORE = ("ecopt",) + UPPER


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in a file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names]  # from ecopt import report
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.split(":")[0]
            if text.startswith("ecopt.") and text.replace(".", "").replace("_", "").isalnum():
                out.append((node.lineno, text))  # a module named in a string (import_module)
    return out


def upward_edges(root: Path) -> list[str]:
    """Every import from a core module of ``root`` (an ``ecopt`` package dir) into an upper layer."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path, root)
        if mod in NOT_CORE or _is_under(mod, UPPER):
            continue
        by_line: dict[int, str] = {}
        for line, target in imported_modules(path, mod):
            if _is_under(target, UPPER) and len(target) < len(by_line.get(line, target + "_")):
                by_line[line] = target  # ``from ecopt.report.x import y``: the module, once
        bad += [f"{path.relative_to(root.parent)}:{line}: {mod} imports {target}"
                for line, target in sorted(by_line.items())]
    return bad


def test_the_core_never_imports_an_upper_layer():
    edges = upward_edges(PACKAGE)
    assert edges == [], "upward imports:\n" + "\n".join(edges)


def test_the_core_is_what_docs_architecture_says():
    core = {module_name(p, PACKAGE).split(".")[1] for p in PACKAGE.rglob("*.py")
            if module_name(p, PACKAGE) not in NOT_CORE
            and not _is_under(module_name(p, PACKAGE), UPPER)}
    for name in ("study", "trial", "space", "objective", "storage", "pareto", "samplers",
                 "pruners", "meters", "executors", "errors", "registry", "callbacks"):
        assert name in core


@pytest.mark.parametrize("source, found", [
    ("from ecopt.report.fmt import fmt_number\n", "ecopt.report.fmt"),
    ("def f():\n    from ecopt.report.live import live_callback\n", "ecopt.report.live"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ecopt.report.progress import P\n",
     "ecopt.report.progress"),
    ("from ecopt import report\n", "ecopt.report"),
    ("from .report import data\n", "ecopt.report"),
    ("import importlib\nimportlib.import_module('ecopt.workloads.cnn')\n", "ecopt.workloads.cnn"),
    ("X = {'live': 'ecopt.report.live:LiveFront'}\n", "ecopt.report.live"),
])
def test_the_check_sees_every_kind_of_import(tmp_path, source, found):
    pkg = tmp_path / "ecopt"
    (pkg / "report").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "report" / "__init__.py").write_text("")
    (pkg / "study.py").write_text(textwrap.dedent(source))
    (pkg / "report" / "data.py").write_text("from ecopt.study import Study\n")  # downward: fine
    edges = upward_edges(pkg)
    assert len(edges) == 1 and edges[0].endswith(f"ecopt.study imports {found}"), edges


# -- the floors inside the core ------------------------------------------------------------
def floors_drawn(doc: str) -> list[set[str]]:
    """The core's floors as docs/architecture.md draws them, lowest first.

    Each floor is the set of top-level modules and packages (``record``,
    ``samplers``) named on one line of the drawing between the rules around
    "the core"; a line indented deeper than the floors continues the one above.
    """
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if "═" in line and "the core" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("═"))
    floors: list[set[str]] = []
    for line in lines[start + 1:end]:
        names = re.findall(r"(?<![\w./])(_?[a-z][a-z0-9_]*)(?:\.py\b|/)", line)
        if not names:
            continue
        if line.startswith("   ") and floors:
            floors[-1] |= set(names)
        else:
            floors.append(set(names))
    return floors[::-1]


def core_names(root: Path) -> set[str]:
    """The core's top-level modules and packages (``trial``, ``samplers``...)."""
    return {module_name(p, root).split(".")[1] for p in root.rglob("*.py")
            if module_name(p, root) not in NOT_CORE and not _is_under(module_name(p, root), UPPER)}


def upward_floors(root: Path, floors: list[set[str]]) -> list[str]:
    """Every import from a core module of ``root`` into a floor above its own."""
    level = {name: i for i, floor in enumerate(floors) for name in floor}
    bad = []
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path, root)
        if mod in NOT_CORE or _is_under(mod, UPPER):
            continue
        here = level[mod.split(".")[1]]
        seen = set()
        for line, target in imported_modules(path, mod):
            parts = target.split(".")
            if parts[0] != "ecopt" or len(parts) < 2 or parts[1] not in level:
                continue  # outside ecopt, the package facade, an upper layer (tested above)
            if level[parts[1]] > here and (line, parts[1]) not in seen:
                seen.add((line, parts[1]))
                bad.append(f"{path.relative_to(root.parent)}:{line}: {mod} (floor {here}) "
                           f"imports ecopt.{parts[1]} (floor {level[parts[1]]})")
    return bad


def test_the_drawing_places_every_core_module_once():
    floors = floors_drawn(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(floors) == 5, floors  # ground, the live trial and the log, plug-ins, kept, study
    assert {"record", "errors", "_types", "space", "objective"} <= floors[0]
    assert {"trial", "storage", "pareto"} <= floors[1]
    assert {"samplers", "pruners", "meters", "executors", "registry"} <= floors[2]
    assert {"study", "_optimize"} <= floors[4]
    placed = [name for floor in floors for name in floor]
    assert len(placed) == len(set(placed)), "a module drawn on two floors"
    core = core_names(PACKAGE)
    assert core - set(placed) == set(), "core modules docs/architecture.md does not place"
    assert set(placed) - core == set(), "docs/architecture.md places modules that do not exist"


def test_no_core_module_imports_a_floor_above_its_own():
    edges = upward_floors(PACKAGE, floors_drawn(ARCHITECTURE.read_text(encoding="utf-8")))
    assert edges == [], "imports up a floor:\n" + "\n".join(edges)


@pytest.mark.parametrize("source, found", [
    ("from ecopt.trial import Trial\n", "ecopt.trial"),
    ("def f():\n    from ecopt.meters.base import Meter\n", "ecopt.meters"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ecopt.study import Study\n",
     "ecopt.study"),
    ("from ecopt import trial\n", "ecopt.trial"),
])
def test_the_floor_check_sees_an_import_up(tmp_path, source, found):
    pkg = tmp_path / "ecopt"
    (pkg / "meters").mkdir(parents=True)
    for name in ("__init__.py", "trial.py", "study.py", "meters/__init__.py", "meters/base.py"):
        (pkg / name).write_text("")
    (pkg / "record.py").write_text(textwrap.dedent(source))
    (pkg / "study.py").write_text("from ecopt.record import TrialRecord\n")  # down: fine
    (pkg / "meters" / "base.py").write_text("from .. import trial\n")  # same floor: fine
    doc = textwrap.dedent("""\
        ═══ the core ═══
         study.py
         meters/
         trial.py
         record.py
        ═══════════════
        """)
    floors = floors_drawn(doc)
    assert floors == [{"record"}, {"trial"}, {"meters"}, {"study"}]
    floors[1].add("meters")  # trial and meters on one floor: the relative import is sideways
    del floors[2]
    edges = upward_floors(pkg, floors)
    assert len(edges) == 1 and f"ecopt.record (floor 0) imports {found} (" in edges[0], edges
