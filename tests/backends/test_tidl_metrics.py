"""backends/tidl/metrics.py: the figures compare and check-fusion print."""

import math

import numpy as np
import pytest

from tidlx.backends.tidl.metrics import max_abs_err, saturated_pct, sqnr_db


def test_sqnr_of_a_known_noise():
    ref = np.array([3.0, 4.0], np.float32)            # signal 25
    assert sqnr_db(ref, ref + np.array([0.5, 0.0])) == pytest.approx(10 * math.log10(25 / 0.25))
    assert sqnr_db(ref, ref) == math.inf
    assert sqnr_db(np.zeros(3), np.ones(3)) == -math.inf
    assert math.isnan(sqnr_db(np.zeros(0), np.zeros(0)))
    assert math.isnan(sqnr_db(np.array([np.nan]), np.array([0.0])))


def test_max_abs_err_and_saturation():
    assert max_abs_err([1.0, -2.0], [1.5, 0.0]) == 2.0
    assert saturated_pct(np.array([-128, 0, 127, 5], np.int8), -128, 127) == 50.0
    assert saturated_pct(np.array([0, 6, 3], np.uint8), 0, 6) == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="shapes differ"):
        sqnr_db(np.zeros(2), np.zeros(3))
