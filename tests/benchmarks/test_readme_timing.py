"""benchmarks/readme_timing.py times a command as a fresh process (a trivial one here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import readme_timing


def test_a_command_is_timed_in_a_fresh_process(tmp_path: Path, monkeypatch, capsys) -> None:
    work = "import time; t = time.process_time(); [0 for _ in iter(lambda: time.process_time() - t > 0.2, True)]"
    monkeypatch.setitem(readme_timing.COMMANDS, "quickstart",
                        (lambda tmp: ["-c", work], "a busy 0.2 CPU s"))
    r = readme_timing.time_command("quickstart", tmp_path)
    assert r["rc"] == 0 and r["cpu_s"] >= 0.2 and r["wall_s"] >= 0.2
    assert len(r["load_before"]) == 3
    assert readme_timing.main(["--commands", "quickstart"]) == 0
    assert "a busy 0.2 CPU s (run 0): " in capsys.readouterr().out
    with pytest.raises(ValueError, match="command must be one of"):
        readme_timing.time_command("nope", tmp_path)
