"""Objectives and constraints: validation and semantics."""

from __future__ import annotations

import pytest

import ecopt
from ecopt.objective import validate_objectives


def test_objective_validation_messages():
    with pytest.raises(ValueError, match=r"direction must be 'max' or 'min', got 'maximize'"):
        ecopt.Objective("acc", "maximize")
    with pytest.raises(ValueError, match="non-empty string"):
        ecopt.Objective("", "max")
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        ecopt.Objective("acc", "max", threshold=float("inf"))
    with pytest.raises(ValueError, match=r"constraint op must be '<=' or '>=', got '<'"):
        ecopt.Constraint("latency_ms", "<", 50)
    with pytest.raises(ValueError, match=r"duplicates \['acc'\]"):
        validate_objectives([ecopt.Objective("acc"), ecopt.Objective("acc", "min")], [])
    with pytest.raises(ValueError, match="both objective and constraint"):
        validate_objectives([ecopt.Objective("acc")], [ecopt.Constraint("acc", "<=", 1)])
    with pytest.raises(ValueError, match="at least one objective"):
        validate_objectives([], [])


def test_constraint_semantics():
    c = ecopt.Constraint("latency_ms", "<=", 50)
    assert c.satisfied(50) and not c.satisfied(50.1)
    assert c.slack(40) == -10
    g = ecopt.Constraint("acc", ">=", 0.9)
    assert g.satisfied(0.95) and g.slack(0.95) < 0 and g.slack(0.5) > 0
    assert ecopt.Objective.from_dict(ecopt.Objective("e", "min", 3).to_dict()) == \
        ecopt.Objective("e", "min", 3.0)
