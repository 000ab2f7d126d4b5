#!/usr/bin/env python3
"""Self-test of the one accepted exception to "no anomalies on a loss-free lab
run" (tests/lab/kernel_retries.py), no lab needed: the READ re-issue CI met in
lab_capture_rxe_read (stop 27) is accepted as a timer resend and counted
against the kernel's completer_retry_err; other anomalies are not.

  kernel_retries_selftest.py
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_retries import kernel_retries, split_anomalies  # noqa: E402

# As CI's report printed it (stop 27, lab_capture_rxe_read), text shortened.
READ_REISSUE = {"kind": "retransmission", "severity": "warning", "frame": 109, "flow": 0, "dest_qp": 18,
                "psn": 6797579, "expected_psn": 6797580, "cause": "read_response_lost_after_capture",
                "count": 1, "related_frames": []}
LOST = dict(READ_REISSUE, cause="read_response_lost")
GAP = {"kind": "psn_gap", "severity": "error", "frame": 7}

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


timer, others = split_anomalies([READ_REISSUE, LOST, GAP])
expect(timer == [READ_REISSUE], f"timer resends {timer}")
expect(others == [LOST, GAP], f"others {others}")
expect(split_anomalies([{"kind": "retransmission", "cause": "ack_lost"}])[0], "ack_lost not a timer resend")
expect(not split_anomalies([{"kind": "out_of_order", "cause": "timeout"}])[0], "a non-resend taken as timer")

with tempfile.TemporaryDirectory() as d:
    expect(kernel_retries(d) == 0, "no counters should count 0")
    for role, n in (("server", 0), ("client", 2)):
        os.makedirs(os.path.join(d, role))
        with open(os.path.join(d, role, "counters.tsv"), "w") as f:
            f.write(f"rxe0/ports/1/hw_counters/completer_retry_err\t{n}\n")
            f.write(f"rxe0/ports/1/hw_counters/completer_retry_err\t{n}\n")  # listed twice
            f.write("rxe0/ports/1/hw_counters/duplicate_request\t9\n")
    expect(kernel_retries(d) == 2, f"kernel retries {kernel_retries(d)}, want 2")

if failures:
    print("FAIL: " + "; ".join(failures))
    sys.exit(1)
print("ok: READ re-issue after an intact response is a timer resend bounded by completer_retry_err")
