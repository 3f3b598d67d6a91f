"""Re-opening a directory with another spec: the error names each difference."""

from __future__ import annotations

import pytest

import ecopt
from ecopt._spec import core_spec, differences
from ecopt.errors import SpecMismatchError


def _spec(lr_low: float = 1e-4, objs: tuple[str, ...] = ("f1", "f2"), direction: str = "min",
          constraints: tuple[ecopt.Constraint, ...] = ()) -> tuple:
    space = ecopt.SearchSpace({"lr": ecopt.Float(lr_low, 0.1, log=True), "depth": ecopt.Int(1, 4)})
    return space, [ecopt.Objective(n, direction) for n in objs], list(constraints)


def test_the_error_lists_each_change_with_stored_and_given_values(run_dir):
    ecopt.Study(*_spec(), storage=run_dir, sampler="random", meter="wallclock").close()
    with pytest.raises(SpecMismatchError) as e:
        ecopt.Study(*_spec(lr_low=1e-3, objs=("f1",)), storage=run_dir, sampler="random",
                    meter="wallclock")
    msg = str(e.value)
    assert ("parameter 'lr': stored Float(low=0.0001, high=0.1, log=True), given "
            "Float(low=0.001, high=0.1, log=True)") in msg
    assert "objective 'f2' only in the stored study" in msg
    assert "different space, objectives" in msg and "overwrite=True" in msg
    assert "depth" not in msg  # unchanged parameters are not listed


def test_differences_cover_directions_constraints_and_new_names():
    a = core_spec(*_spec(constraints=(ecopt.Constraint("loss", "<=", 1.0),)))
    b = core_spec(*_spec(direction="max", constraints=(ecopt.Constraint("loss", "<=", 2.0),)))
    b["space"]["width"] = {"type": "int", "low": 8, "high": 64, "log": False, "step": 1}
    got = differences(a, b)
    assert "parameter 'width' only in the given space" in got
    assert ("objective 'f1': stored Objective(name='f1', direction='min', threshold=None), "
            "given Objective(name='f1', direction='max', threshold=None)") in got
    assert ("constraint 'loss': stored Constraint(name='loss', op='<=', bound=1.0), given "
            "Constraint(name='loss', op='<=', bound=2.0)") in got
    assert differences(a, a) == []
    swapped = core_spec(*_spec(objs=("f2", "f1")))
    assert differences(core_spec(*_spec()), swapped) == [
        "objectives in another order: stored ['f1', 'f2'], given ['f2', 'f1']"]
