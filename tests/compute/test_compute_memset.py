"""Memset with a constant given by value (docs/spec/BIR-JSON.md "Execution rules": a JSON number with
a fraction or exponent is a value cast to outs[0]'s dtype), as NKI's memset writes it."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from _compute import Out, run1


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8e4",
                                   "float8_e4m3fn", "float8e5", "int32", "uint8", "int16"])
@pytest.mark.parametrize("value", [0.2, -1.5, 2.0, 1e-3, 3.5e5])
def test_memset_by_value_casts_to_the_output_dtype(dtype, value):
    (y,) = run1("Memset", [], [Out("y", (4, 8), dtype)], constant=value)
    want = ref.cast(np.full((4, 8), np.float32(value), np.float32), dtype)
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


def test_memset_integer_constant_is_still_raw_bits():
    (y,) = run1("Memset", [], [Out("y", (2, 4), "float32")], constant=0x3F800000)
    np.testing.assert_array_equal(y, 1.0)
    (y,) = run1("Memset", [], [Out("y", (2, 4), "float32")], constant=2.0)
    np.testing.assert_array_equal(y, 2.0)


def test_memset_value_into_packed_dtype_only_zero():
    (y,) = run1("Memset", [], [Out("y", (2, 4), "float8_e4m3fn_x4")], constant=0.0)
    assert (np.asarray(y).view(np.uint8) == 0).all()
    with pytest.raises(birsim.SimulationError, match="only takes the value 0"):
        run1("Memset", [], [Out("y", (2, 4), "float8_e4m3fn_x4")], constant=1.5)
