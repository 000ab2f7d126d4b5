#!/usr/bin/env bash
# The MPI control plane of rdmadiag-mesh on this host (no RDMA device needed: --control-only
# measures nothing): 4 ranks under mpirun must all pair up and report; then with rank 3 hung
# (--debug-stall-rank) the run must still end, the 3 pairs with rank 3 must be timeouts and
# the report must name rank 3 as the bad host and no link; and with rank 2 alive but 12 s
# late (6 round timeouts: a healthy host still waiting out a hung partner), every pair must
# still be ok. Exit 77 (skip) without mpirun.
# usage: mpi_control_check.sh RDMADIAG_MESH SCHEMA OUTDIR [ok|hung]
#   ok: only the 4-rank run; hung: all three (the default).
set -euo pipefail
mesh=$1 schema=$2 out=$3 part=${4:-hung}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)"; exit 77; }
mkdir -p "$out"
run=(mpirun -np 4 --oversubscribe)
[ "$(id -u)" -eq 0 ] && run+=(--allow-run-as-root)
# Loopback TCP between the ranks: no shared-memory or RDMA transport to depend on.
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_pml=ob1

timeout -k 5 60 "${run[@]}" "$mesh" --control-only --round-timeout 5 --json "$out/ok.json" --csv "$out/ok.csv" >"$out/ok.log" 2>&1 || {
  cat "$out/ok.log"; echo "FAIL: control-only run exited non-zero"; exit 1; }
if [ "$part" = ok ]; then
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  "$py" - "$schema" "$out/ok.json" <<'PY'
import json, sys
import jsonschema
ok = json.load(open(sys.argv[2]))
jsonschema.validate(ok, json.load(open(sys.argv[1])))
assert {(p["client"], p["server"]) for p in ok["pairs"]} == {(a, b) for a in range(4) for b in range(a + 1, 4)}, ok["pairs"]
assert all(p["status"] == "ok" for p in ok["pairs"]), ok["pairs"]
assert not ok["findings"]["bad_hosts"] and not ok["findings"]["bad_links"], ok["findings"]
print("mesh MPI control plane OK: 4 ranks, 6 pairs")
PY
  exit 0
fi
# A late but healthy rank is waited for (its liveness answers say it still has the pairs ahead).
timeout -k 5 90 "${run[@]}" "$mesh" --control-only --round-timeout 2 --debug-late-rank 2 --debug-late-seconds 12 \
  --json "$out/late.json" >"$out/late.log" 2>&1 || {
  cat "$out/late.log"; echo "FAIL: a rank 12 s late (alive) made the run fail"; exit 1; }
set +e
timeout -k 5 60 "${run[@]}" "$mesh" --control-only --round-timeout 2 --debug-stall-rank 3 --json "$out/stall.json" >"$out/stall.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: a hung rank must make the run exit non-zero"; exit 1; }
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  # Open MPI 4.1.4's mpirun sometimes neither exits nor crashes after MPI_Abort (its ranks
  # already gone, zombies): seen 1 run in 5 under load. Not ours, once rank 0 did abort.
  grep -q "MPI_ABORT was invoked on rank 0" "$out/stall.log" || {
    cat "$out/stall.log"; echo "FAIL: the run with a hung rank did not end within 60 s"; exit 1; }
  echo "note: mpirun did not exit after rank 0's MPI_Abort; killed after 60 s"
fi
py=/usr/bin/python3; [ -x "$py" ] || py=python3   # Debian's, with python3-jsonschema
"$py" - "$schema" "$out/ok.json" "$out/late.json" "$out/stall.json" <<'PY'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
ok, late, stall = (json.load(open(p)) for p in sys.argv[2:5])
for r in (ok, late, stall):
    jsonschema.validate(r, schema)
for r in (ok, late):
    pairs = {(p["client"], p["server"]) for p in r["pairs"]}
    assert pairs == {(a, b) for a in range(4) for b in range(a + 1, 4)}, pairs
    assert all(p["status"] == "ok" for p in r["pairs"]), r["pairs"]
    assert not r["findings"]["bad_hosts"] and not r["findings"]["bad_links"], r["findings"]
status = {(p["client"], p["server"]): p["status"] for p in stall["pairs"]}
assert all((s == "timeout") == (3 in k) for k, s in status.items()), status
assert [h["rank"] for h in stall["findings"]["bad_hosts"]] == [3], stall["findings"]
assert not stall["findings"]["bad_links"], stall["findings"]
print("mesh MPI control plane OK: 4 ranks, 6 pairs; rank 2 12 s late: all ok; hung rank 3 named, its 3 pairs timed out")
PY
