"""Transfer's model: one multi-task GP per objective, each source a task.

The model stage of a proposal with transfer sources in use
(:mod:`ecopt.samplers._transfer` decides which: its trust rule). For each
objective, BoTorch's ``MultiTaskGP`` is fitted on the trials of every source in
use that observed the objective (tasks 0, 1, ...) and on the new study's trials
(the last task, the output the acquisition queries): a kernel over the inputs times a
learned task covariance (``IndexKernel``), so the fit itself decides how much a
source's trials say about the new study, everywhere at once rather than by
moving the source's values onto the new scale. An objective no source observed
gets a plain ``SingleTaskGP`` on the new study's trials.

Strictly positive minimised objectives (energy, time, cost) are modelled as
``-log`` of their value (:func:`log_columns`, :func:`neg_log`): across GPUs a
configuration's energy and time change by a factor, which the log turns into an
offset the task covariance absorbs, and their values span orders of magnitude.
The acquisition then works on the same scale: the reference point is mapped the
same way (a monotone map keeps which points dominate which), and a hypervolume
improvement counts relative gains.

Measured on the Zeus traces (``docs/results/transfer/``): this model against
the earlier one (the sources' values moved onto the new scale by a
least-squares line and pooled with the new trials in one GP).

BoTorch 0.18's ``MultiTaskGP`` learns a mean and a noise level per task (the
recorded runs used it); BoTorch 0.15's has one of each for all tasks and learns less
from a source whose values differ by a factor. BoTorch 0.18's task covariance
(``PositiveIndexKernel``) fixes task 0's variance to 1 and learns the others':
the new study is the last task so that its variance is learnt from its own
trials while a source's, with the most trials, sets the scale (the order the
benchmark's MultiTaskGP arm used; with the new study as task 0 the same model
chose other configurations, ``docs/results/transfer/``). At 0.15
(``IndexKernel``) the order changes nothing.

Only BoTorch's public API is used (``MultiTaskGP``, ``SingleTaskGP``,
``ModelListGP``, ``Standardize``, ``fit_gpytorch_mll``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ecopt.samplers._models import Fitted, param_state

__all__ = ["KIND", "fit_multitask", "log_columns", "neg_log"]

#: ``gp_state["kind"]`` of a multi-task model (never warm-starts a single-task one).
KIND = "multitask"


def log_columns(Y: np.ndarray, sources: Sequence[np.ndarray], M: int) -> list[bool]:
    """Which of the ``M`` objective columns are modelled as ``-log(-y)``.

    ``Y`` and each source's array are in maximisation form: a minimised objective's
    value ``v`` is ``-v``. A column is logged when every finite value in it, the new
    study's and the sources', is negative (a minimised objective, always positive).
    """
    out = []
    for j in range(M):
        vals = [Y[:, j], *(S[:, j] for S in sources if S.shape[1] > j)]
        col = np.concatenate([v[np.isfinite(v)] for v in vals])
        out.append(bool(col.size) and bool((col < 0).all()))
    return out


def neg_log(Y: np.ndarray, logged: Sequence[bool]) -> np.ndarray:
    """``Y`` (maximisation form, ``(..., m)``) with the ``logged`` columns as ``-log(-y)``
    (a minimised positive value ``v`` becomes ``-log v``, still maximised)."""
    out = np.array(Y, dtype=float, copy=True)
    for j, lg in enumerate(logged):
        if lg:
            out[..., j] = -np.log(-out[..., j])
    return out


def _data_kernel(d: int, cat_dims: Sequence[int]) -> Any:
    """The kernel over the inputs when some are categorical: BoTorch's dim-scaled RBF on
    the others times its ``CategoricalKernel`` on them (``None``: none categorical, the
    models' default kernel)."""
    if not cat_dims:
        return None
    from botorch.models.kernels.categorical import CategoricalKernel
    from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior

    cat = sorted(cat_dims)
    cont = [i for i in range(d) if i not in cat]
    kernel = CategoricalKernel(ard_num_dims=len(cat), active_dims=cat)
    if cont:
        kernel = get_covar_module_with_dim_scaled_prior(ard_num_dims=len(cont),
                                                        active_dims=cont) * kernel
    return kernel


def fit_multitask(X: Any, Y: Any, sources: Sequence[tuple[Any, Any]], names: Sequence[str],
                  M: int, cat_dims: Sequence[int] = ()) -> Fitted:
    """Fit the model of one proposal.

    Args:
        X: ``(n, d)`` the new study's model inputs; Y: ``(n, m)`` its outcomes
            (maximisation form, objectives first; :func:`neg_log` applied to the
            :func:`log_columns`).
        sources: Per source in use, ``(Xs (k, d), Ys (k, M))``: its trials' inputs
            and objective values in the same form (NaN where it did not observe one).
        names: Column names of ``Y`` (keys of the recorded hyperparameters).
        M: Number of objectives (columns after them, constraint outputs, get no
            sources).
        cat_dims: Columns of ``X`` holding a categorical's index: a categorical kernel
            there (:func:`_data_kernel`), as the single-task models' mixed kernel does.

    Returns:
        One model per column of ``Y``, queried as a ``ModelListGP`` (the new study's
        task's outputs).
    """
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import ModelListGP, MultiTaskGP, SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    models: list[Any] = []
    states: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in range(Y.shape[-1]):
            y = Y[:, j:j + 1]
            blocks = [(Xs[ok], Ys[ok, j:j + 1]) for Xs, Ys in sources if j < M
                      for ok in [torch.isfinite(Ys[:, j])] if bool(ok.any())]
            if blocks:
                # sources are tasks 0..k-1, the new study the last (see the module)
                new = len(blocks)
                task = [torch.full((len(b[0]), 1), float(i), dtype=X.dtype)
                        for i, b in enumerate(blocks)]
                task.append(torch.full((len(X), 1), float(new), dtype=X.dtype))
                Xall = torch.cat([torch.cat([*(b[0] for b in blocks), X]), torch.cat(task)],
                                 dim=-1)
                yall = torch.cat([*(b[1] for b in blocks), y])
                model = MultiTaskGP(Xall, yall, task_feature=-1, output_tasks=[new],
                                    covar_module=_data_kernel(X.shape[-1], cat_dims),
                                    outcome_transform=Standardize(m=1))
            else:
                model = SingleTaskGP(X, y, covar_module=_data_kernel(X.shape[-1], cat_dims),
                                     outcome_transform=Standardize(m=1))
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            model.eval()
            models.append(model)
            states[names[j]] = param_state(model)
    out = Fitted(models, None, states)
    out.model = models[0] if len(models) == 1 else ModelListGP(*models)
    return out
