"""Integrations with the tools people already train and track with (optional extras).

Each lives in its own module and is imported only when used, so ``import ecopt``
never pulls in transformers, Lightning, Optuna, Ray or MLflow:

* :mod:`ecopt.integrations.transformers` (``pip install ecopt[hf]``):
  ``EcoptCallback(trial)`` for the Hugging Face ``Trainer``, and
  :func:`~ecopt.integrations.transformers.measure_generate` for tokens/J of
  ``model.generate``-style decoding.
* :mod:`ecopt.integrations.lightning` (``pip install ecopt[lightning]``):
  ``EcoptCallback(trial)`` for a PyTorch Lightning ``Trainer``.
* :mod:`ecopt.integrations.optuna` (``pip install ecopt[optuna]``):
  ``EcoptSampler()`` for ``optuna.create_study(sampler=...)``, ``metered(trial,
  name)`` phases in an Optuna objective, and ``ecopt import-optuna``.
* :mod:`ecopt.integrations.ray` (``pip install ecopt[ray]``):
  ``EcoptSearch(metric=[...], mode=[...])`` for ``tune.TuneConfig(search_alg=...)``,
  and ``metered(name)`` phases inside Tune trainables.
* :mod:`ecopt.integrations.mlflow` (``pip install ecopt[mlflow]``):
  ``MLflowLogger(...)``, a ``Study.optimize(callbacks=[...])`` callback that
  logs every finished trial as an MLflow run.

Example:
    >>> from ecopt.integrations.transformers import EcoptCallback
    >>> trainer = Trainer(model, args, train_dataset=train, eval_dataset=val,
    ...                   callbacks=[EcoptCallback(trial)])
"""

from __future__ import annotations

__all__: list[str] = []
