"""Tables 2, 2b, 4 and 5, one section (--only 2 gives all four): an idle
training process with each monitor on, at 10 s x 1 (MLflow's default) and
1 s, against one `mlflow server`.  2: CPU per logging window (the `scopemeter
run` CLI in its own process; the floor of a window, bench/window_floor); 2b:
context for 2 (one MlflowClient call's cost); 4: W&B (offline: its wandb-core
service samples), CPU per sample; 5: resident memory added to the training
process."""
import os
import subprocess
import threading
import time

import benchlib as B
from harness import EXPERIMENT, INTERVALS, log


def cli_run(c, seconds, interval, out, key, uri=None, **extra):
    """`scopemeter run --interval S -- sleep T` in its own process: CPU of the
    CLI (and sleep) from wait4(); RSS read from /proc while it runs."""
    env = c.env(MLFLOW_TRACKING_URI=uri or c.server.uri, **extra)
    cmd = [c.cli, "run", "--experiment", EXPERIMENT, "--interval", f"{interval:g}",
           "--samples", "1", "--", "sleep", f"{seconds:g}"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    rss = hwm = anon = None
    if seconds > 0:
        time.sleep(min(seconds / 2, c.p["s2_warmup"]))
        rss = B.proc_status_kb(proc.pid, "VmRSS")
        hwm = B.proc_status_kb(proc.pid, "VmHWM")
        anon = B.proc_status_kb(proc.pid, "RssAnon")
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read()
    out[key] = {"cpu_s": ru.ru_utime + ru.ru_stime, "rss_kb": rss, "hwm_kb": hwm, "anon_kb": anon,
                "rc": proc.returncode, "stderr": err[-500:]}


def capture_window(c):
    """The log-batch request of one steady window, as scopemeter sends it:
    `scopemeter run --interval 1` through a recording forwarder in front of
    the server (benchlib.Forwarder); the second log-batch (the first one
    after start, not the stop's).  Written to a file the floor replays."""
    fw = B.Forwarder(c.server.uri, record=True)
    try:
        r = subprocess.run([c.cli, "run", "--experiment", EXPERIMENT, "--interval", "1",
                            "--samples", "1", "--", "sleep", "3.5"],
                           env=c.env(MLFLOW_TRACKING_URI=fw.uri), capture_output=True, text=True,
                           timeout=120)
        reqs = fw.requests("/api/2.0/mlflow/runs/log-batch")
    finally:
        fw.close()
    if r.returncode != 0 or not reqs:
        raise RuntimeError(f"capturing a log-batch request failed ({r.returncode}, "
                           f"{len(reqs)} requests): {r.stderr[-500:]}")
    req = reqs[1] if len(reqs) > 2 else reqs[0]
    path = os.path.join(c.tmp, "log-batch.http")
    with open(path, "wb") as f:
        f.write(req)
    return path, len(req), req.index(b"\r\n\r\n") + 4


def floor_run(c, path, interval, out, key, tree=0):
    """bench/window_floor: the window's floor (the sample's reads, the
    captured request sent on a kept-alive socket, the reply received); with
    tree, the process-tree collector's reads of that process's tree."""
    port = c.server.uri.rsplit(":", 1)[1]
    r = subprocess.run([c.window_floor, "--request", path, "--port", port, "--interval",
                        f"{interval:g}", "--warmup", f"{c.p['s2_warmup']:g}", "--span",
                        f"{c.p['s2_span']:g}"] + (["--tree", str(tree)] if tree else []),
                       capture_output=True, text=True,
                       timeout=c.p["s2_warmup"] + c.p["s2_span"] + 120)
    res = B.parse_result(r.stdout)
    if r.returncode != 0 or res is None:
        raise RuntimeError(f"window_floor {interval:g} s exited {r.returncode}: "
                           f"{r.stdout[-300:]} {r.stderr[-300:]}")
    out[key] = res


def section2(c):
    p = c.p
    span, warm = p["s2_span"], p["s2_warmup"]
    variants = ["mlflow", "scopemeter"] + (["wandb"] if c.wandb else [])
    req_path, req_len, req_head = capture_window(c)
    # the https endpoint: a TLS forwarder with its own certificate in front of
    # the same server; the front and the CLI at 1 s, and an unmonitored
    # process over https as the front's baseline
    cert, key = B.self_signed_cert(os.path.join(c.tmp, "tls"))
    tlsfw = B.Forwarder(c.server.uri, tls=(cert, key))
    tls_env = {"MLFLOW_TRACKING_SERVER_CERT_PATH": cert}
    reps = []
    try:
        for rep in range(p["s2_reps"]):
            reps.append(section2_rep(c, rep, variants, tlsfw.uri, tls_env, req_path))
    finally:
        tlsfw.close()
    section2_tables(c, reps, variants, req_len, req_head)


def section2_rep(c, rep, variants, tls_uri, tls_env, req_path):
    p = c.p
    span, warm = p["s2_span"], p["s2_warmup"]
    log(f"2/4/5: repetition {rep + 1}/{p['s2_reps']} ({warm + span:g} s)")
    jobs = [("none", 0.0)] + [(v, iv) for v in variants for iv in INTERVALS]
    procs = {}
    for v, iv in jobs + [("none", "https"), ("scopemeter", "https")]:
        https = iv == "https"
        procs[(v, iv)] = subprocess.Popen(
            c.py("worker.py", "idle", "--variant", v, "--interval",
                 1 if https else (iv or 10), "--warmup", warm, "--span", span, "--uri",
                 tls_uri if https else c.server.uri, "--experiment", EXPERIMENT),
            env=c.env(**(tls_env if https else {})), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
    cli_out, floor_out, threads = {}, {}, []
    for iv in INTERVALS:
        for secs in (0.0, warm + span):
            t = threading.Thread(target=cli_run, args=(c, secs, iv, cli_out, (iv, secs)))
            t.start()
            threads.append(t)
        # the tree the front's collector reads: the front's own process
        t = threading.Thread(target=floor_run, args=(c, req_path, iv, floor_out, iv,
                                                     procs[("scopemeter", iv)].pid))
        t.start()
        threads.append(t)
    for secs in (0.0, warm + span):
        t = threading.Thread(target=cli_run, args=(c, secs, 1.0, cli_out, ("https", secs),
                                                   tls_uri), kwargs=tls_env)
        t.start()
        threads.append(t)
    res = {}
    for key, proc in procs.items():
        try:
            o, e = proc.communicate(timeout=warm + span + 180)
        except subprocess.TimeoutExpired:
            B.kill_group(proc)
            o, e = "", "timed out"
        r = B.parse_result(o)
        if r is None:
            raise RuntimeError(f"worker {key} gave no result: {e[-800:]}")
        res[key] = r
    for t in threads:
        t.join()
    for k, v in cli_out.items():
        if v["rc"] != 0:
            raise RuntimeError(f"scopemeter run {k} exited {v['rc']}: {v['stderr']}")
    for iv in INTERVALS:
        if iv not in floor_out:
            raise RuntimeError(f"window_floor {iv:g} s gave no result")
    return {"workers": res, "cli": cli_out, "floor": floor_out}


def section2_tables(c, reps, variants, req_len, req_head):
    p = c.p
    span, warm = p["s2_span"], p["s2_warmup"]
    # per repetition: CPU per window (ms) of each variant, minus the baseline
    per = {}  # (variant, interval) -> [ms per window]
    mem = {}  # variant -> [MB added]
    side = {}  # (interval) -> wandb-core ms per sample, in-process ms per sample
    floor_detail = {}  # (what, interval) -> per window: read/deliver CPU s, connects
    for rep in reps:
        w, cl = rep["workers"], rep["cli"]
        base = w[("none", 0.0)]
        for iv in INTERVALS:
            windows = span / iv
            for v in variants:
                r = w[(v, iv)]
                inproc = (r["cpu_s"] - base["cpu_s"]) / windows * 1e3
                total = inproc + r["side_cpu_s"] / windows * 1e3
                per.setdefault((v, iv), []).append(total)
                if v == "wandb":
                    side.setdefault(("core", iv), []).append(r["side_cpu_s"] / windows * 1e3)
                    side.setdefault(("inproc", iv), []).append(inproc)
            long_, short = cl[(iv, warm + span)], cl[(iv, 0.0)]
            per.setdefault(("cli", iv), []).append(
                (long_["cpu_s"] - short["cpu_s"]) / ((warm + span) / iv) * 1e3)
            if iv == INTERVALS[-1]:
                mem.setdefault("cli_rss", []).append((long_["rss_kb"] or 0) / 1024)
                mem.setdefault("cli_anon", []).append((long_["anon_kb"] or 0) / 1024)
            fl = rep["floor"][iv]
            per.setdefault(("floor", iv), []).append(fl["cpu_s"] / fl["windows"] * 1e3)
            for k in ("read_cpu_s", "deliver_cpu_s", "connects", "server_closed"):
                floor_detail.setdefault((k, iv), []).append(fl[k] / fl["windows"])
        # https, 1 s: the front against an unmonitored process over https too
        long_, short = cl[("https", warm + span)], cl[("https", 0.0)]
        per.setdefault(("cli", "https"), []).append(
            (long_["cpu_s"] - short["cpu_s"]) / (warm + span) * 1e3)
        mem.setdefault("cli_rss_https", []).append((long_["rss_kb"] or 0) / 1024)
        mem.setdefault("cli_anon_https", []).append((long_["anon_kb"] or 0) / 1024)
        hb, hr = w[("none", "https")], w[("scopemeter", "https")]
        per.setdefault(("scopemeter", "https"), []).append((hr["cpu_s"] - hb["cpu_s"]) / span * 1e3)
        mem.setdefault("scopemeter_https", []).append((hr["rss_kb"] - hb["rss_kb"]) / 1024)
        mem.setdefault("scopemeter_https_hwm", []).append((hr["hwm_kb"] - hb["hwm_kb"]) / 1024)
        mem.setdefault("scopemeter_https_anon", []).append(((hr.get("anon_kb") or 0) -
                                                            (hb.get("anon_kb") or 0)) / 1024)
        for v in variants:
            r = w[(v, INTERVALS[-1])]
            mem.setdefault(v, []).append((r["rss_kb"] - base["rss_kb"]) / 1024)
            mem.setdefault(v + "_hwm", []).append((r["hwm_kb"] - base["hwm_kb"]) / 1024)
            mem.setdefault(v + "_anon", []).append(((r.get("anon_kb") or 0) -
                                                    (base.get("anon_kb") or 0)) / 1024)
            if v == "wandb":
                mem.setdefault("wandb_side", []).append(r["side_rss_kb"] / 1024)
        mem.setdefault("none_rss", []).append(base["rss_kb"] / 1024)

    def ratio(a, b, iv):
        return B.spread([x / y if y > 0 else float("nan")
                         for x, y in zip(per[(a, iv)], per[(b, iv)])])

    rows, summary = [], {}
    for iv in INTERVALS:
        for v, label in (("floor", "floor: same request, send()/recv()"),
                         ("mlflow", "MLflow SystemMetricsMonitor"),
                         ("scopemeter", "scopemeter, Python front"),
                         ("cli", "scopemeter run (CLI process)"),
                         ("wandb", "W&B (in-process + wandb-core)")):
            if v == "wandb" and not c.wandb:
                rows.append([f"{iv:g} s x 1", label, f"n/a: {c.wandb_why}", "", "", ""])
                continue
            s = B.spread(per[(v, iv)])
            summary[f"{v}@{iv:g}"] = s
            r_front = ratio(v, "scopemeter", iv) if v != "scopemeter" else None
            r_cli = ratio(v, "cli", iv) if v != "cli" else None
            r_floor = ratio(v, "floor", iv) if v != "floor" else None
            rows.append([f"{iv:g} s x 1", label, B.fmt_spread(s),
                         B.fmt_spread(r_front) if r_front else "1",
                         B.fmt_spread(r_cli) if r_cli else "1",
                         B.fmt_spread(r_floor) if r_floor else "1"])
    fd = {k: B.spread(v) for k, v in floor_detail.items()}
    floor_note = [
        f"floor: bench/window_floor, one process per period, same span: each window the "
        f"pread of the collectors' kept descriptors + statvfs (table 1's floor) and the "
        f"log-batch request scopemeter sent ({req_len} bytes, {req_head} of them headers, "
        "captured through a forwarder), byte for byte, with send() on a kept-alive socket to "
        "the same server, the reply read with recv(); getrusage(RUSAGE_SELF) over the span; "
        "and the process-tree collector's reads of the front's tree (/proc/PID/task, each "
        "thread's children, each process's stat; smaps_rollup once before the first window, as "
        "the product's baseline at enable, then every 300 s: in the span "
        + "/".join(str(int(max(rep["floor"][iv].get("tree_rollups_in_span", 0)
                               for rep in reps))) for iv in INTERVALS) + " times)",
        "floor per window: " + "; ".join(
            f"{iv:g} s: reads {B.fmt_num(fd[('read_cpu_s', iv)]['median'] * 1e3)} ms, "
            f"send+recv {B.fmt_num(fd[('deliver_cpu_s', iv)]['median'] * 1e3)} ms, "
            f"connects {B.fmt_num(fd[('connects', iv)]['median'], 2)} "
            f"(server had closed: {B.fmt_num(fd[('server_closed', iv)]['median'], 2)})"
            for iv in INTERVALS)]
    c.tables.append(B.table(
        "2. CPU per logging window spent on monitoring (ms; training process otherwise idle)",
        ["period", "monitor", "ms/window", "x scopemeter front", "x scopemeter CLI", "x floor"],
        rows,
        [f"{p['s2_reps']} repetitions, all variants at the same time against one mlflow server; "
         f"each measured over {span:g} s ({span / INTERVALS[0]:g} windows at "
         f"{INTERVALS[0]:g} s, {span / INTERVALS[1]:g} at {INTERVALS[1]:g} s) after "
         f"{warm:g} s of warm-up, minus an unmonitored process over the same span",
         "in-process: getrusage(RUSAGE_SELF); CLI: wait4() rusage of `scopemeter run -- sleep "
         "T` minus that of `-- sleep 0` (start-up and end cancel), over T/period windows",
         "W&B: the training process's extra CPU plus wandb-core + wandb-symon from "
         "/proc/<pid>/stat (10 ms ticks)"] + floor_note))
    for iv in INTERVALS:
        for who in ("scopemeter", "cli"):
            r = ratio("mlflow", who, iv)
            name = "Python front" if who == "scopemeter" else "CLI"
            c.targets.append((f"2 window cost @ {iv:g} s, {name}",
                              "MLflow / scopemeter >= 10x", f"{B.fmt_num(r['median'])}x",
                              r["median"] >= 10))
    for iv in INTERVALS:
        for who in ("scopemeter", "cli"):
            r = ratio(who, "floor", iv)
            name = "Python front" if who == "scopemeter" else "CLI"
            c.targets.append((f"2 window cost @ {iv:g} s, {name}, to the floor",
                              "scopemeter <= 3x floor", f"{B.fmt_num(r['median'])}x",
                              r["median"] <= 3))
    c.results["2_floor"] = {f"{k[0]}@{k[1]:g}": v for k, v in fd.items()}

    # context: what one MLflow client call costs the calling Python thread
    r = subprocess.run(c.py("sample_py.py", "rest", "--uri", c.server.uri, "--iters",
                            p["s2_rest_iters"]), env=c.env(), capture_output=True, text=True,
                       timeout=600)
    calls = B.parse_result(r.stdout)
    if r.returncode != 0 or calls is None:
        raise RuntimeError(f"sample_py.py rest failed: {r.stderr[-800:]}")
    c.tables.append(B.table(
        "2b. Context for table 2: client-side CPU of one MlflowClient call from Python (us)",
        ["call", "us/call"],
        [["log_batch, 8 metrics (scopemeter front: one per window)",
          B.fmt_spread(B.spread(calls["log_batch_8"]))],
         ["get_run (MLflow's monitor: one before every sample)",
          B.fmt_spread(B.spread(calls["get_run"]))]],
        [f"{p['s2_rest_iters']} calls each, time.thread_time() around each, same server"]))
    c.results["2b"] = {k: B.spread(v) for k, v in calls.items()}

    # 4: W&B per sample
    rows4 = []
    for iv in INTERVALS:
        if not c.wandb:
            rows4.append([f"{iv:g} s", f"n/a: {c.wandb_why}", "", "", "", ""])
            continue
        rows4.append([f"{iv:g} s", B.fmt_spread(B.spread(side[("core", iv)])),
                      B.fmt_spread(B.spread(side[("inproc", iv)])),
                      B.fmt_spread(B.spread(per[("wandb", iv)])),
                      B.fmt_spread(ratio("wandb", "scopemeter", iv)),
                      B.fmt_spread(ratio("wandb", "cli", iv))])
    c.tables.append(B.table(
        "4. W&B system monitor (offline; wandb-core samples), CPU per sample (ms)",
        ["interval", "wandb-core+symon", "training proc", "total", "x sm front", "x sm CLI"],
        rows4,
        [f"wandb {c.wandb}, x_stats_sampling_interval = the interval; same processes and "
         "repetitions as table 2" if c.wandb else f"wandb not measured: {c.wandb_why}"]))

    # 5: memory
    rows5 = [["(baseline) no monitor, RSS", B.fmt_spread(B.spread(mem["none_rss"])), "", ""]]
    for v, label in (("mlflow", "MLflow SystemMetricsMonitor"),
                     ("scopemeter", "scopemeter, Python front"),
                     ("wandb", "W&B (in training process)")):
        if v == "wandb" and not c.wandb:
            rows5.append([label, f"n/a: {c.wandb_why}", "", ""])
            continue
        rows5.append([label, B.fmt_spread(B.spread(mem[v])),
                      B.fmt_spread(B.spread(mem[v + "_hwm"])),
                      B.fmt_spread(B.spread(mem[v + "_anon"]))])
    if c.wandb:
        rows5.append(["W&B wandb-core + wandb-symon (own RSS)",
                      B.fmt_spread(B.spread(mem["wandb_side"])), "", ""])
    rows5.append(["scopemeter run (CLI, own RSS)", B.fmt_spread(B.spread(mem["cli_rss"])), "",
                  B.fmt_spread(B.spread(mem["cli_anon"]))])
    rows5.append(["scopemeter, Python front, https", B.fmt_spread(B.spread(mem["scopemeter_https"])),
                  B.fmt_spread(B.spread(mem["scopemeter_https_hwm"])),
                  B.fmt_spread(B.spread(mem["scopemeter_https_anon"]))])
    rows5.append(["scopemeter run (CLI, own RSS), https",
                  B.fmt_spread(B.spread(mem["cli_rss_https"])), "",
                  B.fmt_spread(B.spread(mem["cli_anon_https"]))])
    c.tables.append(B.table(
        "5. Resident memory added to the training process (MB, at the 1 s interval)",
        ["monitor", "VmRSS added", "VmHWM added", "RssAnon added"], rows5,
        [f"VmRSS/VmHWM/RssAnon from /proc/self/status after {warm + span:g} s, minus the "
         "unmonitored process (which imports mlflow and opens a run too); out-of-process "
         "monitors: their own",
         "RssAnon: private memory; the rest of VmRSS is file pages (the extension's or the "
         "CLI's code, libc's), clean and shared between processes",
         "the front's package is byte-compiled first, as pip installs it (bench/README.md)",
         "https: a TLS forwarder the harness starts in front of the same server, with its own "
         "self-signed certificate (EC P-256) given as MLFLOW_TRACKING_SERVER_CERT_PATH; the front "
         "minus an unmonitored process that opens its run over https too; CPU per window "
         f"there: front {B.fmt_spread(B.spread(per[('scopemeter', 'https')]))} ms, CLI "
         f"{B.fmt_spread(B.spread(per[('cli', 'https')]))} ms (1 s)"]))
    c.results["2"] = {"ms_per_window": {f"{k[0]}@{k[1] if isinstance(k[1], str) else f'{k[1]:g}'}": v
                                        for k, v in per.items()},
                      "summary": summary}
    c.results["4"] = {f"{k[0]}@{k[1]:g}": v for k, v in side.items()}
    for what, key, cap in (("front, VmRSS added", "scopemeter", 1.0),
                           ("front, RssAnon added", "scopemeter_anon", 1.0),
                           ("CLI, own VmRSS", "cli_rss", 4.0),
                           ("CLI, own RssAnon", "cli_anon", 4.0)):
        m = B.spread(mem[key])["median"]
        c.targets.append((f"5 memory, {what}", f"<= {cap:g} MB", f"{B.fmt_num(m)} MB", m <= cap))
    # https (issue 25): the front through the OpenSSL the process holds, the
    # CLI with the TLS module's own
    for what, key, cap in (("front over https, VmRSS added", "scopemeter_https", 1.5),
                           ("CLI over https, own VmRSS", "cli_rss_https", 5.0)):
        m = B.spread(mem[key])["median"]
        c.targets.append((f"5 memory, {what}", f"<= {cap:g} MB", f"{B.fmt_num(m)} MB", m <= cap))
    c.results["5"] = mem
    def k2s(k):
        return k if isinstance(k, str) else f"{k:g}"
    c.results["2_raw"] = [{"workers": {f"{k[0]}@{k2s(k[1])}": v for k, v in r["workers"].items()},
                           "cli": {f"{k2s(k[0])}s/sleep{k[1]:g}": {x: y for x, y in v.items()
                                                                    if x != "stderr"}
                                   for k, v in r["cli"].items()},
                           "floor": {k2s(k): v for k, v in r["floor"].items()}} for r in reps]
