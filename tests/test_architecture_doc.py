"""docs/architecture.md: each "how to add" example runs as it is, and is under 30 lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ecopt import registry

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _examples() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    part = text.split("## Adding a plug-in", 1)[1]
    out = {}
    for section in re.split(r"^### ", part, flags=re.M)[1:]:
        title = section.splitlines()[0].strip()
        blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
        assert len(blocks) == 1, title
        out[title] = blocks[0]
    return out


def test_there_is_one_example_per_plugin_kind():
    assert list(_examples()) == ["A sampler", "A meter", "A pruner", "An executor"]


@pytest.mark.parametrize("title", ["A sampler", "A meter", "A pruner", "An executor"])
def test_each_example_runs_and_is_short(title):
    code = _examples()[title]
    lines = [ln for ln in code.splitlines() if ln.strip()]
    assert len(lines) < 30, f"{title}: {len(lines)} lines"
    before = {k: dict(v) for k, v in registry._ADDED.items()}
    try:
        exec(compile(code, f"{DOC.name}: {title}", "exec"), {"__name__": "architecture_doc"})
    finally:
        for kind, names in before.items():  # leave the registry as it was
            registry._ADDED[kind] = names
