#!/usr/bin/env python3
"""Records longer than the file's snap length are read whole, as tshark reads them.

A pcap file header whose snap length is smaller than some of its records (a
writer that put a wrong value there, an edited header) made libpcap cut those
records to the snap length, silently: rdmadiag then called 871 of the 938
ICRCs of rxe_write_bw_loss.pcap unverifiable. In pcapng, libpcap stopped at the
first such packet ("bigger than snaplen", a damaged capture, 19 of 984). tshark
reads every byte of both. The captures are made here from a bundled one: only
the snap length in the header (pcap) or the interface block (pcapng, editcap)
changes, so the analysis must not (any -j), and tshark's captured lengths are
the record lengths the file holds.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
SOURCE = os.path.join(pcaps, "rxe_write_bw_loss.pcap")
SNAPLEN = 128
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        failures.append(name)


def analysis(path, jobs):
    out = subprocess.run([rdmadiag, "analyze", "-j", str(jobs), "--json", "-", path], capture_output=True, text=True)
    report = json.loads(out.stdout) if out.stdout else {}
    return out.returncode, report


def tshark_caplens(path):
    out = subprocess.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.cap_len"], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


if not shutil.which("tshark") or not shutil.which("editcap"):
    print("tshark/editcap not installed")
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    data = bytearray(open(SOURCE, "rb").read())
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4, "little-endian microsecond pcap expected"
    struct.pack_into("<I", data, 16, SNAPLEN)
    short_pcap = os.path.join(tmp, "snap128.pcap")
    open(short_pcap, "wb").write(data)
    short_pcapng = os.path.join(tmp, "snap128.pcapng")
    subprocess.run(["editcap", "-F", "pcapng", short_pcap, short_pcapng], check=True)

    want = tshark_caplens(SOURCE)
    rc, base = analysis(SOURCE, 1)
    base.pop("inputs", None)
    check("the source reads cleanly", rc == 0 and base.get("summary", {}).get("packets") == len(want))
    for path in (short_pcap, short_pcapng):
        name = os.path.basename(path)
        got = tshark_caplens(path)
        check(name + ": tshark reads every record whole", got == want and max(got) > SNAPLEN,
              "%d records, longest %d" % (len(got), max(got) if got else 0))
        for jobs in (1, 2):
            rc, rep = analysis(path, jobs)
            inputs = rep.pop("inputs", [{}])
            check("%s -j %d: complete, exit 0" % (name, jobs), rc == 0 and inputs[0].get("complete") is True,
                  "exit %d, %s" % (rc, inputs[0].get("stop_reason", "")))
            check("%s -j %d: the same analysis as the source's" % (name, jobs), rep == base,
                  "ICRC %s" % json.dumps(rep.get("summary", {}).get("icrc")))

sys.exit(1 if failures else 0)
