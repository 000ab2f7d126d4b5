"""Reading a lab run's wire capture with tshark (the lab checks' independent view).

tests/lab/run --mark-steps puts three UDP datagrams "rdmadiag-lab step N" to port 9 on the
wire before each step's command, so a checker can cut the capture into steps.
"""
import subprocess

MARKER = "rdmadiag-lab step "


def tshark(pcap, display_filter, fields):
    """Rows of the fields (tab-separated by tshark) of the frames the filter keeps."""
    cmd = ["tshark", "-r", pcap, "-Y", display_filter, "-T", "fields", "-E", "separator=\t"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def step_markers(pcap):
    """{step: (frame number, epoch time) of its first marker datagram}."""
    starts = {}
    for number, when, payload in tshark(pcap, "udp.dstport == 9", ["frame.number", "frame.time_epoch", "data.data"]):
        text = bytes.fromhex(payload.replace(":", "")).decode("ascii", "replace")
        if text.startswith(MARKER):
            starts.setdefault(int(text[len(MARKER):].split()[0]), (int(number), float(when)))
    return starts
