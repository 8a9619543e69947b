"""The kernel's cross-entropy exp (``expf_libm`` in kernel_math.h) gives glibc's expf bits.

The kernel used to call libm's ``expf`` once per logit; it now computes the same function
(glibc 2.28+'s algorithm as its FMA build runs it) branch-free, so that the loop vectorises.
Its arguments are logit minus the row's maximum, so <= 0: these tests compare it with this
host's libm over a dense sample of every non-positive float, every float around the
under-flow thresholds and the ones the loss actually meets.  The whole range (2^31 values) was
checked once by hand, with no mismatch, in each variant.

libm's result is the reference only where it is that algorithm: glibc 2.28 to 2.40 on an
x86-64 CPU with FMA (glibc's ifunc then runs its FMA build).  Elsewhere the tests skip and say
why; the kernel's numbers do not depend on that libm any more.
"""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest

from attn_cli.core import numerics
from attn_cli.core.copy_fast import kernel

HOST = numerics.cpu_flags()
# glibc's expf is this algorithm from 2.28 (checked here in full on 2.36); beyond 2.40 it may be
# another (glibc has been taking correctly rounded float functions from CORE-MATH): skipped there
GLIBC_KNOWN = (2, 40)


def _glibc() -> tuple[int, int]:
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
        major, minor = version.split(".")[:2]
        return int(major), int(minor)
    except (ValueError, OSError, AttributeError):
        return (0, 0)


pytestmark = [
    pytest.mark.skipif(kernel._compiler() is None, reason="no C compiler"),
    pytest.mark.skipif(
        not (
            platform.machine() in ("x86_64", "AMD64") and {"fma", "avx2"} <= HOST and (2, 28) <= _glibc() <= GLIBC_KNOWN
        ),
        reason=f"this host's libm is not a glibc (2.28 to {GLIBC_KNOWN[0]}.{GLIBC_KNOWN[1]}) whose expf is that "
        "algorithm in its FMA build: no reference for the kernel's expf here",
    ),
]


def _variants():
    return [v for v in ("avx512", "avx2") if kernel.VARIANT_NEEDS[v] <= HOST]


def _pair(lib, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.ascontiguousarray(x, dtype=np.float32)
    k, m = np.empty_like(x), np.empty_like(x)
    lib.expf_pair(x.ctypes.data, k.ctypes.data, m.ctypes.data, x.size)
    return k, m


def _nonpositive_floats(stride: int) -> np.ndarray:
    """Every ``stride``-th bit pattern with the sign bit set: -0 down to -inf and the NaNs."""
    bits = np.arange(0x80000000, 0x100000000, stride, dtype=np.uint64).astype(np.uint32)
    return bits.view(np.float32)


def _around(value: float, n: int = 1 << 16) -> np.ndarray:
    """The n floats on each side of ``value`` (bit patterns)."""
    b = int(np.float32(value).view(np.uint32))
    return np.arange(b - n, b + n, dtype=np.uint32).view(np.float32)


def _mismatches(k: np.ndarray, m: np.ndarray) -> int:
    both_nan = np.isnan(k) & np.isnan(m)
    return int(np.count_nonzero((k.view(np.uint32) != m.view(np.uint32)) & ~both_nan))


@pytest.mark.parametrize("variant", _variants())
def test_expf_equals_libm_on_a_dense_sample(variant):
    lib = kernel.load_variant(variant)
    x = np.concatenate(
        [
            _nonpositive_floats(127),  # 17 million arguments spread over the whole range
            _around(float.fromhex("-0x1.9d1d9ep6")),
            _around(float.fromhex("-0x1.9fe368p6")),  # libm's two under-flow thresholds
            _around(-88.0),
            _around(-87.0),
            _around(-1.0),
            _around(-(2.0**-24)),  # its fast path's edge
            np.float32([0.0, -0.0, -np.inf, np.nan]),
        ]
    )
    k, m = _pair(lib, x)
    assert _mismatches(k, m) == 0


@pytest.mark.parametrize("variant", _variants())
def test_expf_on_the_losss_arguments(variant):
    """Logits minus their row's maximum, as training meets them (wide and narrow rows)."""
    lib = kernel.load_variant(variant)
    rng = np.random.default_rng(0)
    logits = np.concatenate([rng.normal(0, s, (20000, 12)) for s in (0.1, 1.0, 5.0, 30.0)]).astype(np.float32)
    x = (logits - logits.max(axis=1, keepdims=True)).ravel()
    k, m = _pair(lib, x)
    assert _mismatches(k, m) == 0


def test_the_comparison_sees_a_one_ulp_difference():
    """The check can fail: a result one ulp off is counted."""
    lib = kernel.load_variant(_variants()[0])
    x = _nonpositive_floats(4099)
    x = x[np.isfinite(x) & (x > -80)]
    k, m = _pair(lib, x)
    assert _mismatches(k, m) == 0
    off = k.view(np.uint32).copy()
    off[len(off) // 2] += 1
    assert _mismatches(off.view(np.float32), m) == 1
