"""The one accepted exception to "no anomalies on a loss-free lab run".

rxe's requester retransmission timer fires even without loss on the emulated
(slow) lab VMs (docs/lab.md, "Limits"): the ACK is on its way but arrives after
the timer, so the requester resends and the analysis reports a retransmission
whose cause is ack_lost (or timeout, or no_answer_captured before any answer); for a READ the response is the answer,
and a re-issue after an intact, in-order response says
read_response_lost_after_capture (held up after the capture point). Such an anomaly is accepted only as far
as the kernel itself counted requester retries (hw_counters/completer_retry_err
on both VMs); any other anomaly, or more timer resends than the kernel's count,
is a failure. Used by tests/lab/check and tests/capture/lab_check.py.
"""
import os

TIMER_CAUSES = ("ack_lost", "timeout", "read_response_lost_after_capture", "no_answer_captured")


def kernel_retries(run_dir):
    """completer_retry_err summed over both VMs' counters.tsv (0 if absent)."""
    n = 0
    for role in ("server", "client"):
        path = os.path.join(run_dir, role, "counters.tsv")
        if not os.path.exists(path):
            continue
        seen = set()
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("\t")
                if key.endswith("/hw_counters/completer_retry_err") and key not in seen:
                    seen.add(key)  # the dump may list a file twice
                    n += int(value)
    return n


def split_anomalies(anomalies):
    """(timer retransmissions, everything else)."""
    timer = [a for a in anomalies if a.get("kind") == "retransmission" and a.get("cause") in TIMER_CAUSES]
    others = [a for a in anomalies if a not in timer]
    return timer, others
