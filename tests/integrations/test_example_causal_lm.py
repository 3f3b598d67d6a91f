"""examples/tune_causal_lm.py: one real trial of its objective, so the example never rots."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import ecopt  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tune_causal_lm.py"


@pytest.mark.slow
def test_one_trial_of_the_example_reports_perplexity_and_tokens_per_joule():
    spec = importlib.util.spec_from_file_location("tune_causal_lm", EXAMPLE)
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    study = ecopt.Study(ecopt.SearchSpace({"batch_size": ecopt.Categorical([32]),
                                           "precision": ecopt.Categorical(["float32"]),
                                           "lr": ecopt.Float(1e-3, 1e-2, log=True)}),
                        [ecopt.Objective("perplexity", "min"),
                         ecopt.Objective("tokens_per_joule", "max")],
                        sampler="random", meter="estimate")
    (rec,) = study.optimize(ex.objective, n_trials=1, show_progress=False)
    assert rec.state.value == "complete", rec.error
    assert 1 < rec.values["perplexity"] < ex.VOCAB  # below a uniform guess after one epoch
    assert rec.phases["train"].samples == len(ex.TRAIN) * ex.SEQ  # tokens, unit="tokens"
    assert [i.step for i in rec.intermediate] == [1]
