#!/usr/bin/env python3
"""Text that is not UTF-8, or holds control bytes, from a capture or a file name.

An NVMe-oF Connect's NQN is bytes from the wire, and a Linux file name is any
bytes: `nvme --json` and `analyze --json` stopped with exit 1 and nlohmann's
"type_error.316 invalid UTF-8 byte" (no report written), and `nvme`'s text
report wrote the NQN's bytes raw, so a capture could send control sequences to
the reader's terminal. Now JSON carries such a byte as U+FFFD, as tshark shows
the field, and the text report shows bytes that are not printable ASCII as \\xNN.
Fixture: tests/pcaps/derived/rxe_nvme_nqn_not_utf8.pcap (make_nqn_fixture.py).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(pcaps, "derived", "rxe_nvme_nqn_not_utf8.pcap")
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        failures.append(name)


def run(*args):
    return subprocess.run([rdmadiag, *args], capture_output=True)


if not shutil.which("tshark"):
    print("tshark not installed")
    sys.exit(77)

# tshark's own decode of the Connect data: the NQN as it shows it (U+FFFD for the byte that is not UTF-8).
fields = subprocess.run(["tshark", "-r", FIXTURE, "-o", "nvme-rdma.subsystem_ports:4420", "-T", "fields",
                         "-e", "nvme.fabrics.cmd.connect.data.subnqn"], capture_output=True, check=True).stdout
want = {line for line in fields.decode("utf-8").split("\n") if line}
check("tshark decodes the Connects' subsystem NQN", len(want) == 1 and "\ufffd\x1b[2J" in next(iter(want), ""),
      repr(want))

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "nvme.json").encode()
    r = subprocess.run([rdmadiag.encode(), b"nvme", b"--json", out, FIXTURE.encode()], capture_output=True)
    check("nvme --json: exit 0", r.returncode == 0, r.stderr.decode("utf-8", "replace").strip())
    try:
        report = json.load(open(out, encoding="utf-8"))
    except (OSError, ValueError) as e:
        report = {}
        check("nvme --json: valid JSON", False, str(e))
    got = {q["subnqn"] for q in report.get("queues", []) if "subnqn" in q}
    check("nvme --json: each queue's subnqn is tshark's", got == want and len(got) == 1, repr(got))

    text = run("nvme", FIXTURE).stdout
    controls = sorted({b for b in text if b < 0x20 and b not in (0x0A, 0x09)} | {b for b in text if b >= 0x7F})
    check("nvme text: no control or non-ASCII byte", not controls, str(controls))
    check("nvme text: the NQN's odd bytes shown as \\xNN", b"nqn.\\xff\\x1b[2J11.org.rdmadiag:lab" in text)

    name = os.path.join(tmp.encode(), b"capture-\xff.pcap")
    shutil.copyfile(FIXTURE, name)
    for option in (b"--json", b"--jsonl"):
        r = subprocess.run([rdmadiag.encode(), b"analyze", option, b"-", name], capture_output=True)
        check("analyze %s with a file name that is not UTF-8: exit 0" % option.decode(), r.returncode == 0,
              r.stderr.decode("utf-8", "replace").strip())
        try:
            lines = r.stdout.decode("utf-8").split("\n") if option == b"--jsonl" else [r.stdout.decode("utf-8")]
            docs = [json.loads(line) for line in lines if line.strip()]
        except ValueError as e:
            docs = []
            check("analyze %s: valid JSON" % option.decode(), False, str(e))
        paths = [d["inputs"][0]["path"] for d in docs if "inputs" in d]
        check("analyze %s: the path with U+FFFD for the odd byte" % option.decode(),
              paths == [name.decode("utf-8", "replace")], repr(paths))

sys.exit(1 if failures else 0)
