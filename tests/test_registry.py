"""One registry: plug-ins by name, built in, registered at run time, or from an installed
package's entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ecopt
from ecopt import registry
from ecopt.executors import Executor, LocalExecutor, get_executor
from ecopt.meters import EstimateMeter, Meter, get_meter
from ecopt.pruners import Pruner, get_pruner
from ecopt.samplers import RandomSampler, Sampler, get_sampler

SPACE = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
OBJS = [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")]


def test_every_builtin_name_builds_its_kind():
    bases = {"samplers": Sampler, "pruners": Pruner, "meters": Meter, "executors": Executor}
    for kind, base in bases.items():
        assert set(registry.BUILTIN[kind]) <= set(registry.names(kind))
        for name in registry.BUILTIN[kind]:
            if name in ("nvml", "amd", "apple", "jetson", "rapl", "rapl-zeusd", "codecarbon",
                        "dask", "ray", "processes", "auto"):
                continue  # hardware / cluster-backed: resolved here, built by their own tests
            made = registry.create(kind, name, base=base)
            assert isinstance(made, base)
            if isinstance(made, (Meter, Executor)):
                made.close()
    for kind in bases:  # every built-in factory at least resolves (an import, not a build)
        for name in registry.BUILTIN[kind]:
            assert callable(registry.factory(kind, name))


def test_the_family_functions_go_through_the_registry_and_pass_instances_through():
    s = RandomSampler(seed=3)
    assert get_sampler(s) is s and isinstance(get_sampler("sobol"), Sampler)
    m = EstimateMeter()
    assert get_meter(m) is m and isinstance(get_meter("wallclock"), Meter)
    assert get_pruner(None) is None and get_pruner("hyperband").name == "hyperband"
    ex = LocalExecutor()
    assert get_executor(ex) is ex and get_executor("local").name == "local"
    with pytest.raises(ValueError, match=r"options \['n_sobol'\] go to the sampler's constructor"):
        registry.create("samplers", s, base=Sampler, n_sobol=2)


def test_unknown_names_list_the_known_ones_and_say_how_to_add_one():
    for fn, kind in ((get_sampler, "sampler"), (get_meter, "meter"), (get_pruner, "pruner"),
                     (get_executor, "executor")):
        with pytest.raises(ValueError) as e:
            fn("no-such-plugin")
        msg = str(e.value)
        assert msg.startswith(f"unknown {kind} 'no-such-plugin'; expected one of [")
        assert f"entry point in group 'ecopt.{kind}s'" in msg and "pip install" in msg
    with pytest.raises(ValueError, match="kind must be one of"):
        registry.names("reporters")


def test_register_adds_a_name_at_run_time_and_refuses_builtins():
    class Corner(RandomSampler):
        name = "corner"

    registry.register("samplers", "corner-test", Corner)
    try:
        study = ecopt.Study(SPACE, OBJS, sampler="corner-test", meter="wallclock")
        assert isinstance(study.sampler, Corner) and "corner-test" in registry.names("samplers")
    finally:
        registry._ADDED["samplers"].pop("corner-test")
    with pytest.raises(ValueError, match="'random' is built in and cannot be replaced"):
        registry.register("samplers", "random", Corner)
    with pytest.raises(ValueError, match="target must be"):
        registry.register("meters", "x", 3)  # type: ignore[arg-type]
    registry.register("meters", "str-path-test", "ecopt.meters.base:WallClockMeter")
    try:
        assert isinstance(get_meter("str-path-test"), Meter)
    finally:
        registry._ADDED["meters"].pop("str-path-test")


def test_a_factory_that_builds_the_wrong_kind_is_refused():
    registry.register("meters", "not-a-meter-test", dict)
    try:
        with pytest.raises(ValueError, match="built a dict, not a ecopt.meters.base.Meter"):
            get_meter("not-a-meter-test")
    finally:
        registry._ADDED["meters"].pop("not-a-meter-test")


TINY = textwrap.dedent('''
    """A third-party sampler: the cell centres of a 4 x 4 grid, in order."""
    from ecopt.samplers import Proposal, Sampler


    class TinySampler(Sampler):
        name = "tiny"

        def __init__(self, seed=None, cells=4):
            super().__init__(seed)
            self.cells = cells

        def propose(self, space, records, pending, n):
            start = len(records) + len(pending)
            out = []
            for k in range(start, start + n):
                u = [((k // self.cells ** j) % self.cells + 0.5) / self.cells
                     for j in range(space.dim)]
                out.append(Proposal(space.decode(u), self.name, {"cell": k}))
            return out
''')

PYPROJECT = textwrap.dedent('''
    [build-system]
    requires = ["setuptools>=61"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "ecopt-tiny-sampler"
    version = "0.1.0"

    [project.entry-points."ecopt.samplers"]
    tiny = "tiny_sampler:TinySampler"

    [tool.setuptools]
    py-modules = ["tiny_sampler"]
''')

USE = textwrap.dedent('''
    import json, sys
    import ecopt
    space = ecopt.SearchSpace({"x": ecopt.Float(0, 1), "y": ecopt.Float(0, 1)})
    study = ecopt.Study(space, [ecopt.Objective("f1", "min"), ecopt.Objective("f2", "min")],
                        storage=sys.argv[1], sampler="tiny", meter="wallclock")
    recs = study.optimize(lambda t: {"f1": t["x"], "f2": 1 - t["x"] + t["y"]}, n_trials=3,
                          show_progress=False)
    study.close()
    print(json.dumps({"names": ecopt.registry.names("samplers"),
                      "proposed_by": [r.proposed_by for r in recs],
                      "params": [r.params for r in recs],
                      "spec_sampler": json.load(open(sys.argv[1] + "/study.json"))["sampler"]}))
''')


@pytest.mark.slow
def test_a_sampler_from_an_installed_package_is_used_by_name(tmp_path: Path):
    pkg = tmp_path / "tiny-pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "tiny_sampler.py").write_text(TINY)
    site = tmp_path / "site"
    # pip itself installs it (metadata and entry points as any package has them) into a folder
    # that the study's process then has on its path: nothing is fetched.
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--no-index", "--no-build-isolation", "--target", str(site), str(pkg)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    assert list(site.glob("ecopt_tiny_sampler-0.1.0.dist-info/entry_points.txt"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    out = subprocess.run([sys.executable, "-c", USE, str(tmp_path / "study")], env=env,
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "tiny" in got["names"] and {"random", "qlognehvi"} <= set(got["names"])
    assert got["proposed_by"] == ["tiny"] * 3
    assert got["params"][0] == {"x": 0.125, "y": 0.125} and got["params"][1]["x"] == 0.375
    assert got["spec_sampler"]["name"] == "tiny"
    # Without the package on the path the name is unknown, and the error says how to add it.
    bad = subprocess.run([sys.executable, "-c", USE, str(tmp_path / "study2")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert bad.returncode != 0 and "unknown sampler 'tiny'" in bad.stderr
    assert "entry point in group 'ecopt.samplers'" in bad.stderr
