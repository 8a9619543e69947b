"""Published values of W9 3.3 (sqrt-dk), 4.2 (masks) and 5.2 (scaling).  Tolerances are half a
unit of the last digit the text printed, unless stated otherwise."""

from __future__ import annotations

from attn_cli.published.types import Check, exact, num, rule

# W9 3.3: d_k -> (std, std_scaled, max_weight_unscaled, max_weight_scaled, grad_unscaled, grad_scaled)
SQRT_DK = {
    4: (2.00, 1.00, 0.49, 0.30, 0.0732, 0.0882),
    16: (4.00, 1.00, 0.73, 0.32, 0.0461, 0.0884),
    64: (8.00, 1.00, 0.87, 0.32, 0.0251, 0.0886),
    256: (15.98, 1.00, 0.93, 0.32, 0.0125, 0.0882),
    1024: (31.97, 1.00, 0.97, 0.32, 0.0067, 0.0887),
}
SQRT_DK_FIELDS = ("std", "std_scaled", "max_weight_unscaled", "max_weight_scaled", "grad_unscaled", "grad_scaled")
SQRT_DK_TOL = (0.005, 0.005, 0.005, 0.005, 0.00005, 0.00005)  # 2 decimals, 2 decimals, ..., 4 decimals

# W9 4.2
MASKS_CAUSAL = [
    [1.0, 0.0, 0.0, 0.0, 0.0],
    [0.05, 0.95, 0.0, 0.0, 0.0],
    [0.13, 0.25, 0.63, 0.0, 0.0],
    [0.01, 0.01, 0.09, 0.89, 0.0],
    [0.01, 0.01, 0.11, 0.3, 0.58],
]
MASKS_ROW_SUMS = [1.0, 0.9999999403953552, 1.0, 1.0, 0.9999998807907104]

# W9 5.2: n -> (entries, memory in bytes as printed, n^2 d operations), with the printed text
SCALING = {
    512: (2.62e05, "1.0 MB", 1.34e08),
    2048: (4.19e06, "16.8 MB", 2.15e09),
    8192: (6.71e07, "268.4 MB", 3.44e10),
    32768: (1.07e09, "4.3 GB", 5.50e11),
    131072: (1.72e10, "68.7 GB", 8.80e12),
}


_DIGITS_3SIG = "printed with 3 significant digits (%.2e): half a unit of the last one"
_MEMORY = "printed with one decimal in MB or GB (1e6, 1e9 bytes): half a unit of that decimal, in bytes"
_DRAWS = "exact only with the text's draws: seed 0, 20000 trials, 10 keys, d_k 4 16 64 256 1024 in that order"


def _half_unit_3sig(value: float) -> float:
    """Half a unit of the last digit of a number printed as ``%.2e``."""
    return 0.005 * 10 ** int(f"{value:.2e}".split("e")[1])


def _scaling_checks() -> list[Check]:
    """Identities, all three: n^2, 4 n^2 bytes and n^2 d are arithmetic on the lengths."""
    checks = []
    for n, (entries, memory, ops) in SCALING.items():
        printed, unit = memory.split()  # '4.3 GB': 4.3e9 bytes, within half a unit of the printed decimal
        scale = {"MB": 1e6, "GB": 1e9}[unit]
        rows = (
            ("entries", entries, _half_unit_3sig(entries), _DIGITS_3SIG),
            ("memory", float(printed) * scale, 0.05 * scale, _MEMORY),
            ("operations", ops, _half_unit_3sig(ops), f"{_DIGITS_3SIG}; d = 512"),
        )
        for what, value, tol, reason in rows:
            checks.append(num(f"w9-scaling.{n}.{what}", "w9-scaling", value, tol, reason, kind="identity"))
            if what == "memory":
                checks[-1].meta["printed"] = memory
    return checks


CHECKS: tuple[Check, ...] = (
    *(
        num(f"w9-sqrt-dk.{d_k}.{name}", "w9-sqrt-dk", value, tol, f"printed to {digits} decimals (±{tol:g}); {_DRAWS}")
        for d_k, values in SQRT_DK.items()
        for name, value, tol, digits in zip(SQRT_DK_FIELDS, values, SQRT_DK_TOL, (2, 2, 2, 2, 4, 4))
    ),
    rule(
        "w9-sqrt-dk-plot.curves",
        "w9-sqrt-dk-plot",
        "unscaled, the largest weight climbs (0.49 to 0.97) and the gradient norm falls "
        "(0.073 to 0.007) as d_k grows; scaled, they stay at about 0.32 and 0.088",
        "the figure's curves, checked by sqrt_dk.curves_as_described: unscaled curves strictly "
        "monotone in d_k; scaled max weight within 0.03 and gradient within 0.001 across d_k",
    ),
    num("w9-masks.causal_weights", "w9-masks", MASKS_CAUSAL, 0.005, "printed with numpy .round(2) (±0.005)"),
    # identity: softmax rows sum to 1 by construction; the tolerance admits float32 rounding
    num(
        "w9-masks.row_sums",
        "w9-masks",
        MASKS_ROW_SUMS,
        2e-7,
        "float32 sums printed in full: each is 1 to within a few units of float32 rounding "
        "(2**-23 ~ 1.2e-7); which rows land exactly on 1.0 depends on the summation order of the build",
        kind="identity",
    ),
    # rules: the causal mask's claim, and its failing case (no mask: the future leaks)
    exact(
        "w9-masks.past_unchanged",
        "w9-masks",
        True,
        "printed True: outputs at 0, 1, 2 unchanged when tokens 3, 4 change (causal mask)",
        kind="rule",
    ),
    exact("w9-masks.changes_without_mask", "w9-masks", True, "printed True: without the mask they change", kind="rule"),
    # the package's masked_softmax ends with masked_fill(~mask, 0.0): its padding weight is 0
    # whatever the scores (identity); the text's own recipe, softmax(masked_fill(pad, -inf)),
    # is the measured counterpart (exp(-inf) must come out exactly 0 in this build)
    exact(
        "w9-masks.padding_weight",
        "w9-masks",
        0.0,
        "printed 0.0: the package's masked_softmax sets masked weights to 0 with masked_fill",
        kind="identity",
    ),
    exact(
        "w9-masks.padding_weight.text_recipe",
        "w9-masks",
        0.0,
        "printed 0.0: the text's softmax(scores.masked_fill(pad, -inf)); exp(-inf) is exactly 0",
    ),
    *_scaling_checks(),
)
