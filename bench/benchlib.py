"""benchlib.py — what every part of the bench/ harness shares: statistics over
repeated runs, process accounting read from /proc, the environment children
run in, the real `mlflow server` they log to, and the small-table printer.

Why a module of its own: the driver (bench/run) and the child programs
(worker.py, train.py, sample_py.py) measure in different processes, but must
read CPU time and memory the same way, or the ratios compare different things.
"""
import compileall
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
TESTS_PY = os.path.join(ROOT, "tests", "py")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---- statistics -----------------------------------------------------------------


def quantile(sorted_vals, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_vals:
        return float("nan")
    pos = (len(sorted_vals) - 1) * q
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def spread(values):
    """{median, lo, hi, n, kind}: p10-p90 from 10 values on, min-max below."""
    v = sorted(x for x in values if x is not None and math.isfinite(x))
    if not v:
        return {"median": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0,
                "kind": "none"}
    if len(v) >= 10:
        return {"median": quantile(v, 0.5), "lo": quantile(v, 0.1), "hi": quantile(v, 0.9),
                "n": len(v), "kind": "p10-p90"}
    return {"median": quantile(v, 0.5), "lo": v[0], "hi": v[-1], "n": len(v), "kind": "min-max"}


def fmt_num(x, digits=None):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if digits is None:
        ax = abs(x)
        digits = 0 if ax >= 1000 else 1 if ax >= 100 else 2 if ax >= 1 else 3
    return f"{x:.{digits}f}"


def fmt_spread(s, digits=None):
    """'12.3 [11.9-13.0]' (median [lo-hi]); n/a when nothing was measured."""
    if not s or s["n"] == 0:
        return "n/a"
    if s["n"] == 1:
        return fmt_num(s["median"], digits)
    return f"{fmt_num(s['median'], digits)} [{fmt_num(s['lo'], digits)}-{fmt_num(s['hi'], digits)}]"


# ---- process accounting ------------------------------------------------------------


def self_cpu_s():
    """CPU time of this whole process (every thread, exited ones too)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_cpu_s(pid):
    """utime + stime of a process from /proc/<pid>/stat (all its threads,
    exited ones included; clock ticks, so 1/CLK_TCK s resolution); None when
    it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # proc(5): utime is field 14, stime 15; after "(comm)" they are 11 and 12
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status_kb(pid, field):
    """VmRSS / VmHWM / ... of /proc/<pid>/status in kB, None when absent."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def descendants(pid):
    """Every live process below pid (children, grandchildren, ...)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def proc_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


# ---- environment -----------------------------------------------------------------


def load_conftest():
    """tests/py/conftest: clean_env(), start_mlflow_server(), stop_mlflow_server()."""
    if TESTS_PY not in sys.path:
        sys.path.insert(0, TESTS_PY)
    import conftest  # noqa: E402  (imports pytest, which the tests need anyway)
    return conftest


def pyfront_dir(build):
    """A directory to put on PYTHONPATH so `import scopemeter` loads this
    checkout's Python front with the extension built in `build`: the package's
    .py files (the _report/ package's too), build/python/_native*.so and the TLS modules copied side by side under
    build/bench-pyfront/scopemeter.  Copied, not linked, when the harness
    starts: an edit of python/scopemeter during a 20-minute run must not mix
    new Python with the extension built before it.  None when the extension
    is not built (the harness then uses an installed scopemeter, if any)."""
    ext_dir = os.path.join(build, "python")
    try:
        # the extension and the TLS module beside it, as installed
        exts = [f for f in os.listdir(ext_dir) if f.endswith(".so") and
                (f.startswith("_native") or f.startswith("scopemeter-https"))]
    except OSError:
        return None
    if not exts:
        return None
    top = os.path.join(build, "bench-pyfront")
    pkg = os.path.join(top, "scopemeter")
    shutil.rmtree(pkg, ignore_errors=True)
    os.makedirs(pkg)
    src = os.path.join(ROOT, "python", "scopemeter")
    for f in os.listdir(src):
        if f.endswith(".py"):
            shutil.copy2(os.path.join(src, f), pkg)
        elif os.path.isfile(os.path.join(src, f, "__init__.py")):  # a subpackage: _report/
            shutil.copytree(os.path.join(src, f), os.path.join(pkg, f),
                            ignore=shutil.ignore_patterns("__pycache__"))
    for f in exts:
        shutil.copy2(os.path.join(ext_dir, f), pkg)
    # Byte-compiled, as pip installs a package: without .pyc files (and with
    # PYTHONDONTWRITEBYTECODE set, as here) every interpreter compiles
    # the front's and the report's modules at import, and the compiler's ~2 MB of freed
    # heap stays resident, which table 5 would charge to the front.
    compileall.compile_dir(pkg, quiet=1)
    return top


def child_env(pythonpath=None, **extra):
    """The launcher- and MLflow-variable-free environment of conftest, with the
    Python front and bench/ importable; extra variables on top."""
    env = load_conftest().clean_env()
    parts = [p for p in (pythonpath, BENCH, env.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    env["WANDB_MODE"] = "offline"
    env["WANDB_SILENT"] = "true"
    env["WANDB_DISABLE_GIT"] = "true"
    for k in ("MLFLOW_ENABLE_ASYNC_LOGGING", "MLFLOW_SQLALCHEMYSTORE_POOLCLASS",
              "MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        env.pop(k, None)  # the driver's and its servers' settings, not the clients'
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


# ---- the tracking server ------------------------------------------------------------


class Server:
    """A real `mlflow server` (sqlite, loopback) started with conftest's
    helper; pause()/resume() SIGSTOP/SIGCONT its whole process group (the
    server and its uvicorn worker) to play a server that stopped answering."""

    def __init__(self, tmpdir):
        self.tmpdir = tmpdir
        self.proc, self.uri = load_conftest().start_mlflow_server(tmpdir)
        self.db = os.path.join(tmpdir, "mlflow.db")
        self.paused = False

    def pause(self):
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self):
        if self.paused:
            os.killpg(self.proc.pid, signal.SIGCONT)
            self.paused = False

    def stop(self):
        self.resume()
        load_conftest().stop_mlflow_server(self.proc)


# ---- a byte forwarder in front of the server: capture, TLS ----------------------------


def self_signed_cert(directory, kind="ec"):
    """cert.pem + key.pem for 127.0.0.1 (EC P-256, or kind="rsa": RSA 2048;
    self-signed, 2 days), with `cryptography` (an MLflow dependency), as
    tests/py/test_secrets_tls.py."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    os.makedirs(directory, exist_ok=True)
    now_ = datetime.datetime.now(datetime.timezone.utc)
    key = rsa.generate_private_key(65537, 2048) if kind == "rsa" else \
        ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now_ - datetime.timedelta(hours=1))
            .not_valid_after(now_ + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    certf, keyf = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(certf, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(keyf, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return certf, keyf


class Forwarder:
    """A TCP forwarder on loopback in front of the server, in a thread of
    the harness (asyncio): every byte both ways, unchanged, and a close on
    one side closes the other — so the server's keep-alive behaviour (uvicorn
    closes a connection idle for 5 s) reaches the client as it is.

    record=True keeps what each client connection sent (capture of the
    log-batch request the floor replays, byte for byte); tls=(cert, key)
    serves TLS with that certificate (the https endpoint of table 5)."""

    def __init__(self, upstream_uri, record=False, tls=None):
        import asyncio
        import ssl
        import threading
        import urllib.parse

        u = urllib.parse.urlsplit(upstream_uri)
        self.up_host, self.up_port = u.hostname, u.port
        self.record = record
        self.streams = []      # bytearray per client connection (record=True)
        self.connections = 0
        ctx = None
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=ctx), self.loop).result(30)
        self.port = self.server.sockets[0].getsockname()[1]
        self.uri = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    async def _handle(self, reader, writer):
        import asyncio
        self.connections += 1
        rec = None
        if self.record:
            rec = bytearray()
            self.streams.append(rec)
        try:
            ur, uw = await asyncio.open_connection(self.up_host, self.up_port)
        except OSError:
            writer.close()
            return

        async def pump(src, dst, keep):
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    if keep is not None:
                        keep += data
                    dst.write(data)
                    await dst.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                try:
                    dst.close()
                except Exception:
                    pass
        await asyncio.gather(pump(reader, uw, rec), pump(ur, writer, None),
                             return_exceptions=True)

    def requests(self, path_prefix):
        """The raw requests (request line, headers, body) whose path starts
        with path_prefix, in the order sent, from every recorded connection."""
        out = []
        for st in list(self.streams):
            data = bytes(st)
            while data:
                end = data.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = data[:end].decode("latin-1")
                length = 0
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                total = end + 4 + length
                if len(data) < total:
                    break
                parts = head.split(" ", 2)
                if len(parts) > 1 and parts[1].startswith(path_prefix):
                    out.append(data[:total])
                data = data[total:]
        return out

    def close(self):
        def stop():
            self.server.close()
            self.loop.stop()
        self.loop.call_soon_threadsafe(stop)
        self.thread.join(10)


# ---- children ----------------------------------------------------------------------


RESULT = "RESULT "


def emit(obj):
    """A child's one result line (stdout), parsed by parse_result()."""
    sys.stdout.write(RESULT + json.dumps(obj) + "\n")
    sys.stdout.flush()


def parse_result(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    return None


def kill_group(proc):
    """Ends a child started with start_new_session=True, and its children."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def now():
    return time.monotonic()


# ---- tables ------------------------------------------------------------------------


def table(title, header, rows, note=None):
    """A plain-text table: first column left-aligned, the rest right-aligned."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = [title]
    for k, r in enumerate(cells):
        line = "  " + r[0].ljust(widths[0])
        for i in range(1, len(r)):
            line += "  " + r[i].rjust(widths[i])
        out.append(line.rstrip())
        if k == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    if note:
        for n in note if isinstance(note, list) else [note]:
            out.append("  " + n)
    return "\n".join(out)
