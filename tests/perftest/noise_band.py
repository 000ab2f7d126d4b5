"""The band a figure measured in the lab must fall in, given perftest<->perftest runs of the same step.

Under TCG emulation on a shared 2-core machine two identical ib<->ib runs differ by up to 2x
(CI saw 4.44 and 8.96 MB/s in one boot, and 4.83 .. 6.79 MB/s across four runs of another), so a
band tighter than a factor of 2 around their range fails on noise. A unit, scaling or
per-QP summing error (4x, 100x, 1000x) still falls outside.
"""

FACTOR = 2.0


def factor_band(reference, factor=FACTOR):
    """[min / factor, max * factor] of the reference runs."""
    return min(reference) / factor, max(reference) * factor
