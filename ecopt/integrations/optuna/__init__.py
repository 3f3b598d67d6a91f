"""ecopt inside Optuna (``pip install "ecopt[optuna]"``).

* :class:`EcoptSampler`: ecopt's qLogNEHVI as an Optuna sampler; the one line
  an Optuna user changes is ``optuna.create_study(directions=[...],
  sampler=EcoptSampler())``.
* :func:`metered`: ``with metered(trial, "inference", samples=n) as phase:``
  meters a phase of an Optuna objective with ecopt's meter and records energy
  and provenance in the trial's user attributes (``ecopt.phase.<name>``), so
  ``phase.samples_per_joule`` can be returned as an objective.
* ``ecopt import-optuna STORAGE_URL --study NAME DIR``
  (:func:`~ecopt.integrations.optuna.importer.import_study`): an Optuna study as
  an ecopt study directory for ``ecopt show``, ``ecopt report`` and the dashboard.

See docs/integrations.md ("Optuna").
"""

from __future__ import annotations

from typing import Any

__all__ = ["EcoptSampler", "metered", "MeteredPhase", "import_study", "ImportResult"]


def __getattr__(name: str) -> Any:
    # Optuna is imported on use: ``metered`` alone never pulls in the sampler's BoTorch stack.
    if name == "EcoptSampler":
        from ecopt.integrations.optuna.sampler import EcoptSampler

        return EcoptSampler
    if name in ("metered", "MeteredPhase"):
        from ecopt.integrations.optuna import metering

        return getattr(metering, name)
    if name in ("import_study", "ImportResult"):
        from ecopt.integrations.optuna import importer

        return getattr(importer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
