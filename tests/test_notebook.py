"""examples/quickstart.ipynb is executed, so it never rots."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"


@pytest.mark.slow
def test_quickstart_notebook_runs_and_draws_the_front(tmp_path, this_python_kernel):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    work = tmp_path / "work"
    work.mkdir()
    client = nbclient.NotebookClient(nb, kernel_name=this_python_kernel, timeout=120,
                                     resources={"metadata": {"path": str(work)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) >= 2  # the front and the hypervolume, inline
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "energy estimated: True" in text
    run = work / "runs" / "notebook-quickstart"
    assert (run / "report.html").is_file()
    lines = (run / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 8
