"""AMD GPUs from the amdgpu sysfs (src/collect/coll_amdgpu.c, docs/gpu.md) through
`scopemeter probe --json`:

- the fixture machines of tests/fixtures/make-amd-fixtures (SCOPEMETER_SYSROOT):
  one of two cards given, ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES narrowing
  (indices, UUIDs, a list cut short, an empty one), a card without hwmon and one
  reporting power1_input, an NVIDIA card in /sys/class/drm; exact values from
  the generator's own numbers;
- a node with both vendors: the fake NVML (tests/fakenvml) beside AMD cards,
  the AMD indices after NVML's, one gpu tag for both;
- an oracle we did not write: Debian's rocm-smi (AMD's own tool, through
  librocm_smi64) reads the same tree, bind-mounted over /sys in a private
  mount namespace; busy %, VRAM used, power, power cap, the edge temperature and
  the current SCLK / MCLK levels must agree.
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES, clean_env, have, is_root


def generator():
    path = os.path.join(FIXTURES, "make-amd-fixtures")
    loader = importlib.machinery.SourceFileLoader("make_amd_fixtures", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


G = generator()


def fx(name):
    return os.path.join(FIXTURES, name)


def amd_series(out):
    return {s["upstream"]: s for s in out["series"] if s["scope"] == "gpu"}


def expected(i, card, power=True):
    """The series of card (a generator dict) as gpu_<i>: MLflow's five, the
    temperature (with hwmon, like power) and the two current clock levels."""
    want = {
        f"gpu_{i}_utilization_percentage": float(card["busy"]),
        f"gpu_{i}_memory_usage_megabytes": card["used"] / 1e6,
        f"gpu_{i}_memory_usage_percentage": 100.0 * card["used"] / card["total"],
        f"gpu_{i}_sm_clock_megahertz": float(card["sclk"]),
        f"gpu_{i}_memory_clock_megahertz": float(card["mclk"]),
    }
    if power:
        want[f"gpu_{i}_power_usage_watts"] = card["uw"] / 1e6
        want[f"gpu_{i}_power_usage_percentage"] = 100.0 * card["uw"] / card["cap"]
        want[f"gpu_{i}_temperature_celsius"] = card["temp"] / 1000.0
    return want


def check(out, want):
    got = amd_series(out)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k]["raw"] == pytest.approx(v, rel=1e-12), k
        assert got[k]["key"] == f"system/{k}/rank0"


# the fixture machines have no /proc: no process is there to hold VRAM
NO_PROC = "; gpu_*_process_memory_megabytes dropped: cannot list /proc"


def amd_note(out):
    notes = [n for n in out["notes"] if n.startswith("amdgpu")]
    assert len(notes) <= 1, notes
    return notes[0] if notes else None


def test_one_of_two_cards_given(probe_json):
    """/sys/class/drm shows both cards of the node; /dev/dri holds only the
    container's: that one is logged, as gpu_0 (ROCm's index in the container)."""
    out = probe_json(sysroot=fx("amd-two-cards-one-given"))
    check(out, expected(0, G.MI250_1))
    s = amd_series(out)["gpu_0_power_usage_watts"]
    assert s["source"] == "/sys/class/drm/card1/device/hwmon/hwmon3/power1_average"
    tag = "amdgpu sysfs, 1 device (renderD129=card1 as gpu_0)"
    assert out["gpu"] == tag and out["tags"]["scopemeter.rank0.gpu"] == tag
    assert amd_note(out) == "amdgpu: renderD129=card1 as gpu_0" + NO_PROC
    # NVIDIA's "no /dev/nvidia device: gpu_* series absent" would contradict it
    assert not any("no /dev/nvidia device" in n for n in out["notes"])


def test_both_cards_given(probe_json):
    out = probe_json(sysroot=fx("amd-two-cards"))
    check(out, {**expected(0, G.MI250_0), **expected(1, G.MI250_1)})
    assert out["gpu"] == ("amdgpu sysfs, 2 devices (renderD128=card0 as gpu_0, "
                          "renderD129=card1 as gpu_1)")


NARROW = [
    # (env, cards logged as (index, card), what the note must say)
    ({"ROCR_VISIBLE_DEVICES": "1"}, [(1, G.MI250_1)],
     "ROCR_VISIBLE_DEVICES='1' narrows them to 1 of 2"),
    ({"ROCR_VISIBLE_DEVICES": "GPU-" + G.MI250_0["uid"].upper()}, [(0, G.MI250_0)],
     "narrows them to 1 of 2"),
    # HIP indexes what ROCR left: 0 of [card1] is card1
    ({"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"}, [(1, G.MI250_1)],
     "ROCR_VISIBLE_DEVICES='1' narrows them to 1 of 2"),
    ({"HIP_VISIBLE_DEVICES": "1,0"}, [(0, G.MI250_0), (1, G.MI250_1)], None),
    # the list ends at the first entry naming no device, as CUDA_VISIBLE_DEVICES
    ({"ROCR_VISIBLE_DEVICES": "1,7,0"}, [(1, G.MI250_1)],
     "ROCR_VISIBLE_DEVICES entry '7' names no device and ends the list"),
]


@pytest.mark.parametrize("env,logged,note", NARROW)
def test_visible_devices_narrow(probe_json, env, logged, note):
    out = probe_json(sysroot=fx("amd-two-cards"), env=env)
    want = {}
    for i, card in logged:
        want.update(expected(i, card))
    check(out, want)
    if note:
        assert note in amd_note(out)


@pytest.mark.parametrize("var", ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"])
@pytest.mark.parametrize("value", ["", "-1", "GPU-0000000000000000"])
def test_visible_devices_select_none(probe_json, var, value):
    out = probe_json(sysroot=fx("amd-two-cards"), env={var: value})
    assert amd_series(out) == {}
    assert out["gpu"] == f"none: no /dev/nvidia device; {var} selects no AMD device"
    assert amd_note(out) is None
    assert f"{var}='{value}' names none of the 2 AMD GPUs given: amdgpu gpu_* absent" in \
        out["notes"]


def test_card_without_hwmon(probe_json):
    """MI300 without a hwmon directory: its power and temperature series are
    dropped, said in one line; the other card reports power1_input (SMU 13),
    not power1_average."""
    out = probe_json(sysroot=fx("amd-no-hwmon"))
    check(out, {**expected(0, G.MI300_NO_HWMON, power=False), **expected(1, G.RDNA3_INPUT)})
    assert amd_series(out)["gpu_1_power_usage_watts"]["source"].endswith("/power1_input")
    assert amd_note(out) == ("amdgpu: renderD128=card0 as gpu_0, renderD129=card1 as gpu_1; "
                             "gpu_0_power_usage_* dropped: no hwmon directory; "
                             "gpu_0_temperature_celsius dropped: no hwmon directory" + NO_PROC)


def test_nvidia_card_in_drm_is_skipped(probe_json):
    out = probe_json(sysroot=fx("amd-with-nvidia-card"))
    check(out, expected(0, G.AMD_AFTER_NVIDIA))
    assert amd_note(out) == ("amdgpu: renderD129=card1 as gpu_0; skipped renderD128: "
                             "vendor 0x10de, not AMD" + NO_PROC)


def test_no_render_node_says_nothing(probe_json, tmp_path):
    """A CPU worker (no /dev/dri): NVIDIA's line and tag stand alone."""
    shutil.copytree(fx("amd-two-cards"), tmp_path / "m", symlinks=True)
    shutil.rmtree(tmp_path / "m" / "dev" / "dri")
    out = probe_json(sysroot=tmp_path / "m")
    assert amd_series(out) == {} and amd_note(out) is None
    assert out["gpu"] == "none: no /dev/nvidia device"


def test_only_a_non_amd_render_node_says_nothing(probe_json, tmp_path):
    """nvidia-drm's render node alone (an NVIDIA node): no AMD line, no AMD tag."""
    shutil.copytree(fx("amd-with-nvidia-card"), tmp_path / "m", symlinks=True)
    for n in ("renderD129", "card1"):
        (tmp_path / "m" / "dev" / "dri" / n).unlink()
    out = probe_json(sysroot=tmp_path / "m")
    assert amd_series(out) == {} and amd_note(out) is None
    assert out["gpu"] == "none: no /dev/nvidia device"


def fake_nvml():
    build = os.environ.get("SCOPEMETER_BUILD") or os.path.join(
        os.path.dirname(FIXTURES), "..", "build")
    path = os.path.join(build, "tests", "fakenvml", "libnvidia-ml.so.1")
    if not os.path.exists(path):
        pytest.fail(f"fake NVML not built at {path}")
    return path


def test_both_vendors(probe_json, tmp_path):
    """Two NVIDIA GPUs (NVML indices 0, 1) and two AMD cards: the AMD ones
    become gpu_2 and gpu_3, and one gpu tag says both."""
    m = tmp_path / "m"
    shutil.copytree(fx("amd-two-cards"), m, symlinks=True)
    (m / "dev" / "nvidia0").write_text("")
    (m / "dev" / "nvidia1").write_text("")
    out = probe_json(sysroot=m, env={"SCOPEMETER_NVML_LIBRARY": fake_nvml(),
                                     "FAKE_NVML_DEVICES": "2"})
    got = amd_series(out)
    assert {k for k in got if k.startswith(("gpu_0_", "gpu_1_"))} and \
        all(s["source"].startswith("nvml") for k, s in got.items()
            if k.startswith(("gpu_0_", "gpu_1_")))
    want = {**expected(2, G.MI250_0), **expected(3, G.MI250_1)}
    check(out, {**{k: s["raw"] for k, s in got.items() if k.startswith(("gpu_0_", "gpu_1_"))},
                **want})
    assert out["gpu"] == ("nvml 550.54.15, 2 devices; amdgpu sysfs, 2 devices "
                          "(renderD128=card0 as gpu_2, renderD129=card1 as gpu_3)")
    assert amd_note(out) == ("amdgpu: renderD128=card0 as gpu_2, renderD129=card1 as gpu_3 "
                             "(indices after NVIDIA's 2)" + NO_PROC)


# ---- the oracle: AMD's rocm-smi on the same tree ------------------------------

def rocm_smi_json(root):
    """rocm-smi with root/sys as /sys (and a private /dev/shm for its lock
    files), in a mount namespace of its own: the host's mounts are untouched."""
    script = (f"mount --bind {root}/sys /sys && mount -t tmpfs tmpfs /dev/shm && "
              "exec rocm-smi --showuse --showmeminfo vram --showpower --showmaxpower "
              "--showtemp --showclocks --json")
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    start = p.stdout.find("{")
    assert start >= 0, (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout[start:])


@pytest.mark.skipif(not is_root(), reason="needs root for a private mount namespace")
@pytest.mark.skipif(not have("rocm-smi"), reason="rocm-smi not installed (scripts/install-deps)")
@pytest.mark.skipif(not have("unshare"), reason="no unshare(1)")
def test_rocm_smi_agrees(tmp_path, probe_json):
    cards = [G.MI250_0, G.MI250_1]
    G.build(str(tmp_path), cards, {128, 129})
    G.build_kfd(str(tmp_path), cards)
    smi = rocm_smi_json(tmp_path)
    out = probe_json(sysroot=tmp_path)
    ours = amd_series(out)
    assert sorted(smi) == ["card0", "card1"], smi
    for i, card in enumerate(cards):
        name = f"card{card['card']}"
        s = smi[name]
        # which gpu_i is this card: the source names it
        assert ours[f"gpu_{i}_utilization_percentage"]["source"].startswith(
            f"/sys/class/drm/{name}/")
        assert ours[f"gpu_{i}_utilization_percentage"]["raw"] == float(s["GPU use (%)"])
        assert ours[f"gpu_{i}_memory_usage_megabytes"]["raw"] * 1e6 == pytest.approx(
            int(s["VRAM Total Used Memory (B)"]), abs=0.5)
        assert ours[f"gpu_{i}_memory_usage_percentage"]["raw"] == pytest.approx(
            100.0 * int(s["VRAM Total Used Memory (B)"]) / int(s["VRAM Total Memory (B)"]),
            rel=1e-12)
        watts = float(s["Average Graphics Package Power (W)"])
        cap = float(s["Max Graphics Package Power (W)"])
        assert ours[f"gpu_{i}_power_usage_watts"]["raw"] == pytest.approx(watts, abs=0.05)
        assert ours[f"gpu_{i}_power_usage_percentage"]["raw"] == pytest.approx(
            100.0 * watts / cap, rel=1e-3)
        # the edge sensor and the current clock levels ("(1700Mhz)")
        assert ours[f"gpu_{i}_temperature_celsius"]["raw"] == float(
            s["Temperature (Sensor edge) (C)"])
        for ours_key, smi_key in (("sm_clock", "sclk clock speed:"),
                                  ("memory_clock", "mclk clock speed:")):
            assert ours[f"gpu_{i}_{ours_key}_megahertz"]["raw"] == float(
                s[smi_key].strip("()").lower().removesuffix("mhz"))


# ---- who holds the VRAM: DRM fdinfo (Documentation/gpu/drm-usage-stats.rst) ----

MIB = 1 << 20


def fdinfo(pdev, client, vram_mib, keys=("drm-total-vram", "drm-resident-vram")):
    """An amdgpu client's fdinfo as kernel 6.14 writes it (amdgpu_fdinfo.c
    and drm_print_memory_stats); keys=(): a kernel before the memory keys."""
    text = (f"pos:\t0\nflags:\t02100002\nmnt_id:\t25\nino:\t1027\ndrm-driver:\tamdgpu\n"
            f"drm-client-id:\t{client}\ndrm-pdev:\t{pdev}\npasid:\t{32768 + client}\n")
    for k in keys:
        text += f"{k}:\t{vram_mib * 1024} KiB\n"
    return text + "drm-memory-gtt:\t2048 KiB\ndrm-engine-gfx:\t123456 ns\n"


def fake_process(root, pid, ppid, rank, fds):
    """/proc/PID with stat, environ (RANK when rank is not None) and fds:
    {fd: (link target, fdinfo text or None)}."""
    p = root / "proc" / str(pid)
    (p / "fd").mkdir(parents=True)
    (p / "fdinfo").mkdir()
    (p / "stat").write_text(f"{pid} (python3) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 "
                            "0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 "
                            "17 0 0 0 0 0 0\n")
    (p / "environ").write_text("PATH=/usr/bin\0" + (f"RANK={rank}\0" if rank is not None else ""))
    for fd, (target, info) in fds.items():
        os.symlink(target, p / "fd" / str(fd))
        (p / "fdinfo" / str(fd)).write_text(info or f"pos:\t0\nflags:\t02\nmnt_id:\t15\n")


def holders_machine(tmp_path, self_pid, keys=("drm-total-vram", "drm-resident-vram")):
    """Both MI250 cards given; processes: 100 (RANK=0) holding card0 through
    two fds of one client, its DataLoader worker 101 (no RANK), 200 (RANK=1)
    with a stray context on card0 and its own on card1 plus a card of the
    node not given here, 300 (no RANK, not ours) on card1, 400 without a GPU."""
    m = tmp_path / "m"
    shutil.copytree(fx("amd-two-cards"), m, symlinks=True)
    c0, c1 = G.MI250_0["bdf"], G.MI250_1["bdf"]
    d128, d129 = "/dev/dri/renderD128", "/dev/dri/renderD129"
    fake_process(m, 100, 1, 0, {5: (d128, fdinfo(c0, 10, 2048, keys)),
                                6: (d128, fdinfo(c0, 10, 2048, keys)),  # dup: one client
                                7: ("socket:[4242]", None)})
    fake_process(m, 101, 100, None, {3: (d128, fdinfo(c0, 11, 512, keys))})
    fake_process(m, 200, 1, 1, {4: (d128, fdinfo(c0, 20, 256, keys)),
                                5: (d129, fdinfo(c1, 21, 4096, keys)),
                                6: ("/dev/dri/renderD130", fdinfo("0000:99:00.0", 22, 1000, keys))})
    fake_process(m, 300, 1, None, {3: (d129, fdinfo(c1, 30, 100, keys))})
    fake_process(m, 400, 1, 2, {0: ("/dev/null", None)})
    os.symlink(str(self_pid), m / "proc" / "self")
    return m


def process_mb(out):
    return {k: s["raw"] for k, s in amd_series(out).items() if "process_memory" in k}


def test_process_memory_by_rank(probe_json, tmp_path):
    """Rank 0 (this process, pid 100): its own client once and its worker's
    on card0; rank 1's stray context on card0 and its memory on card1 are not
    rank 0's, nor the unranked process's."""
    m = holders_machine(tmp_path, 100)
    out = probe_json(sysroot=m, env={"RANK": "0", "WORLD_SIZE": "2"})
    assert process_mb(out) == pytest.approx({
        "gpu_0_process_memory_megabytes": (2048 + 512) * MIB / 1e6,
        "gpu_1_process_memory_megabytes": 0.0}, rel=1e-12)
    s = amd_series(out)["gpu_0_process_memory_megabytes"]
    assert s["key"] == "system/gpu_0_process_memory_megabytes/rank0" and s["unit"] == "MB"
    assert amd_note(out) == ("amdgpu: renderD128=card0 as gpu_0, renderD129=card1 as gpu_1")
    # rank 1 (this process is pid 400, no GPU): pid 200's by its RANK
    out = probe_json(sysroot=holders_machine(tmp_path / "r1", 400),
                     env={"RANK": "1", "WORLD_SIZE": "2"})
    assert process_mb(out) == pytest.approx({
        "gpu_0_process_memory_megabytes": 256 * MIB / 1e6,
        "gpu_1_process_memory_megabytes": 4096 * MIB / 1e6}, rel=1e-12)


@pytest.mark.parametrize("keys,mib", [(("drm-memory-vram",), 2048 + 512),   # before 6.14
                                      (("drm-total-vram",), 2048 + 512)])
def test_process_memory_older_keys(probe_json, tmp_path, keys, mib):
    out = probe_json(sysroot=holders_machine(tmp_path, 100, keys), env={"RANK": "0"})
    assert process_mb(out)["gpu_0_process_memory_megabytes"] == pytest.approx(mib * MIB / 1e6,
                                                                              rel=1e-12)


def test_process_memory_without_vram_keys_drops_only_it(probe_json, tmp_path):
    """A kernel whose fdinfo has no memory keys: that series goes, with one
    line; the cards' other series stay."""
    out = probe_json(sysroot=holders_machine(tmp_path, 100, keys=()), env={"RANK": "0"})
    assert process_mb(out) == {}
    check(out, {**expected(0, G.MI250_0), **expected(1, G.MI250_1)})
    lines = [ln for ln in out["_stderr"].splitlines() if "process_memory" in ln]
    assert lines == ["scopemeter: warning: amdgpu: gpu_*_process_memory_megabytes dropped: this "
                     "kernel's DRM fdinfo has no drm-resident-vram, drm-memory-vram or "
                     "drm-total-vram (Documentation/gpu/drm-usage-stats.rst; its other GPU "
                     "series go on)"]
