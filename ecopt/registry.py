"""One registry: samplers, pruners, meters and executors, found by name in one place.

Each plug-in family (*kind*) maps names to factories, held here as
``"module:attribute"`` strings so that nothing is imported before it is used
(``import ecopt`` stays free of torch, NVML, CodeCarbon and Dask):

============  =========================================================
kind          built-in names
============  =========================================================
samplers      qlognehvi, qnehvi, random, sobol, grid
pruners       none, hyperband, dominance
meters        auto, nvml, amd, apple, jetson, rapl, rapl-zeusd, codecarbon,
              estimate, wallclock
executors     local, processes, dask, spark, ray
============  =========================================================

Third-party packages add their own through entry points, as pytest plugins and
Optuna's integrations do: a package declares, in its ``pyproject.toml``::

    [project.entry-points."ecopt.samplers"]
    tpe-energy = "my_package.sampler:EnergyTPESampler"

and, once it is installed, ``ecopt.Study(..., sampler="tpe-energy")`` finds it
(groups ``ecopt.samplers``, ``ecopt.pruners``, ``ecopt.meters``,
``ecopt.executors``). Entry points are read only for a name that is not
built in, and only the one asked for is loaded. Code can also add a name at
run time with :func:`register`. Everywhere a name is accepted, an instance
is too.

Example:
    >>> from ecopt import registry
    >>> registry.names("meters")
    ['amd', 'apple', 'auto', 'codecarbon', 'estimate', 'jetson', 'nvml', 'rapl', 'rapl-zeusd', 'wallclock']
    >>> meter = registry.create("meters", "estimate", base=ecopt.Meter)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any

__all__ = ["KINDS", "BUILTIN", "group", "register", "names", "factory", "create"]

#: The plug-in families.
KINDS = ("samplers", "pruners", "meters", "executors")

#: Built-in names -> ``"module:attribute"`` of the factory (a class or a function).
BUILTIN: dict[str, dict[str, str]] = {
    "samplers": {
        "qlognehvi": "ecopt.samplers.qnehvi:QLogNEHVISampler",
        "qnehvi": "ecopt.samplers.qnehvi:QNEHVISampler",
        "random": "ecopt.samplers.random:RandomSampler",
        "sobol": "ecopt.samplers.random:SobolSampler",
        "grid": "ecopt.samplers.grid:GridSampler",
    },
    "pruners": {
        "none": "ecopt.pruners.base:NopPruner",
        "hyperband": "ecopt.pruners.hyperband:HyperbandPruner",
        "dominance": "ecopt.pruners.dominance:DominancePruner",
    },
    "meters": {
        "auto": "ecopt.meters.auto:build_auto",
        "nvml": "ecopt.meters.nvml:NVMLMeter",
        "rapl": "ecopt.meters.rapl:RaplMeter",
        "rapl-zeusd": "ecopt.meters.rapl_zeusd:ZeusdRaplMeter",
        "amd": "ecopt.meters.amd:AMDMeter",
        "apple": "ecopt.meters.soc:AppleSiliconMeter",
        "jetson": "ecopt.meters.soc:JetsonMeter",
        "codecarbon": "ecopt.meters.codecarbon:CodeCarbonMeter",
        "estimate": "ecopt.meters.estimate:EstimateMeter",
        "wallclock": "ecopt.meters.base:WallClockMeter",
    },
    "executors": {
        "local": "ecopt.executors.local:LocalExecutor",
        "processes": "ecopt.executors.processes:ProcessExecutor",
        "dask": "ecopt.executors.dask:DaskExecutor",
        "spark": "ecopt.executors.spark:SparkExecutor",
        "ray": "ecopt.executors.ray:RayExecutor",
    },
}

# Names added at run time with register(): kind -> name -> factory or "module:attribute".
_ADDED: dict[str, dict[str, Callable[..., Any] | str]] = {k: {} for k in KINDS}

_SINGULAR = {"samplers": "sampler", "pruners": "pruner", "meters": "meter",
             "executors": "executor"}


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")


def group(kind: str) -> str:
    """The entry-point group of ``kind`` (``"ecopt.samplers"``...)."""
    _check_kind(kind)
    return f"ecopt.{kind}"


def register(kind: str, name: str, target: Callable[..., Any] | str) -> None:
    """Add a name at run time (an entry point does the same for an installed package).

    Args:
        kind: ``"samplers"``, ``"pruners"``, ``"meters"`` or ``"executors"``.
        name: The name users pass (``Study(sampler=name)``).
        target: The factory (a class, or a function returning an instance), or
            its ``"module:attribute"`` path, imported on first use.

    Raises:
        ValueError: for an unknown kind, an empty name, a built-in name (they
            cannot be replaced), or a target that is neither callable nor a path.
    """
    _check_kind(kind)
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {_SINGULAR[kind]} name must be a non-empty string, got {name!r}")
    if name in BUILTIN[kind]:
        raise ValueError(f"{_SINGULAR[kind]} name {name!r} is built in and cannot be replaced; "
                         "register yours under another name")
    if not (callable(target) or (isinstance(target, str) and ":" in target)):
        raise ValueError(f"target must be a class, a function or a 'module:attribute' string, "
                         f"got {target!r}")
    _ADDED[kind][name] = target


def _entry_points(kind: str) -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=group(kind))}


def names(kind: str) -> list[str]:
    """Every name of ``kind`` known here: built in, registered, and installed entry points."""
    _check_kind(kind)
    return sorted(set(BUILTIN[kind]) | set(_ADDED[kind]) | set(_entry_points(kind)))


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def factory(kind: str, name: str) -> Callable[..., Any]:
    """The factory of ``name``: built in first, then registered, then an entry point.

    Raises:
        ValueError: for an unknown name, listing the known ones and how a
            third-party package adds its own.
    """
    _check_kind(kind)
    if isinstance(name, str):
        if name in BUILTIN[kind]:
            return _load(BUILTIN[kind][name])  # type: ignore[no-any-return]
        added = _ADDED[kind].get(name)
        if added is not None:
            return _load(added) if isinstance(added, str) else added
        ep = _entry_points(kind).get(name)
        if ep is not None:
            try:
                return ep.load()  # type: ignore[no-any-return]
            except Exception as exc:
                raise ValueError(
                    f"{_SINGULAR[kind]} {name!r} comes from the entry point {ep.value!r} "
                    f"(group {group(kind)!r}), which failed to load: {type(exc).__name__}: "
                    f"{exc}; reinstall the package that provides it") from exc
    raise ValueError(
        f"unknown {_SINGULAR[kind]} {name!r}; expected one of {names(kind)} or a "
        f"{_SINGULAR[kind].capitalize()} instance. A third-party {_SINGULAR[kind]} is found "
        "by name once its package is installed (pip install <package>) and declares an "
        f"entry point in group {group(kind)!r}")


def create(kind: str, spec: Any, *, base: type, **options: Any) -> Any:
    """An instance from a name (built with ``options``), or ``spec`` itself when it is one.

    Args:
        kind: The family.
        spec: A name, or an instance of ``base`` (passed through; ``options``
            must then be empty).
        base: The family's base class (:class:`~ecopt.Sampler`,
            :class:`~ecopt.pruners.Pruner`, :class:`~ecopt.Meter`,
            :class:`~ecopt.executors.Executor`): what the factory must return.
        options: Passed to the factory.

    Raises:
        ValueError: for an unknown name, options given with an instance, or a
            factory that does not return a ``base``.
    """
    if isinstance(spec, base):
        if options:
            raise ValueError(f"options {sorted(options)} go to the {_SINGULAR[kind]}'s "
                             f"constructor; {type(spec).__name__} is already built (got an "
                             "instance)")
        return spec
    if not isinstance(spec, str):
        raise ValueError(f"{_SINGULAR[kind]} must be a name in {names(kind)} or a "
                         f"{base.__name__} instance, got {spec!r}")
    made = factory(kind, spec)(**options)
    if not isinstance(made, base):
        raise ValueError(f"{_SINGULAR[kind]} {spec!r} built a {type(made).__name__}, not a "
                         f"{base.__module__}.{base.__name__}")
    return made
