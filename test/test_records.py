"""records.changed: a frozen record with fields changed, as dataclasses.replace gives it."""

from dataclasses import dataclass, FrozenInstanceError, replace

import numpy as np
import pytest

from quasistatic_drake.records import changed


@dataclass(frozen=True)
class Row:
    phi: np.ndarray
    name: str = 'a'


def test_changed_equals_replace_and_leaves_the_original():
    row = Row(np.array([1.0, 2.0]))
    new = changed(row, phi=np.array([3.0]), name='b')
    expected = replace(row, phi=np.array([3.0]), name='b')
    assert type(new) is Row and new.name == expected.name
    np.testing.assert_array_equal(new.phi, expected.phi)
    np.testing.assert_array_equal(row.phi, [1.0, 2.0])
    assert row.name == 'a'
    with pytest.raises(FrozenInstanceError):
        new.name = 'c'


def test_an_unknown_field_is_refused_by_name():
    with pytest.raises(TypeError, match=r"Row has no field \['psi'\]"):
        changed(Row(np.zeros(1)), psi=1.0)
