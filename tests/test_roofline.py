"""The roofline measurement: every ceiling it reports is a positive rate, in the units the table says."""

from __future__ import annotations

import pytest

from benchmarks import roofline

pytestmark = pytest.mark.core


def test_peaks_and_bandwidth_are_measured_rates():
    fp32 = roofline.matmul_gflops("fp32", n=128, repeats=2)
    bf16 = roofline.matmul_gflops("bf16", n=128, repeats=2)
    int8 = roofline.matmul_gflops("int8", n=128, repeats=2)
    assert fp32 is not None and fp32 > 0.1 and bf16 is not None and bf16 > 0.1
    assert int8 is None or int8 > 0.1  # None where this torch has no CPU int8 matmul
    bw = roofline.bandwidth_gbs(repeats=2, n_bytes=8 * 1024 * 1024)
    assert bw["copy"] > 0.1 and bw["read"] > 0.1
    row = roofline.rows([{"threads": 1, "gflops": {"fp32": fp32, "bf16": bf16, "int8": int8},
                          "bandwidth_gbs": bw}])[0]
    assert len(row) == len(roofline.HEADERS) and row[1] == fp32
