#!/usr/bin/env python3
"""Self-test of tests/lab/run's rule for Debian perftest's closing-handshake
race on siw (no lab): the server's stderr of a real failed lab_siw step
(session 10, step 2 ib_read_lat -R; the same three lines as CI's step 4
ib_write_bw failure) is tolerated only with the client's exit 0; any other
failure still fails the run.

  run_selftest.py
"""
import importlib.machinery
import importlib.util
import os
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("lab_run", os.path.join(here, "run"))
spec = importlib.util.spec_from_loader("lab_run", loader)
lab_run = importlib.util.module_from_spec(spec)
loader.exec_module(lab_run)

# As Debian's ib_read_lat printed it (server/step2.stderr).
RACE = ("Device not recognized to implement inline feature. Disabling it\n"
        " Bad wc status 2\n Unable to write from socket/rdma_cm\n"
        "Failed to close connection between server and client\n")
# A failure inside the test itself (perftest's run_iter_lat on a broken QP).
REAL = ("Device not recognized to implement inline feature. Disabling it\n"
        "Completion with error at client\nFailed status 12: wr_id 0 syndrom 0x81\n"
        "Failed to complete run_iter_lat\n")

failures = []
with tempfile.TemporaryDirectory() as out:
    os.mkdir(os.path.join(out, "server"))

    def case(what, stderr, server_rc, client_rc, tolerated, mode="siw"):
        with open(os.path.join(out, "server", "step1.stderr"), "w") as f:
            f.write(stderr)
        got = lab_run.siw_close_race(mode, out, 1, {"server_rc": server_rc, "client_rc": client_rc})
        ok = bool(got) == tolerated
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {got}")
        if not ok:
            failures.append(what)

    case("close race, client exit 0", RACE, 1, 0, True)
    case("close race, siw built with MPA CRC", RACE, 1, 0, True, mode="siw-crc")
    case("the same lines from rxe", RACE, 1, 0, False, mode="rxe")
    case("close race, capture output after it", RACE + "rdmadiag capture: 812 packets\n", 1, 0, True)
    case("close race but the client failed too", RACE, 1, 1, False)
    case("close race but the client never finished", RACE, 1, None, False)
    case("a real completion error", REAL, 1, 0, False)
    case("step timeout", RACE, 124, 0, False)
    case("only the last line", "Failed to close connection between server and client\n", 1, 0, False)
sys.exit(1 if failures else 0)
