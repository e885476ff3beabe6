"""Which build recorded a run (issue 32, item 5): every collecting rank
writes the start tag scopemeter.rankN.build (docs/series.md, "Run tags"),
read back from a real MLflow server, from the CLI and from the Python front.
The suite runs the development build (SCOPEMETER_BUILD); the wheel, the
bundle and the venv CLI: tests/py/test_wheel.py."""
import json
import os
import re
import subprocess
import sys

from pyfront_util import python_env, read_run, staged_package
from runread import get_run, run_cli, tags_of
from test_rest_faults import pki  # noqa: F401  (fixture)

VERSION = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "VERSION")).read().strip()


def fields(value):
    """The tag's space-separated key=value fields (the path last)."""
    return dict(f.split("=", 1) for f in value.split(" "))


def test_cli_run_tags_its_build(scopemeter_bin, mlflow_server):
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 0 and p.run_id, p.stderr
    f = fields(tags_of(get_run(mlflow_server, p.run_id))["scopemeter.rank0.build"])
    assert f == {"version": VERSION, "install": "development", "tls": "none-yet",
                 "path": os.path.realpath(scopemeter_bin)}, f
    # docs/series.md's search for the runs one build recorded
    import mlflow
    mlflow.set_tracking_uri(mlflow_server)
    found = mlflow.search_runs(search_all_experiments=True, filter_string=(
        'tags.`scopemeter.rank0.build` LIKE "version=%s install=development %%"' % VERSION))
    assert p.run_id in set(found["run_id"]), found
    none = mlflow.search_runs(search_all_experiments=True, filter_string=(
        'tags.`scopemeter.rank0.build` LIKE "version=%s install=bundle %%"' % VERSION))
    assert p.run_id not in set(none["run_id"])


def test_python_front_tags_its_build(mlflow_server):
    from pyfront_util import new_run
    assert staged_package(), "SCOPEMETER_BUILD unset: the suite runs the development build"
    run_id = new_run(mlflow_server)
    code = ("import time, scopemeter; assert scopemeter.enable_system_metrics(interval=0.5); "
            "time.sleep(1); scopemeter.disable_system_metrics()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=python_env(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id))
    assert p.returncode == 0, p.stderr
    _, tags = read_run(mlflow_server, run_id)
    f = fields(tags["scopemeter.rank0.build"])
    ext = os.path.realpath(os.path.join(os.environ["SCOPEMETER_BUILD"], "python",
                                        "_native.abi3.so"))
    assert f == {"version": VERSION, "install": "development", "tls": "none-yet",
                 "path": ext}, f
    assert re.fullmatch(r"\d+\.\d+\.\d+", f["version"])


def test_cli_over_https_tags_the_bundled_module(scopemeter_bin, mlflow_server, pki):  # noqa: F811
    """The CLI holds no OpenSSL of its own: over https it loads the static
    module (src/mlflow/curl_api.c), at the run check, before the start tags."""
    from faultproxy import FaultProxy
    px = FaultProxy(mlflow_server, tls=(str(pki / "server.pem"), str(pki / "server.key"), None))
    try:
        p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                    env={"MLFLOW_TRACKING_URI": px.uri,
                         "MLFLOW_TRACKING_SERVER_CERT_PATH": str(pki / "ca.pem")})
        assert p.returncode == 0 and p.run_id, p.stderr
    finally:
        px.close()
    f = fields(tags_of(get_run(mlflow_server, p.run_id))["scopemeter.rank0.build"])
    assert f["tls"] == "bundled" and f["install"] == "development", f


def test_nvml_driver_in_the_build_tag(scopemeter_bin, tmp_path):
    """With NVML loaded (the fake of tests/fakenvml, driver 550.54.15, in a
    fake machine with /dev/nvidia0) the tag carries nvml=; the path is the
    process's own, not the sysroot's."""
    from test_gpu import fake_dir
    root = tmp_path / "root"
    for f, text in (("proc/stat", "cpu  100 0 100 1000 10 0 0 0 0 0\n"),
                    ("proc/meminfo", "MemTotal:       16384000 kB\nMemFree:  4096000 kB\n"
                                     "MemAvailable:    8192000 kB\n"),
                    ("proc/self/cgroup", "0::/\n"), ("dev/nvidia0", "")):
        os.makedirs(os.path.dirname(root / f), exist_ok=True)
        (root / f).write_text(text)
    out = tmp_path / "run.jsonl"
    p = run_cli(scopemeter_bin, ["--interval", "0.2", "--jsonl", str(out), "--", "true"],
                env={"SCOPEMETER_SYSROOT": str(root), "SCOPEMETER_NVML_LIBRARY":
                     os.path.join(fake_dir(), "libnvidia-ml.so.1")})
    assert p.returncode == 0, p.stderr
    tags = {r["key"]: r["value"] for r in map(json.loads, out.read_text().splitlines())
            if r["kind"] == "tag"}
    assert tags["scopemeter.rank0.gpu"].startswith("nvml 550.54.15"), tags
    f = fields(tags["scopemeter.rank0.build"])
    assert f["nvml"] == "550.54.15" and f["path"] == os.path.realpath(scopemeter_bin), f
