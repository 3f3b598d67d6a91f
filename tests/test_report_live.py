"""optimize(live=True): one notebook output redrawn in place; outside a notebook a warning."""

from __future__ import annotations


import pytest

import ecopt

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

CELL = """
import ecopt
space = ecopt.SearchSpace({"x": ecopt.Float(0, 1)})
study = ecopt.Study(space, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                    sampler="random", meter="estimate", name="live demo")
def objective(trial):
    with trial.phase("train", samples=10):
        sum(range(20000))
    return {"f1": trial["x"], "f2": (1 - trial["x"]) ** 2}
study.optimize(objective, n_trials=4, live=True)
print("finished", len(study.records))
"""


class _Recorder(nbclient.NotebookClient):
    """Keeps every display message the kernel sends (first display, then its updates)."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.display_msgs: list[tuple[str, str | None]] = []

    def process_message(self, msg, cell, cell_index):
        kind = msg["msg_type"]
        if kind in ("display_data", "update_display_data") and \
                "image/png" in msg["content"].get("data", {}):
            self.display_msgs.append((kind, msg["content"].get("transient", {}).get("display_id")))
        return super().process_message(msg, cell, cell_index)


@pytest.mark.slow
def test_live_front_is_one_output_redrawn_as_trials_finish(tmp_path, this_python_kernel):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    client = _Recorder(nb, kernel_name=this_python_kernel, timeout=120,
                       resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"], outputs
    kinds = [k for k, _ in client.display_msgs]
    assert kinds == ["display_data"] + ["update_display_data"] * 3  # one per finished trial
    assert len({d for _, d in client.display_msgs}) == 1  # always the same display
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1  # redrawn in place, not appended
    assert "finished 4" in "".join(o.get("text", "") for o in outputs)


def test_live_outside_a_notebook_warns_and_runs_the_study():
    st = ecopt.Study(ecopt.SearchSpace({"x": ecopt.Float(0, 1)}),
                     [ecopt.Objective("f", "min")], sampler="random", meter="estimate")
    with pytest.warns(RuntimeWarning, match="not one \\(no IPython kernel\\)"):
        done = st.optimize(lambda t: {"f": t["x"]}, n_trials=2, live=True, show_progress=False)
    assert len(done) == 2


def test_live_front_every_must_be_positive():
    from ecopt.report.live import LiveFront

    with pytest.raises(ValueError, match="every >= 1"):
        LiveFront(every=0)
