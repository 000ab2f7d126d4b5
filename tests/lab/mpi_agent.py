#!/usr/bin/env python3
"""A launcher agent for Open MPI between lab VMs (which have no sshd).

  mpi_agent.py serve PORT [--sessions N] [--timeout S]   # in a VM: run what a client asks
  mpi_agent.py run HOST CMD...                           # plm_rsh_agent: like `ssh HOST CMD`

Open MPI's rsh launcher starts its daemon (orted) on each remote host with
`<agent> HOST <shell command>` and keeps that connection open while the daemon
runs. `run` sends the command line to HOST's agent and relays the remote
output; `serve` runs each received command with bash and closes the connection
when it exits. Lab use only: it executes whatever it is sent, no authentication.
"""
import socket
import subprocess
import sys


def serve(port, sessions, timeout):
    srv = socket.create_server(("0.0.0.0", port), reuse_port=True)
    srv.settimeout(timeout)
    for _ in range(sessions):
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            print("mpi_agent: no (more) sessions within the timeout", file=sys.stderr)
            return 0
        with conn:
            f = conn.makefile("rb")
            command = f.readline().decode().rstrip("\n")
            print(f"mpi_agent: running: {command}", file=sys.stderr, flush=True)
            proc = subprocess.Popen(["bash", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            for chunk in iter(lambda: proc.stdout.read1(4096), b""):
                conn.sendall(chunk)
            proc.wait()
            print(f"mpi_agent: exit {proc.returncode}", file=sys.stderr, flush=True)
    return 0


def run(host, command):
    conn = socket.create_connection((host, PORT), timeout=30)
    conn.settimeout(None)
    conn.sendall((command + "\n").encode())
    while True:
        data = conn.recv(4096)
        if not data:
            return 0
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


PORT = 2222

if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        args = sys.argv[2:]
        port = int(args[0])
        sessions = int(args[args.index("--sessions") + 1]) if "--sessions" in args else 1
        timeout = float(args[args.index("--timeout") + 1]) if "--timeout" in args else 120
        sys.exit(serve(port, sessions, timeout))
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], " ".join(sys.argv[3:])))
    sys.exit(__doc__)
