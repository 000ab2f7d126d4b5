"""The band a figure measured in the lab must fall in, given perftest<->perftest runs of the same step.

Under TCG emulation on a shared 2-core machine identical runs differ by 2x and more: CI saw
ib<->ib at 4.44 and 8.96 MB/s in one boot (rdmadiag 14.93), four runs of another spread over
4.83 .. 6.79 MB/s, and a third boot had ib<->ib at 13.05 and 14.68 MB/s with rdmadiag's -q 4 -b
client at 6.38 (2.05x below). So the band is a factor of 3 around their range: a unit,
scaling or per-QP summing error (-q 4: 4x; 100x, 1000x) still falls outside.
"""

FACTOR = 3.0


def factor_band(reference, factor=FACTOR):
    """[min / factor, max * factor] of the reference runs."""
    return min(reference) / factor, max(reference) * factor


# What perftest prints when its timer calibration fails (get_cpu_mhz: the cycles-against-time fit
# under emulation is too poor, "Correlation coefficient r^2: 0.857 < 0.9"); it then returns 0 MHz
# and every rate it reports is 0.00: a run that printed it measured no bandwidth.
CLOCK_FAILED = "Correlation coefficient r^2"


def perftest_clock_failed(text):
    """perftest said (in `text`: its stdout and stderr) that its timer calibration failed."""
    return CLOCK_FAILED in text
