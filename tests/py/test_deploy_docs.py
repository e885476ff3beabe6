"""The deployment pages as a platform engineer uses them (docs/kubernetes.md,
docs/slurm.md): what is written there is what runs here, read from the page
itself, never from a second copy.

- Every YAML document of docs/kubernetes.md loads into the official
  Kubernetes Python client's model of its kind (`kubernetes` from PyPI) and
  serializes back to the same document: the client drops a field it does not
  know and coerces a value of another type, so the round trip is compared
  with the page.  The CRDs (RayJob, PyTorchJob, TrainJob) have no model:
  their pod templates are checked as V1PodTemplateSpec.
- scripts/build-bundle makes the OCI image layout from the session's wheels:
  the index lists amd64 and arm64, each manifest's layer holds
  /opt/scopemeter with the CLI of its arch (ELF header) and /bundle-copy,
  `skopeo copy --all` copies it (a registry's stand-in: another layout), and
  a second build gives the same digest.
- The two pods of docs/kubernetes.md §1 under runc (Debian's, as
  tests/py/test_oci.py): the Debian 11 root of the portability tier
  read-only, the image's amd64 layer unpacked and mounted read-only where the
  manifest mounts it ((b): the init container's command run first in the
  image's own root, into a directory then mounted read-only), the env and
  limits of the manifest; the container records into the suite's MLflow
  server: node tier from NODE_NAME, the limits' tags, every point delivered.
- The sbatch script of docs/slurm.md runs as a shell script with Slurm's
  variables set as srun sets them for one task; srun, which needs slurmd, is a
  function that runs its command once (the one task of one node); torchrun is
  the real one (torch on this machine).
Tier `oci` (runc) and `wheel` (the wheels); cheap once the wheels and the
root are made.
"""
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import uuid

import pytest
import yaml

from conftest import ROOT, have, is_root
from pyfront_util import new_run, read_run
from roots import build_root
from test_wheel import CLOSING

pytestmark = [pytest.mark.oci, pytest.mark.wheel]

DOCS = os.path.join(ROOT, "docs")
NODE = "deploy-node-1"
ELF_MACHINE = {"amd64": 0x3E, "arm64": 0xB7}  # EM_X86_64, EM_AARCH64 (elf.h)


def fenced(page, lang):
    text = open(os.path.join(DOCS, page), encoding="utf-8").read()
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def documents():
    return [d for block in fenced("kubernetes.md", "yaml") for d in yaml.safe_load_all(block) if d]


def by_name(name):
    docs = [d for d in documents() if d["metadata"]["name"] == name]
    assert len(docs) == 1, (name, [d["metadata"]["name"] for d in documents()])
    return docs[0]


# ---- the manifests load into the client's models ------------------------------

def differences(orig, back, path=""):
    """Where the round trip differs from the page: a field dropped (unknown to
    the model) or a value changed (coerced from another type)."""
    if isinstance(orig, dict) and isinstance(back, dict):
        out = []
        for k in orig:
            if k not in back:
                out.append(f"{path}.{k}: not in the model (unknown field)")
            else:
                out += differences(orig[k], back[k], f"{path}.{k}")
        return out + [f"{path}.{k}: added" for k in back if k not in orig]
    if isinstance(orig, list) and isinstance(back, list) and len(orig) == len(back):
        return [d for i, (a, b) in enumerate(zip(orig, back))
                for d in differences(a, b, f"{path}[{i}]")]
    if orig != back or type(orig) is not type(back):
        return [f"{path}: {orig!r} ({type(orig).__name__}) came back {back!r}"]
    return []


def check_model(doc, klass):
    from kubernetes.client import ApiClient
    api = ApiClient()
    try:  # this client's models (pydantic) refuse a value of another type
        obj = api._ApiClient__deserialize(doc, klass)
    except Exception as e:  # noqa: BLE001 (its message is the verdict)
        return [f"{klass}: {type(e).__name__}: {e}"]
    back = api.sanitize_for_serialization(obj)
    return differences(doc, back, klass)


def crd_templates(doc):
    """(path, pod template) of the CRDs this page uses."""
    spec, kind = doc["spec"], doc["kind"]
    if kind == "RayJob":
        rc = spec["rayClusterSpec"]
        return [("headGroupSpec", rc["headGroupSpec"]["template"])] + \
            [(f"workerGroupSpecs[{g['groupName']}]", g["template"]) for g in rc["workerGroupSpecs"]]
    if kind == "PyTorchJob":
        return [(f"pytorchReplicaSpecs.{r}", s["template"])
                for r, s in spec["pytorchReplicaSpecs"].items()]
    raise AssertionError(f"no check for {kind}")


def test_every_manifest_loads_into_the_clients_models():
    docs = documents()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["Pod", "Pod", "Pod", "Job", "PyTorchJob", "TrainJob", "RayJob",
                            "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]), kinds
    bad = []
    for d in docs:
        if d["apiVersion"] in ("v1", "batch/v1", "admissionregistration.k8s.io/v1"):
            bad += check_model(d, "V1" + d["kind"])
        elif d["kind"] == "TrainJob":
            for i, e in enumerate(d["spec"]["trainer"]["env"]):
                bad += check_model(e, "V1EnvVar")
        else:
            for path, t in crd_templates(d):
                bad += [f"{d['kind']}.{path}: {x}" for x in check_model(t, "V1PodTemplateSpec")]
    assert not bad, "\n".join(bad)


def test_the_model_check_can_fail():
    """A misspelt field and a number where a string goes are caught."""
    pod = by_name("train-init-copy")
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 2
    bad = check_model(pod, "V1Pod")
    assert any("limits.cpu" in b and "valid string" in b for b in bad), bad
    pod = by_name("train-init-copy")
    pod["spec"]["containers"][0]["volumeMount"] = pod["spec"]["containers"][0].pop("volumeMounts")
    bad = check_model(pod, "V1Pod")
    assert any("volumeMount: not in the model" in b for b in bad), bad


# ---- the bundle image ---------------------------------------------------------

def need_tools():
    if not is_root():
        pytest.skip("runc and the image's owners need root")
    for tool in ("umoci", "skopeo", "runc"):
        if not have(tool):
            pytest.fail(f"{tool} is not installed (scripts/install-deps)")


def build_bundle(wheels, out):
    p = subprocess.run([os.path.join(ROOT, "scripts", "build-bundle"), "--out", str(out),
                        wheels["x86_64"][0], wheels["aarch64"][0]],
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def bundle(wheels, tmp_path_factory):
    need_tools()
    out = tmp_path_factory.mktemp("bundle") / "layout"
    return out, build_bundle(wheels, out)


def blob(layout, digest):
    algo, hexd = digest.split(":")
    with open(os.path.join(layout, "blobs", algo, hexd), "rb") as f:
        return f.read()


def layers_of(layout, ref):
    """{arch: the manifest's one layer as a tarfile} from the index at ref."""
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{ref}"], capture_output=True,
                         text=True, check=True).stdout
    index = json.loads(raw)
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json", index
    out = {}
    for m in index["manifests"]:
        manifest = json.loads(blob(layout, m["digest"]))
        config = json.loads(blob(layout, manifest["config"]["digest"]))
        assert config["architecture"] == m["platform"]["architecture"], (config, m)
        assert config["os"] == "linux", config
        out[m["platform"]["architecture"]] = [
            tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(layout, ly["digest"]))))
            for ly in manifest["layers"]]
    return out


def elf_machine(data):
    assert data[:4] == b"\x7fELF" and data[4] == 2, data[:8]  # ELFCLASS64
    return int.from_bytes(data[18:20], "little")


@pytest.mark.timeout(1800)
def test_the_bundle_image_holds_each_arch(bundle, wheels, tmp_path):
    layout, ref = bundle
    layers = layers_of(layout, ref)
    assert sorted(layers) == ["amd64", "arm64"], sorted(layers)
    for arch, tars in layers.items():
        files = {m.name.lstrip("./"): (t, m) for t in tars for m in t.getmembers()}
        for path in ("opt/scopemeter/bin/scopemeter", "bundle-copy",
                     "opt/scopemeter/scopemeter/_native.abi3.so",
                     "opt/scopemeter/scopemeter/__init__.py"):
            assert path in files, (arch, path, sorted(files)[:20])
        for path in ("opt/scopemeter/bin/scopemeter", "bundle-copy",
                     "opt/scopemeter/scopemeter/_native.abi3.so"):
            t, m = files[path]
            assert m.mode & 0o111 or path.endswith(".so"), (arch, path, oct(m.mode))
            assert elf_machine(t.extractfile(m).read(64)) == ELF_MACHINE[arch], (arch, path)
        assert not [p for p in files if p.endswith(".pyc") or "direct_url.json" in p], arch
        assert {m.uid for _, m in files.values()} == {0}, arch
    # what a push does, to another layout instead of a registry
    copy = tmp_path / "copy"
    p = subprocess.run(["skopeo", "copy", "--all", f"oci:{ref}", f"oci:{copy}:pushed"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert sorted(layers_of(str(copy), f"{copy}:pushed")) == ["amd64", "arm64"]
    # deterministic: a second build of the same wheels, the same index
    again = build_bundle(wheels, tmp_path / "again")
    digests = [subprocess.run(["skopeo", "inspect", "--raw", f"oci:{r}"], capture_output=True,
                              check=True).stdout for r in (ref, again)]
    assert digests[0] == digests[1], digests


# ---- the pods of docs/kubernetes.md §1 under runc --------------------------------

def unpack_layer(layout, ref, arch, dest):
    for t in layers_of(layout, ref)[arch]:
        t.extractall(dest, numeric_owner=True)
    return dest


def quantity(q):
    """A Kubernetes quantity of the page: 700Mi, 1500m, 2."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for u, f in units.items():
        if q.endswith(u):
            return int(q[:-2]) * f
    return int(q[:-1]) / 1000 if q.endswith("m") else float(q)


def container_env(container):
    """The env the kubelet gives the container: the downward API's node name
    resolved to this test's node."""
    env = {}
    for e in container["env"]:
        if "valueFrom" in e:
            assert e["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}, e
            env[e["name"]] = NODE
        else:
            env[e["name"]] = e["value"]
    return env


def runc(bundle_dir, rootfs, args, env, mounts, limits=None, cwd="/", timeout=300):
    """Runs args in a runc container on rootfs, sharing the host's network
    (the suite's MLflow server on 127.0.0.1); (returncode, stdout, stderr)."""
    os.makedirs(bundle_dir)
    subprocess.run(["runc", "spec"], cwd=bundle_dir, check=True)
    cfg_path = os.path.join(bundle_dir, "config.json")
    cfg = json.load(open(cfg_path))
    name = f"scopemeter-deploy-{uuid.uuid4().hex[:10]}"
    cfg["process"].update(terminal=False, args=args, cwd=cwd,
                          env=[f"{k}={v}" for k, v in env.items()])
    cfg["root"] = {"path": str(rootfs), "readonly": True}
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
    for dest in ("/tmp", "/var/tmp"):
        cfg["mounts"].append({"destination": dest, "type": "tmpfs", "source": "tmpfs",
                              "options": ["nosuid", "nodev", "mode=1777"]})
    cfg["mounts"] += [{"destination": d, "type": "bind", "source": str(s),
                       "options": ["rbind"] + (["ro"] if ro else ["rw"]) +
                       (["noexec"] if ro == "noexec" else [])} for d, s, ro in mounts]
    cfg["linux"]["cgroupsPath"] = f"/{name}"
    if limits:
        cfg["linux"]["resources"].update({
            "memory": {"limit": int(quantity(limits["memory"]))},
            "cpu": {"quota": int(quantity(limits["cpu"]) * 100000), "period": 100000}})
    json.dump(cfg, open(cfg_path, "w"))
    try:
        p = subprocess.run(["runc", "run", "--bundle", str(bundle_dir), name],
                           capture_output=True, text=True, timeout=timeout)
    finally:
        subprocess.run(["runc", "delete", "--force", name], capture_output=True)
    return p.returncode, p.stdout, p.stderr


TRAIN = """import sys, scopemeter
print("front", scopemeter.__file__, scopemeter.plan(workers=1)["collectors"])
import time; time.sleep(3)
"""


@pytest.fixture(scope="module")
def debian_root():
    need_tools()
    return build_root("amd64")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("variant", ["train-image-volume", "train-init-copy"])
def test_the_pod_records_under_runc(variant, bundle, debian_root, mlflow_server, tmp_path):
    layout, ref = bundle
    pod = by_name(variant)["spec"]
    (c,) = pod["containers"]
    (vol,) = pod["volumes"]
    (mount,) = c["volumeMounts"]
    assert mount["name"] == vol["name"] and mount["readOnly"] is True, (mount, vol)
    image = unpack_layer(layout, ref, "amd64", tmp_path / "image")
    if "image" in vol:
        source = image  # the whole image at mountPath, read-only
    else:
        assert "emptyDir" in vol, vol
        (init,) = pod["initContainers"]
        (imount,) = init["volumeMounts"]
        source = tmp_path / "emptydir"
        source.mkdir()
        # the init container: its command in the image's own root (FROM scratch)
        rc, out, err = runc(tmp_path / "init", image, init["command"], {},
                            [(imount["mountPath"], source, False)], init["resources"]["limits"])
        assert rc == 0, (init["command"], out, err)
        assert (source / "bin" / "scopemeter").is_file(), sorted(os.listdir(source))
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    run_id = new_run(mlflow_server, f"deploy-{variant}")
    env = container_env(c)
    # the page's tracking URI is a cluster's: the suite's server instead; the run given
    env.update(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id, HOME="/root",
               SCOPEMETER_INTERVAL="1")
    # `python` of the manifest is the training image's; the root's with mlflow is /opt/sm/bin's
    args = ["/opt/sm/bin/python" if a == "python" else a for a in c["command"]]
    rc, out, err = runc(tmp_path / "ctr", debian_root, args, env,
                        [(mount["mountPath"], source, True), ("/tmp/work", work, False)],
                        c["resources"]["limits"], cwd="/tmp/work")
    assert rc == 0, (args, env, out[-2000:], err[-3000:])
    bundle_dir = env["PYTHONPATH"]
    assert f"front {bundle_dir}/scopemeter/__init__.py 1" in out, (out, err)
    m = [x for x in map(CLOSING.search, err.splitlines()) if x]
    assert len(m) == 1, err
    w, pts, tags, delivered, overflow, refused, undelivered = map(int, m[0].groups())
    assert w >= 2 and delivered == pts + tags and undelivered == 0, err
    metrics, got = read_run(mlflow_server, run_id)
    stored = sum(len(v) for k, v in metrics.items() if k.startswith("system/"))
    assert stored == pts, (stored, pts, sorted(metrics))
    assert f"system/node_cpu_utilization_percentage/{NODE}/rank0" in metrics, sorted(metrics)
    assert got.get("scopemeter.rank0.node") == NODE, got
    limits = c["resources"]["limits"]
    assert got.get("scopemeter.rank0.memory_limit_bytes") == str(int(quantity(limits["memory"]))), got
    assert float(got.get("scopemeter.rank0.cpu_limit_cores")) == quantity(limits["cpu"]), got
    assert bundle_dir in got.get("scopemeter.rank0.build", ""), got


@pytest.mark.timeout(1800)
def test_an_image_volume_mounted_noexec_cannot_be_used(bundle, debian_root, tmp_path):
    """docs/kubernetes.md §1 (a)'s caveat, as the page words it: on a runtime
    that mounts image volumes `noexec`, neither the CLI nor the extension
    can be used from the mount (hence (b))."""
    layout, ref = bundle
    c = by_name("train-image-volume")["spec"]["containers"][0]
    (mount,) = c["volumeMounts"]
    image = unpack_layer(layout, ref, "amd64", tmp_path / "image")
    env = container_env(c)
    rc, out, err = runc(tmp_path / "ctr", debian_root,
                        ["/bin/sh", "-c", "scopemeter --version; "
                         "/opt/sm/bin/python -c 'import scopemeter'; echo done"], env,
                        [(mount["mountPath"], image, "noexec")])
    assert rc == 0 and out.strip().endswith("done"), (out, err)
    assert "scopemeter: Permission denied" in err, err
    assert "_native.abi3.so: failed to map segment from shared object" in err, err


# ---- the sbatch script of docs/slurm.md --------------------------------------

SRUN = """#!/bin/sh
# srun's stand-in: its options dropped, its command run once (one task, one node)
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
exec "$@"
"""
SCONTROL = """#!/bin/sh
# scontrol's stand-in: `show hostnames LIST` for a list of one node
[ "$1 $2" = "show hostnames" ] && echo "$3"
"""
SLURM_TRAIN = """import scopemeter
print("front", scopemeter.__file__)
import time; time.sleep(3)
"""


@pytest.mark.timeout(900)
def test_the_sbatch_script_records(bundle, mlflow_server, tmp_path):
    from conftest import free_port
    from mlflow.tracking import MlflowClient
    layout, ref = bundle
    (script,) = fenced("slurm.md", "bash")
    assert script.startswith("#!/bin/bash\n#SBATCH"), script[:80]
    image = unpack_layer(layout, ref, "amd64", tmp_path / "image")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.symlink(image / "opt" / "scopemeter", shared / "x86_64")
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "job.sh").write_text(script)
    (tmp_path / "train.py").write_text(SLURM_TRAIN)
    job = str(uuid.uuid4().int % 10**7)
    experiment = f"deploy-slurm-{job}"
    # what srun sets in the first task of a one-node, one-task-per-node step
    env = {"PATH": f"{shims}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NTASKS": "1", "SLURM_NNODES": "1",
           "SLURM_NTASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1",
           "SLURM_JOB_NODELIST": "localhost", "SLURMD_NODENAME": "localhost",
           "SLURM_GPUS_ON_NODE": "2", "SCOPEMETER_BUNDLE": str(shared),
           "MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_EXPERIMENT_NAME": experiment,
           "SCOPEMETER_INTERVAL": "1", "RDZV_PORT": str(free_port())}
    p = subprocess.run(["bash", str(tmp_path / "job.sh")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-5000:])
    bundle_dir = shared / "x86_64"
    fronts = [ln for ln in p.stdout.splitlines() if ln.startswith("front ")]
    assert fronts == [f"front {bundle_dir}/scopemeter/__init__.py"] * 2, (p.stdout, p.stderr[-3000:])
    m = [x for x in map(CLOSING.search, p.stderr.splitlines()) if x]
    assert len(m) == 1, p.stderr  # --all-workers: the node's local rank 0 only
    w, pts, tags, delivered, overflow, refused, undelivered = map(int, m[0].groups())
    assert w >= 2 and delivered == pts + tags and undelivered == 0, p.stderr
    c = MlflowClient(tracking_uri=mlflow_server)
    exp = c.get_experiment_by_name(experiment)
    runs = c.search_runs([exp.experiment_id])  # the experiment is this test's
    assert len(runs) == 1, [r.data.tags for r in runs]
    # the rendezvous id, the Slurm job's id, named the ranks' one run
    assert runs[0].data.tags.get("scopemeter.job_id") == f"torchelastic:{job}", runs[0].data.tags
    metrics, got = read_run(mlflow_server, runs[0].info.run_id)
    stored = sum(len(v) for k, v in metrics.items() if k.startswith("system/"))
    assert stored == pts, (stored, pts, sorted(metrics))
    assert "system/node_cpu_utilization_percentage/localhost/rank0" in metrics, sorted(metrics)
    assert got.get("scopemeter.rank0.node") == "localhost", got
