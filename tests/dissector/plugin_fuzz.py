#!/usr/bin/env python3
"""tshark with the rdmadiag plugin never crashes, whatever the bytes.

Each run takes one real capture (classic pcap) and writes a mutated copy, seeded
and reproducible (`--seed S --runs N`; run k uses random.Random(S * 1000003 + k)):
  - truncate: records cut to a random captured length (wire length kept);
  - flip: random bits flipped in random frames, mostly after the Ethernet header;
  - smash: random bytes written over the RDMA headers (BTH, extended headers, MPA/DDP)
    of random frames: opcodes, lengths, pad counts, PSNs;
  - shuffle: frames reordered and duplicated (the analysis sees PSNs jump back);
  - cut: the file itself ends mid-record.
tshark then dissects it in two passes (-2, the expert summary; every eighth run
also -V, every field printed), and must exit 0 or 2 (2: tshark's own "file is cut" report) with no crash
(signal, ASan report, assertion). Failing inputs are kept in --keep for replay.
With a plugin built with -DRDMADIAG_SANITIZE=ON, libasan is preloaded."""
import argparse
import pathlib
import random
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tshark_plugin import tshark_or_skip  # noqa: E402


def read_pcap(path):
    data = path.read_bytes()
    if len(data) < 24 or struct.unpack_from("<I", data, 0)[0] not in (0xA1B2C3D4, 0xA1B23C4D):
        return None
    header, records, pos = data[:24], [], 24
    while pos + 16 <= len(data):
        ts_s, ts_u, incl, orig = struct.unpack_from("<IIII", data, pos)
        records.append([ts_s, ts_u, orig, bytearray(data[pos + 16:pos + 16 + incl])])
        pos += 16 + incl
    return header, records


def write_pcap(path, header, records, cut_at=None):
    out = bytearray(header)
    for ts_s, ts_u, orig, body in records:
        out += struct.pack("<IIII", ts_s, ts_u, len(body), max(orig, len(body))) + body
    if cut_at is not None:
        out = out[:max(24, int(len(out) * cut_at))]
    path.write_bytes(out)


def mutate(rng, header, records):
    records = [[a, b, c, bytearray(d)] for a, b, c, d in records]
    mode = rng.choice(["truncate", "flip", "smash", "shuffle", "cut", "mixed"])
    modes = {"truncate", "flip", "smash", "shuffle"} if mode == "mixed" else {mode}
    cut_at = rng.uniform(0.1, 0.99) if mode == "cut" else None
    share = rng.choice([0.02, 0.1, 0.5, 1.0])
    for rec in records:
        body = rec[3]
        if rng.random() > share or not body:
            continue
        if "truncate" in modes:
            del body[rng.randrange(len(body) + 1):]
        if "flip" in modes and body:
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(min(len(body), 14), len(body)) if len(body) > 14 else rng.randrange(len(body))
                body[i] ^= 1 << rng.randrange(8)
        if "smash" in modes and len(body) > 42:
            # 42: Ethernet + IPv4 + UDP; the RDMA headers start here (or the TCP header, for iWARP).
            start = rng.randrange(34, min(len(body), 110))
            for i in range(start, min(len(body), start + rng.randint(1, 24))):
                body[i] = rng.choice([0x00, 0xFF, rng.randrange(256)])
    if "shuffle" in modes:
        for _ in range(rng.randint(1, max(1, len(records) // 10))):
            i, j = rng.randrange(len(records)), rng.randrange(len(records))
            records[i], records[j] = records[j], records[i]
            if rng.random() < 0.3:
                records.insert(j, [*records[i][:3], bytearray(records[i][3])])
    return mode, records, cut_at


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin-root", required=True)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default=None, help="folder for failing inputs (default: a temporary folder)")
    ap.add_argument("captures", nargs="+")
    args = ap.parse_args()
    ts = tshark_or_skip(args.plugin_root)
    if not ts:
        return 77
    sources = []
    for c in args.captures:
        p = pathlib.Path(c)
        for f in (sorted(p.rglob("*.pcap")) if p.is_dir() else [p]):
            parsed = read_pcap(f)
            if parsed and struct.unpack_from("<I", parsed[0], 20)[0] != 247 and f.stat().st_size < 400_000:
                sources.append((f, parsed))
    work = pathlib.Path(tempfile.mkdtemp(prefix="rdmadiag-ws-fuzz-"))
    work.chmod(0o755)
    keep = pathlib.Path(args.keep) if args.keep else work / "failures"
    failures = 0
    for k in range(args.runs):
        rng = random.Random(args.seed * 1000003 + k)
        src, (header, records) = rng.choice(sources)
        mode, mutated, cut_at = mutate(rng, header, records)
        case = work / f"case{k}.pcap"
        write_pcap(case, header, mutated, cut_at)
        case.chmod(0o644)
        runs = [ts.run(["-2", "-r", str(case), "-q", "-z", "expert"], timeout=300)]
        if k % 8 == 0:  # every field printed, now and then (slower)
            runs.append(ts.run(["-2", "-V", "-r", str(case)], timeout=300))
        # Wireshark catches its own dissectors' bugs and goes on; only ours, a signal or a sanitizer report count.
        bad = [x for x in runs if x.returncode not in (0, 2) or "AddressSanitizer" in x.stderr
               or "runtime error" in x.stderr or "Dissector bug, protocol rdmadiag" in x.stderr]
        if bad:
            failures += 1
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(case, keep / f"seed{args.seed}_run{k}_{src.stem}_{mode}.pcap")
            print(f"FAIL run {k} ({src.name}, {mode}): exit {bad[0].returncode}: {bad[0].stderr.strip()[-800:]}")
        case.unlink()
    print(f"{args.runs} mutated captures (seed {args.seed}, {len(sources)} sources"
          f"{', ASan' if ts.asan else ''}): {failures} crashed" + (f"; inputs kept in {keep}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
