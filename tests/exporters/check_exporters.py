#!/usr/bin/env python3
"""Checks of rdmadiag's exporters on real captures and a real perftest sweep.

usage: check_exporters.py MODE RDMADIAG SOURCE_DIR
MODE: schema | csv | metrics | html.  Exit 0 pass, 1 fail, 77 skipped (a tool missing).
"""
import csv
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MODE, RDMADIAG, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
PCAPS = os.path.join(SRC, "tests", "pcaps")
LOSSY = os.path.join(PCAPS, "rxe_write_bw_loss.pcap")
SWEEP = os.path.join(SRC, "tests", "exporters", "perftest_write_lat_sweep_rxe.json")
ANALYZE_SCHEMA = os.path.join(SRC, "docs", "schema", "analyze-report.schema.json")
PERFTEST_SCHEMA = os.path.join(SRC, "docs", "perftest-schema.json")
TMP = tempfile.mkdtemp(prefix="rdmadiag-exporters-")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, **kw):
    p = subprocess.run([RDMADIAG, *args], capture_output=True, text=True, timeout=kw.get("timeout", 120))
    if p.returncode not in kw.get("ok", (0,)):
        print(p.stdout[-2000:], p.stderr[-2000:])
        raise SystemExit(f"FAIL: rdmadiag {' '.join(args)} exited {p.returncode}")
    return p


def tmp(name):
    return os.path.join(TMP, name)


def analyze_json(pcap, *extra):
    out = tmp(os.path.basename(pcap) + ".json")
    run("analyze", pcap, "--json", out, "-q", *extra, ok=(0, 3))
    with open(out) as f:
        return json.load(f)


def finish():
    shutil.rmtree(TMP, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")
    sys.exit(0)


def mode_schema():
    try:
        import jsonschema
    except ImportError:
        print("SKIP: python3-jsonschema is not installed (install-deps.sh installs it)")
        sys.exit(77)
    with open(ANALYZE_SCHEMA) as f:
        schema = json.load(f)
    v = jsonschema.Draft202012Validator(schema)
    packet_v = jsonschema.Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/packet"})

    def validate(validator, doc, what):
        errs = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errs[:5]:
            print(f"  {what}: {e.json_path}: {e.message[:300]}")
        check(not errs, f"{what} matches its schema ({len(errs)} errors)")

    pcaps = [p for p in sorted(os.listdir(PCAPS)) if p.endswith(".pcap")]
    check(len(pcaps) >= 5, "real captures present")
    for name in pcaps:
        rep = analyze_json(os.path.join(PCAPS, name), "--packets")
        validate(v, rep, f"analyze --json --packets {name}")
        # The timeline events agree with the flow table (two routes through the analysis results).
        flows = {f["flow"]: f for f in rep.get("flows", [])}
        for t in rep.get("timeline", {}).get("flows", []):
            gaps = sum(1 for e in t["events"] if e["kind"] == "gap")
            if t["flow"] in flows and "events_dropped" not in t:
                check(gaps == flows[t["flow"]]["psn"]["gaps"], f"{name}: flow {t['flow']} timeline gaps {gaps} == flows gaps")
            check(len(t["points"]) <= 2000, f"{name}: timeline bounded")
        # Every request-response latency counted once in the histograms.
        lh = rep.get("latency_histograms")
        if lh:
            check(sum(lh["all"]["counts"]) == lh["all"]["count"], f"{name}: histogram counts add up")
    # Pause frames (docs/pfc.md): with a link speed (times) and without (nulls).
    for name in sorted(n for n in os.listdir(os.path.join(PCAPS, "pfc")) if n.endswith(".pcap")):
        path = os.path.join(PCAPS, "pfc", name)
        for extra in (("--link-speed", "25"), ()):
            rep = analyze_json(path, "--packets", *extra)
            check("pfc" in rep, f"{name}: pfc section")
            validate(v, rep, f"analyze --json --packets {' '.join(extra)} pfc/{name}")
    # Congestion (docs/congestion.md): the section, the anomaly and the per-packet fields.
    for name in sorted(n for n in os.listdir(os.path.join(PCAPS, "cc")) if n.endswith(".pcap")):
        rep = analyze_json(os.path.join(PCAPS, "cc", name), "--packets")
        check("congestion" in rep, f"{name}: congestion section")
        validate(v, rep, f"analyze --json --packets cc/{name}")
    # Streaming forms: --jsonl (packet lines, then the report) and capture -r.
    jl = tmp("lossy.jsonl")
    run("analyze", LOSSY, "--jsonl", jl, "-q")
    with open(jl) as f:
        lines = f.read().splitlines()
    report = json.loads(lines[-1])
    validate(v, report, "--jsonl report line")
    check(len(lines) - 1 == report["summary"]["packets"], "--jsonl: one line per packet")
    for i, line in enumerate(lines[:-1]):
        errs = list(packet_v.iter_errors(json.loads(line)))
        if errs:
            check(False, f"--jsonl packet line {i + 1}: {errs[0].message[:200]}")
            break
    cap = tmp("capture.json")
    run("capture", "-r", LOSSY, "--json", cap, "-q")
    with open(cap) as f:
        validate(v, json.load(f), "capture -r --json")
    # The perftest report of a real sweep (lab, rxe).
    with open(PERFTEST_SCHEMA) as f:
        pv = jsonschema.Draft202012Validator(json.load(f))
    with open(SWEEP) as f:
        validate(pv, json.load(f), "perftest sweep fixture")
    # A document of the wrong shape is rejected (the validator is live).
    bad = analyze_json(LOSSY)
    bad["summary"]["packets"] = "many"
    check(list(v.iter_errors(bad)), "a wrong document fails validation")
    finish()


def tshark_bth(pcap):
    if not shutil.which("tshark"):
        return None
    p = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-E", "separator=,", "-e", "frame.number",
                        "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"], capture_output=True, text=True, timeout=120)
    out = {}
    for line in p.stdout.splitlines():
        f = line.split(",")
        if len(f) == 3 and f[1]:
            out[int(f[0])] = (int(f[1], 0), int(f[2]))
    return out


PACKET_COLUMNS = ["frame", "ts", "len", "transport", "src", "dst", "opcode", "opcode_name", "dest_qp", "psn", "payload_len",
                  "icrc", "aeth", "flow", "gap", "duplicate", "out_of_order", "retransmission", "request_frame",
                  "response_frame", "latency_us", "ecn_ce", "cnp"]


def mode_csv():
    flows_csv, packets_csv = tmp("flows.csv"), tmp("packets.csv")
    run("analyze", LOSSY, "--csv", flows_csv, "--csv-packets", packets_csv, "-q")
    rep = analyze_json(LOSSY)
    with open(packets_csv, newline="") as f:
        reader = csv.DictReader(f)
        check(reader.fieldnames == PACKET_COLUMNS, f"packet CSV columns {reader.fieldnames}")
        rows = list(reader)
    check(len(rows) == rep["summary"]["packets"], "one CSV row per packet")
    # dest QP and PSN of every BTH packet match tshark's InfiniBand dissector.
    ts = tshark_bth(LOSSY)
    if ts is None:
        print("note: tshark missing, BTH cross-check skipped")
    else:
        mine = {int(r["frame"]): (int(r["dest_qp"]), int(r["psn"])) for r in rows if r["psn"]}
        check(mine == ts, f"CSV dest_qp/psn equal tshark's on {len(ts)} BTH packets")
    gaps = sum(int(r["gap"]) > 0 for r in rows if r["gap"])
    check(gaps == sum(f["psn"]["gaps"] for f in rep["flows"]), "per-packet gaps add up to the flow table")
    with open(flows_csv, newline="") as f:
        frows = list(csv.DictReader(f))
    check(len(frows) == len(rep["flows"]), "one CSV row per flow")
    for r, j in zip(frows, rep["flows"]):
        check(int(r["packets"]) == j["packets"] and int(r["psn_gaps"]) == j["psn"]["gaps"] and
              int(r["retransmissions"]) == j["psn"]["retransmissions"] and int(r["dest_qp"]) == j["dest_qp"],
              f"flow {r['flow']} CSV row equals the JSON")
    # A perftest sweep: one row per size.
    pcsv = tmp("perftest.csv")
    run("report", SWEEP, "--csv", pcsv)
    with open(SWEEP) as f:
        sweep = json.load(f)
    with open(pcsv, newline="") as f:
        prows = list(csv.DictReader(f))
    check([int(r["size"]) for r in prows] == [r["size"] for r in sweep["results"]], "perftest CSV sizes")
    check(all(abs(float(r["t_typical_us"]) - s["statistics"]["t_typical"]) < 1e-6 * s["statistics"]["t_typical"]
              for r, s in zip(prows, sweep["results"])), "perftest CSV t_typical")
    finish()


def parse_exposition(text, what):
    """Parses with prometheus_client's parser and, when present, promtool. Returns {(name, labels): value}."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("SKIP: python3-prometheus-client is not installed (install-deps.sh installs it)")
        sys.exit(77)
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        check(p.returncode == 0, f"promtool check metrics on {what}: {p.stdout}{p.stderr}")
    else:
        print("note: promtool (Debian package prometheus) missing; parsed with prometheus_client only")
    return samples


def total(samples, name, **match):
    return sum(v for (n, labels), v in samples.items() if n == name and all(dict(labels).get(k) == x for k, x in match.items()))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def mode_metrics():
    rep = analyze_json(LOSSY)
    gaps = sum(f["psn"]["gaps"] for f in rep["flows"])
    naks = sum(f["naks"]["psn_seq_error"] for f in rep["flows"])
    # The endpoint, scraped over HTTP on loopback while `capture -r` lingers.
    port = free_port()
    proc = subprocess.Popen([RDMADIAG, "capture", "-r", LOSSY, "--metrics-listen", f"127.0.0.1:{port}", "--linger", "20", "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    text = None
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    ctype = r.headers.get("Content-Type", "")
                    body = r.read().decode()
                if "rdmadiag_capture_running 0" in body:  # the final snapshot
                    text = body
                    break
            except OSError:
                pass
            time.sleep(0.2)
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=2)
            check(False, "unknown path answers 404")
        except urllib.error.HTTPError as e:
            check(e.code == 404, "unknown path answers 404")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    check(text is not None, "scraped the final metrics over HTTP")
    if text is None:
        finish()
    check(ctype.startswith("text/plain; version=0.0.4"), f"exposition content type ({ctype})")
    s = parse_exposition(text, "/metrics")
    check(total(s, "rdmadiag_packets_total") == rep["summary"]["packets"], "packets_total equals the report")
    check(any(n == "rdmadiag_packets_not_analysed_total" for n, _ in s) and total(s, "rdmadiag_packets_not_analysed_total") == 0,
          "a file capture leaves nothing unanalysed")
    check(total(s, "rdmadiag_psn_gaps_total") == gaps, f"psn_gaps_total {total(s, 'rdmadiag_psn_gaps_total')} == {gaps}")
    check(total(s, "rdmadiag_naks_total", code="psn_seq_error") == naks, "NAK counts equal the flow table")
    check(total(s, "rdmadiag_anomalies_total", kind="psn_gap") == rep["summary"]["anomalies"]["by_kind"].get("psn_gap", 0),
          "anomalies by kind")
    check(any(n == "rdmadiag_wire_latency_seconds_bucket" for n, _ in s), "latency histogram exported")
    # The label cap: with one flow allowed, the other is summed into flow="other".
    mf = tmp("capped.prom")
    run("analyze", LOSSY, "--metrics-file", mf, "--metrics-max-flows", "1", "-q")
    with open(mf) as f:
        capped = parse_exposition(f.read(), "--metrics-file")
    check(total(capped, "rdmadiag_metrics_flows_aggregated") == len(rep["flows"]) - 1, "cap reported")
    check(total(capped, "rdmadiag_psn_gaps_total") == gaps, "capped series still add up")
    check(any(dict(l).get("flow") == "other" for n, l in capped if n == "rdmadiag_flow_packets_total"), "flow=\"other\" series")
    # Everything summed into flow="other" (--metrics-max-flows 0) must equal the per-flow series added up
    # exactly: both go through FlowCounters::add (one merge, exact latency sums).
    per_flow, all_other = tmp("all.prom"), tmp("other.prom")
    run("analyze", LOSSY, "--metrics-file", per_flow, "-q")
    run("analyze", LOSSY, "--metrics-file", all_other, "--metrics-max-flows", "0", "-q")
    with open(per_flow) as f:
        pf = parse_exposition(f.read(), "per-flow metrics")
    with open(all_other) as f:
        ao = parse_exposition(f.read(), "aggregated metrics")
    for name in ("rdmadiag_wire_latency_seconds_sum", "rdmadiag_wire_latency_seconds_count", "rdmadiag_flow_packets_total"):
        exact = math.fsum(v for (n, _), v in pf.items() if n == name)
        check(abs(total(ao, name, flow="other") - exact) <= 1e-12 * max(1.0, abs(exact)), f"{name}: flow=\"other\" equals the per-flow sum")
    # Pause and congestion series equal the report's sections (which cc_crosscheck and pfc_crosscheck hold to tshark).
    storm = os.path.join(PCAPS, "pfc", "pfc_storm.pcap")
    srep, sm = analyze_json(storm, "--link-speed", "10"), tmp("storm.prom")
    run("analyze", storm, "--link-speed", "10", "--metrics-file", sm, "-q")
    with open(sm) as f:
        ss = parse_exposition(f.read(), "pause metrics")
    for snd in srep["pfc"]["senders"]:
        for pr in snd["priorities"]:
            lab = {"sender": snd["mac"], "priority": str(pr["priority"])}
            check(total(ss, "rdmadiag_pause_frames_total", **lab) == pr["frames"], f"pause frames {lab}")
            check(abs(total(ss, "rdmadiag_paused_seconds_total", **lab) - pr["paused_us"] * 1e-6) < 1e-9, f"paused seconds {lab}")
            check(total(ss, "rdmadiag_pause_storms_total", **lab) == pr["storms"], f"pause storms {lab}")
    cc_pcap = os.path.join(PCAPS, "cc", "cc_basic.pcap")
    crep, cm = analyze_json(cc_pcap), tmp("cc.prom")
    run("analyze", cc_pcap, "--metrics-file", cm, "-q")
    with open(cm) as f:
        cs = parse_exposition(f.read(), "congestion metrics")
    cc = crep["congestion"]
    check(total(cs, "rdmadiag_cc_ce_marked_total") == cc["ce_marked"], "cc CE marks")
    check(total(cs, "rdmadiag_cc_cnps_total", matched="false") == cc["cnps_unmatched"], "cc unmatched CNPs")
    check(total(cs, "rdmadiag_cc_cnps_total") == cc["cnps"], "cc CNPs")
    responses = sum(f["cnp_response_us"]["count"] for f in cc["flows"])
    check(total(cs, "rdmadiag_cc_cnp_response_seconds_count") == responses, "cc response count")
    resp_sum = sum(f["cnp_response_us"]["mean"] * f["cnp_response_us"]["count"] for f in cc["flows"] if f["cnp_response_us"]["count"])
    check(abs(total(cs, "rdmadiag_cc_cnp_response_seconds_sum") - resp_sum * 1e-6) < 1e-12, "cc response sum")
    check(total(cs, "rdmadiag_anomalies_total", kind="cc_no_reaction") == cc["kept_rate_flows"], "cc_no_reaction count")
    # perftest gauges from the real sweep.
    pm = tmp("perftest.prom")
    run("report", SWEEP, "--metrics-file", pm)
    with open(pm) as f:
        ps = parse_exposition(f.read(), "perftest metrics")
    with open(SWEEP) as f:
        sweep = json.load(f)
    r8 = next(r for r in sweep["results"] if r["size"] == 8)
    check(abs(total(ps, "rdmadiag_perftest_latency_seconds", size="8", stat="median") - r8["statistics"]["t_typical"] * 1e-6) < 1e-12,
          "perftest median latency gauge")
    finish()


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def render_in_chromium(browser, html, screenshot):
    """Loads the page headless; returns (dom, console_errors)."""
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
              f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=TMP)}"]
    url = "file://" + os.path.abspath(html)
    dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    shot = subprocess.run(common + ["--window-size=1400,2000", f"--screenshot={screenshot}", url], capture_output=True,
                          text=True, timeout=120)
    errors = [l for l in (dom.stderr + shot.stderr).splitlines() if "Uncaught" in l or ":CONSOLE" in l]  # the page logs nothing itself
    return dom.stdout, errors


def mode_html():
    outdir = sys.argv[4] if len(sys.argv) > 4 else TMP
    # The page from analyze equals the page rendered later from the saved JSON:
    # the JSON carries everything the page shows.
    direct, js = tmp("lossy.html"), tmp("lossy.json")
    run("analyze", LOSSY, "--html", direct, "--json", js, "-q")
    later = tmp("lossy-from-json.html")
    run("report", js, "--html", later)
    with open(direct) as a, open(later) as b:
        page = a.read()
        check(page == b.read(), "analyze --html equals report --html of its JSON")
    with open(js) as f:
        rep = json.load(f)
    check("http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page and "<link" not in page,
          "self-contained: no external references")
    check(page.count("<svg") >= 3 and "PSN timeline" in page and "Wire latency" in page, "plots present")
    for f in rep["flows"]:
        check(f"0x{f['dest_qp']:06x}" in page, f"flow {f['flow']} in the health table")
    check(page.count("<li>") == min(len(rep["anomalies"]), 501), "every anomaly listed")
    # Lossless Ethernet: the pause timeline (one bar per continuous pause) and the congestion plots.
    storm_html = tmp("storm.html")
    run("analyze", os.path.join(PCAPS, "pfc", "pfc_storm.pcap"), "--link-speed", "10", "--html", storm_html, "-q")
    with open(storm_html) as f:
        spage = f.read()
    check("Pause timeline per priority" in spage and "storm start" in spage, "pause timeline with its storm")
    cc_html = tmp("cc.html")
    run("analyze", os.path.join(PCAPS, "cc", "cc_basic.pcap"), "--html", cc_html, "-q")
    with open(cc_html) as f:
        cpage = f.read()
    check(cpage.count("CNP back to the sender") == 3 and "kept rate 1" in cpage, "a congestion plot per marked QP")
    perf = tmp("sweep.html")
    run("report", SWEEP, "--html", perf)
    with open(perf) as f:
        ppage = f.read()
    check("latency against message size" in ppage and "latency CDF per message size" in ppage, "perftest plots present")
    check(run("report", LOSSY, "--html", tmp("x.html"), ok=(1,)).returncode == 1, "a pcap is refused by report")
    browser = chromium()
    if not browser:
        print("SKIP (browser part): chromium is not installed; the static checks above ran")
        finish() if failures else sys.exit(77)
    os.makedirs(outdir, exist_ok=True)
    for html, png in ((direct, "html-report-rxe-write-bw-loss.png"), (perf, "html-report-perftest-sweep.png")):
        dom, errors = render_in_chromium(browser, html, os.path.join(outdir, png))
        check('data-rendered="yes"' in dom, f"{os.path.basename(html)}: the inline script ran")
        check(not errors, f"{os.path.basename(html)}: no console errors {errors[:3]}")
        check(os.path.getsize(os.path.join(outdir, png)) > 10000, f"{png} written")
    finish()


{"schema": mode_schema, "csv": mode_csv, "metrics": mode_metrics, "html": mode_html}[MODE]()
