"""The GPU collector (docs/design.md §1 GPU rows, §3 gpu tag, §6 GPU lines) through
`scopemeter probe --json`, against the fake NVML of tests/fakenvml loaded via
SCOPEMETER_NVML_LIBRARY, in a fake machine under SCOPEMETER_SYSROOT.

No machine of CI has a GPU: tests/gpu/compare_nvidia_smi.sh is the check on
a real one (docs/gpu.md says whether it has been run).  What the fake
answers is scripted per test by its FAKE_NVML_* variables (fakenvml.c).
"""
import os

import pytest

from conftest import ROOT, clean_env

# Defaults of the fake (fakenvml.c): 80 GiB per device, 20 GiB + i GB used
# (v2; v1 adds the 512 MiB reserve), utilization 40 + i %, power
# 150 + i W against an enforced limit of 300 W, driver 550.54.15.
TOTAL = 85899345920
RESERVED = 536870912


def used(i):
    return 21474836480 + 1000000000 * i


def health(i, full=False):
    """The health fields with the fake's defaults (fakenvml.c): 60 + i °C, no
    clock-event reason, fixed PCIe counters (0 MB since open), no process;
    at detail level full also the SM clock 1980 - i MHz, the memory clock
    2619 MHz and no ECC error (docs/series.md "Levels": the default level
    has neither the clocks nor the ECC counts)."""
    return {
        f"gpu_{i}_temperature_celsius": 60.0 + i,
        f"gpu_{i}_throttled_percentage": 0.0,
        f"gpu_{i}_throttled_power_percentage": 0.0,
        f"gpu_{i}_throttled_thermal_percentage": 0.0,
        f"gpu_{i}_pcie_receive_megabytes": 0.0,
        f"gpu_{i}_pcie_transmit_megabytes": 0.0,
        # the fake lists no process by default
        f"gpu_{i}_process_memory_megabytes": 0.0,
        **({f"gpu_{i}_sm_clock_megahertz": 1980.0 - i,
            f"gpu_{i}_memory_clock_megahertz": 2619.0,
            f"gpu_{i}_ecc_errors_corrected": 0.0,
            f"gpu_{i}_ecc_errors_uncorrected": 0.0} if full else {}),
    }


def expected(i, mem_used=None, total=TOTAL, util=None, mw=None, limit_mw=300000,
             with_health=True, full=False):
    mem_used = used(i) if mem_used is None else mem_used
    util = 40 + i if util is None else util
    mw = 150000 + 1000 * i if mw is None else mw
    return {
        f"gpu_{i}_memory_usage_percentage": 100.0 * mem_used / total,
        f"gpu_{i}_memory_usage_megabytes": mem_used / 1e6,
        f"gpu_{i}_utilization_percentage": float(util),
        f"gpu_{i}_power_usage_watts": mw / 1000.0,
        f"gpu_{i}_power_usage_percentage": 100.0 * mw / limit_mw,
        **(health(i, full) if with_health else {}),
    }


def fake_dir():
    build = os.environ.get("SCOPEMETER_BUILD")
    if not build and os.environ.get("SCOPEMETER_BIN"):
        build = os.path.dirname(os.path.dirname(os.environ["SCOPEMETER_BIN"]))
    build = build or os.path.join(ROOT, "build")
    d = os.path.join(build, "tests", "fakenvml")
    if not os.path.exists(os.path.join(d, "libnvidia-ml.so.1")):
        pytest.fail(f"fake NVML not built in {d} (meson compile builds it)")
    return d


@pytest.fixture
def lib():
    d = fake_dir()
    return {
        "full": os.path.join(d, "libnvidia-ml.so.1"),
        "minimal": os.path.join(d, "libnvidia-ml-minimal.so"),
        "next": os.path.join(d, "libnvidia-ml-next.so"),
        "notnvml": os.path.join(d, "libnotnvml.so"),
    }


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def machine(tmp_path):
    """A minimal fake machine; dev_nodes() adds /dev entries as plain files
    (the collector only looks at their names)."""
    root = tmp_path / "root"
    write(str(root / "proc/stat"), "cpu  100 0 100 1000 10 0 0 0 0 0\ncpu0 100 0 100 1000 10 0 0 0 0 0\n")
    write(str(root / "proc/meminfo"),
          "MemTotal:       16384000 kB\nMemFree:         4096000 kB\n"
          "MemAvailable:    8192000 kB\n")
    write(str(root / "proc/net/dev"),
          "Inter-|   Receive                                                |  Transmit\n"
          " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
          "errs drop fifo colls carrier compressed\n"
          "    lo:    1000      10    0    0    0     0          0         0     1000      10"
          "    0    0    0     0       0          0\n")
    write(str(root / "proc/self/cgroup"), "0::/\n")
    write(str(root / "proc/self/mountinfo"),
          "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n")
    os.makedirs(root / "dev", exist_ok=True)

    class M:
        path = root

        @staticmethod
        def dev_nodes(*names):
            for n in names:
                (root / "dev" / n).write_text("")
            return root
    return M


def gpu_series(out):
    return {s["upstream"]: s for s in out["series"] if s["scope"] == "gpu"}


def gpu_notes(out):
    return [n for n in out["notes"] if "gpu" in n or "GPU" in n or "NVML" in n or "nvidia" in n]


def assert_values(series, want):
    assert sorted(series) == sorted(want)
    for k, v in want.items():
        assert series[k]["raw"] == pytest.approx(v, rel=1e-12), k
        assert series[k]["value"] == round(v * 10) / 10, k
        assert series[k]["key"] == f"system/{k}/rank0"  # gpu_ keeps its name, no node tier


def assert_status(out, status):
    assert out["gpu"] == status
    assert out["tags"]["scopemeter.rank0.gpu"] == status


# ---- which GPUs ---------------------------------------------------------------

def test_no_device_node_is_informational(machine, lib, probe_json):
    # nvidiactl / nvidia-uvm are not GPUs; NVIDIA_VISIBLE_DEVICES=all is what
    # base images set on CPU workers too, and must not count.
    root = machine.dev_nodes("nvidiactl", "nvidia-uvm", "nvidia-caps")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "NVIDIA_VISIBLE_DEVICES": "all"})
    assert_status(out, "none: no /dev/nvidia device")
    assert gpu_series(out) == {}
    assert "no /dev/nvidia device: gpu_* series absent (normal on CPU workers)" in out["notes"]
    assert "warning" not in out["_stderr"]


def test_no_device_node_does_not_load_nvml(machine, probe_json):
    # without a device the library is not even opened: a missing one is fine
    out = probe_json(sysroot=machine.path,
                     env={"SCOPEMETER_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
    assert_status(out, "none: no /dev/nvidia device")


def test_several_devices_exact_values(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0", "nvidia1", "nvidia2", "nvidiactl")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "3",
                                        "FAKE_NVML_MEM_USED_2": "1000000000",
                                        "FAKE_NVML_MEM_TOTAL_2": "4000000000",
                                        "FAKE_NVML_UTIL_2": "0",
                                        "FAKE_NVML_POWER_2": "73240",
                                        "FAKE_NVML_LIMIT_2": "250000"})
    assert_status(out, "nvml 550.54.15, 3 devices")
    s = gpu_series(out)
    want = {**expected(0), **expected(1),
            **expected(2, mem_used=1000000000, total=4000000000, util=0, mw=73240,
                       limit_mw=250000)}
    assert_values(s, want)
    # memory through the versioned v2 call (the fake rejects a wrong tag), so
    # "used" excludes the driver's reserve, as nvidia-smi shows it
    assert s["gpu_0_memory_usage_megabytes"]["source"] == "nvmlDeviceGetMemoryInfo_v2"
    assert s["gpu_0_memory_usage_megabytes"]["unit"] == "MB"
    assert s["gpu_0_power_usage_watts"]["unit"] == "W"
    assert s["gpu_0_utilization_percentage"]["unit"] == "percent"
    assert gpu_notes(out) == []
    assert "warning" not in out["_stderr"]


def test_one_device_status_and_node_tier(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia3")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DRIVER": "535.104.05",
                                        "NODE_NAME": "gpu-node-1", "RANK": "2",
                                        "WORLD_SIZE": "4"})
    assert out["gpu"] == "nvml 535.104.05, 1 device"
    assert out["tags"]["scopemeter.rank2.gpu"] == "nvml 535.104.05, 1 device"
    keys = sorted(s["key"] for s in out["series"] if s["scope"] == "gpu")
    # never the node tier for gpu_*; always the rank
    assert keys == sorted(f"system/{k}/rank2" for k in expected(0))


@pytest.mark.parametrize("visible,indices", [
    ("2,0", [0, 2]),
    ("1", [1]),
    (" 2 , 1 ", [1, 2]),          # blanks around entries are ignored
    ("1,1", [1]),                 # a repeated entry is logged once
    ("1,7,0", [1]),               # 7 is no device: the list ends there (CUDA)
    ("0,2,-1,1", [0, 2]),         # CUDA's own documented example
])
def test_cuda_visible_devices_by_index(machine, lib, probe_json, visible, indices):
    root = machine.dev_nodes("nvidia0", "nvidia1", "nvidia2")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "3",
                                        "CUDA_VISIBLE_DEVICES": visible})
    n = len(indices)
    assert_status(out, f"nvml 550.54.15, {n} device{'s' if n > 1 else ''}")
    want = {}
    for i in indices:
        want.update(expected(i))
    assert_values(gpu_series(out), want)
    notes = " ".join(gpu_notes(out))
    assert f"narrows the logged GPUs to NVML index {', '.join(map(str, indices))} (of 3)" in notes


def test_cuda_visible_devices_invalid_entry_is_said(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "3",
                                        "CUDA_VISIBLE_DEVICES": "1,7,0"})
    assert ("gpu: CUDA_VISIBLE_DEVICES='1,7,0' narrows the logged GPUs to NVML index 1 (of 3); "
            "its entry '7' names no device and ends the list, as in CUDA" in out["notes"])
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "CUDA_VISIBLE_DEVICES": "1,0,x"})
    assert ("gpu: CUDA_VISIBLE_DEVICES entry 'x' names no device and ends the list, as in CUDA"
            in out["notes"])


UUID0 = "GPU-8932aaaa-d72c-4106-c12f-000000000000"
UUID1 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"


@pytest.mark.parametrize("visible,indices", [
    (UUID1, [1]),
    ("GPU-8932f", [1]),               # a unique prefix, as CUDA allows
    (f"{UUID1},0", [0, 1]),           # UUIDs and indices mixed
    (f"GPU-8932a,{UUID1}", [0, 1]),
])
def test_cuda_visible_devices_by_uuid(machine, lib, probe_json, visible, indices):
    root = machine.dev_nodes("nvidia0", "nvidia1")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "3",
                                        "FAKE_NVML_UUID_0": UUID0, "FAKE_NVML_UUID_1": UUID1,
                                        "CUDA_VISIBLE_DEVICES": visible})
    want = {}
    for i in indices:
        want.update(expected(i))
    assert_values(gpu_series(out), want)


@pytest.mark.parametrize("visible", ["GPU-8932", "GPU-ffff", "MIG-ffff"])
def test_cuda_visible_devices_uuid_ambiguous_or_unknown(machine, lib, probe_json, visible):
    # an ambiguous prefix is no device in CUDA either; nothing is left
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "FAKE_NVML_UUID_0": UUID0, "FAKE_NVML_UUID_1": UUID1,
                                        "CUDA_VISIBLE_DEVICES": visible})
    assert_status(out, "none: CUDA_VISIBLE_DEVICES selects no device")
    assert gpu_series(out) == {}
    assert any(n.startswith(f"CUDA_VISIBLE_DEVICES='{visible}' names none of the 2 NVML devices")
               and n.endswith("gpu_* series absent") for n in out["notes"])
    assert "warning" not in out["_stderr"]


@pytest.mark.parametrize("visible", ["", "-1", "NoDevFiles", " ", "none"])
def test_cuda_visible_devices_hides_everything(machine, probe_json, visible):
    # CUDA shows no device; NVML is not even loaded (the path does not exist)
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1",
                                        "CUDA_VISIBLE_DEVICES": visible})
    assert_status(out, "none: CUDA_VISIBLE_DEVICES selects no device")
    assert gpu_series(out) == {}
    assert (f"CUDA_VISIBLE_DEVICES='{visible}' gives this process no GPU: gpu_* series absent"
            in out["notes"])


MIG_NOTE = ("MIG: gpu_{i}_memory_usage_* and gpu_{i}_process_memory_megabytes are the named "
            "instance's (through its MIG device handle); utilization, power, "
            "temperature, clocks, throttled, PCIe, ECC and gpu_events are the whole parent "
            "GPU's (every instance on it)")


def mig_expected(i, inst_used, inst_total):
    """The parent's values but memory, which is the instance's (docs/gpu.md, MIG)."""
    want = expected(i)
    want[f"gpu_{i}_memory_usage_percentage"] = 100.0 * inst_used / inst_total
    want[f"gpu_{i}_memory_usage_megabytes"] = inst_used / 1e6
    return want


def test_cuda_visible_devices_mig_is_keyed_by_parent_memory_per_instance(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0", "nvidia1")
    # the board holds 70 GB of 80 GB; the named instance (GPU 1, slot 1) 10 GB
    # of its 40 GB slice, slot 0 (not named) 5 GB of 20 GB: a value of the
    # board or of the other instance in the memory series fails the test
    env = {"SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "2",
           "FAKE_NVML_MIG_1": "2", "FAKE_NVML_MEM_TOTAL_1": "80000000000",
           "FAKE_NVML_MEM_USED_1": "70000000000",
           "FAKE_NVML_MIG_MEM_TOTAL_1_1": "40000000000",
           "FAKE_NVML_MIG_MEM_USED_1_1": "10000000000",
           "FAKE_NVML_MIG_MEM_TOTAL_1_0": "20000000000", "FAKE_NVML_MIG_MEM_USED_1_0": "5000000000"}
    # current form: MIG-<uuid of the instance> (fake default for GPU 1, slot 1)
    out = probe_json(sysroot=root, env={**env,
                                        "CUDA_VISIBLE_DEVICES": "MIG-f4ce0001-0001"})
    s = gpu_series(out)
    assert_values(s, mig_expected(1, 10e9, 40e9))
    assert s["gpu_1_memory_usage_percentage"]["raw"] == pytest.approx(25.0)
    # the source says which handle answered; the board-wide fields are the parent's
    assert s["gpu_1_memory_usage_megabytes"]["source"] == \
        "nvmlDeviceGetMemoryInfo_v2(MIG device handle)"
    assert s["gpu_1_process_memory_megabytes"]["source"] == \
        "nvmlDeviceGetComputeRunningProcesses_v3(MIG device handle)"
    assert s["gpu_1_utilization_percentage"]["source"] == "nvmlDeviceGetUtilizationRates"
    assert any(MIG_NOTE.format(i=1) in n for n in out["notes"]), gpu_notes(out)
    assert not any("whole parent GPU (memory" in n for n in out["notes"])
    # both instances named: their sum (15 GB of 60 GB), once each
    out = probe_json(sysroot=root, env={
        **env, "CUDA_VISIBLE_DEVICES": "MIG-f4ce0001-0001,MIG-f4ce0001-0000,MIG-f4ce0001-0001"})
    assert_values(gpu_series(out), mig_expected(1, 15e9, 60e9))
    # a MIG-enabled board that says NOT_SUPPORTED to ECC and remapped rows (as
    # nvmlDeviceGetRemappedRows documents under MIG): those two go, the rest stays
    out = probe_json(sysroot=root, env={**env, "CUDA_VISIBLE_DEVICES": "MIG-f4ce0001-0001",
                                        "FAKE_NVML_FAIL_ECC_1": "3",
                                        "FAKE_NVML_FAIL_REMAP_1": "3"})
    # (the ECC series are level full's: at the default the line still says
    # the counts are not read, for the gpu_events tag)
    assert_values(gpu_series(out), mig_expected(1, 10e9, 40e9))
    assert any("gpu_1_ecc_errors_* dropped: nvmlDeviceGetTotalEccErrors says fake NVML: "
               "Not Supported" in n for n in out["notes"])


def test_cuda_visible_devices_mig_pre470_form(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0", "nvidia1")
    env = {"SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "2",
           "FAKE_NVML_MIG_0": "2", "FAKE_NVML_MIG_GI_0_0": "3", "FAKE_NVML_MIG_GI_0_1": "5",
           "FAKE_NVML_MIG_MEM_TOTAL_0_1": "40000000000",
           "FAKE_NVML_MIG_MEM_USED_0_1": "10000000000"}
    # MIG-GPU-<parent uuid>/<gi>/<ci>: the instance of those ids (slot 1)
    parent = "MIG-GPU-f4ce0000-0000-4000-8000-000000000000"
    out = probe_json(sysroot=root, env={**env, "CUDA_VISIBLE_DEVICES": f"{parent}/5/0"})
    assert_values(gpu_series(out), mig_expected(0, 10e9, 40e9))
    assert any(MIG_NOTE.format(i=0) in n for n in out["notes"]), gpu_notes(out)
    # ids NVML does not list (or a board without MIG): the whole parent, said so
    for e in ({**env, "CUDA_VISIBLE_DEVICES": f"{parent}/1/0"},
              {"SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "2",
               "CUDA_VISIBLE_DEVICES": f"{parent}/1/0"}):
        out = probe_json(sysroot=root, env=e)
        assert_values(gpu_series(out), expected(0))
        assert any("entry whose instance NVML does not list is logged as its whole parent GPU"
                   in n for n in out["notes"]), gpu_notes(out)
        assert not any("MIG: gpu_" in n for n in out["notes"])


@pytest.mark.parametrize("call", ["MEMV2", "PROCS"])
@pytest.mark.parametrize("rc", ["3", "4", "999"])
def test_mig_handle_failure_degrades_only_its_series(machine, lib, probe_json, call, rc):
    # a query failing on the instance's handle costs its series alone, and
    # the parent's answer (the board's) is never put in its place
    root = machine.dev_nodes("nvidia0", "nvidia1")
    fail = {f"FAKE_NVML_MIG_FAIL_{call}_1_1": rc}
    if call == "MEMV2":
        fail["FAKE_NVML_MIG_FAIL_MEM_1_1"] = rc  # v1, the fallback, says the same
    out = probe_json(sysroot=root, env={
        "SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "2", "FAKE_NVML_MIG_1": "2",
        "FAKE_NVML_MIG_MEM_TOTAL_1_1": "40000000000", "FAKE_NVML_MIG_MEM_USED_1_1": "10000000000",
        "CUDA_VISIBLE_DEVICES": "MIG-f4ce0001-0001", **fail})
    want = mig_expected(1, 10e9, 40e9)
    keys = (["gpu_1_memory_usage_percentage", "gpu_1_memory_usage_megabytes"]
            if call == "MEMV2" else ["gpu_1_process_memory_megabytes"])
    for k in keys:  # dropped (3, 4) or skipped in the probe's one sample (999)
        del want[k]
    assert_values(gpu_series(out), want)
    label = "memory_usage_*" if call == "MEMV2" else "process_memory_megabytes"
    src = ("nvmlDeviceGetMemoryInfo(MIG device handle)" if call == "MEMV2"
           else "nvmlDeviceGetComputeRunningProcesses_v3(MIG device handle)")
    if rc != "999":
        text = "Not Supported" if rc == "3" else "Insufficient Permissions"
        assert any(f"gpu_1_{label} dropped: {src} says fake NVML: {text}" in n
                   for n in out["notes"]), gpu_notes(out)
    else:
        assert f"GPU 1: {src} failed: fake NVML: Unknown Error" in out["_stderr"], out["_stderr"]


# ---- metrics dropped, devices lost ----------------------------------------------

def test_missing_optional_symbols_drop_their_metrics(machine, lib, probe_json):
    # an NVML without _v2 memory, utilization, enforced limit, driver version
    # or UUIDs: what it has is still logged
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["minimal"]})
    assert_status(out, "nvml (driver version unknown), 1 device")
    s = gpu_series(out)
    v1_used = used(0) + RESERVED  # v1's "used" includes the reserve
    assert_values(s, {
        "gpu_0_memory_usage_percentage": 100.0 * v1_used / TOTAL,
        "gpu_0_memory_usage_megabytes": v1_used / 1e6,
        "gpu_0_power_usage_watts": 150.0,
        # an old driver's name of the clock-event reasons (before R535)
        "gpu_0_throttled_percentage": 0.0,
        "gpu_0_throttled_power_percentage": 0.0,
        "gpu_0_throttled_thermal_percentage": 0.0,
    })
    assert s["gpu_0_throttled_percentage"]["source"] == "nvmlDeviceGetCurrentClocksThrottleReasons"
    assert s["gpu_0_memory_usage_megabytes"]["source"] == "nvmlDeviceGetMemoryInfo"
    (note,) = [n for n in out["notes"] if n.startswith("gpu: ")]
    assert note.startswith(
        "gpu: NVML lacks nvmlDeviceGetUtilizationRates: gpu_*_utilization_percentage dropped; "
        "NVML lacks nvmlDeviceGetEnforcedPowerLimit: gpu_*_power_usage_percentage dropped; "
        "NVML lacks nvmlDeviceGetTemperature, nvmlDeviceGetClockInfo, ")


def test_minimal_nvml_cannot_match_uuids(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["minimal"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "CUDA_VISIBLE_DEVICES": "1,GPU-f4ce0000"})
    assert sorted(gpu_series(out)) == ["gpu_1_memory_usage_megabytes",
                                       "gpu_1_memory_usage_percentage",
                                       "gpu_1_power_usage_watts",
                                       "gpu_1_throttled_percentage",
                                       "gpu_1_throttled_power_percentage",
                                       "gpu_1_throttled_thermal_percentage"]
    # the selection comes first, then every field the old driver lacks: the
    # whole note (655 characters; it was cut at 319 once), nothing marked cut
    (note,) = [n for n in out["notes"] if n.startswith("gpu: ")]
    assert note == (
        "gpu: CUDA_VISIBLE_DEVICES='1,GPU-f4ce0000' narrows the logged GPUs to NVML index 1 "
        "(of 2); its entry 'GPU-f4ce0000' names no device (NVML lacks nvmlDeviceGetUUID) and "
        "ends the list, as in CUDA; NVML lacks nvmlDeviceGetUtilizationRates: "
        "gpu_*_utilization_percentage dropped; NVML lacks nvmlDeviceGetEnforcedPowerLimit: "
        "gpu_*_power_usage_percentage dropped; NVML lacks nvmlDeviceGetTemperature, "
        "nvmlDeviceGetClockInfo, nvmlDeviceGetFieldValues, nvmlDeviceGetTotalEccErrors, "
        "nvmlDeviceGetRemappedRows, nvmlDeviceGetRetiredPages, "
        "nvmlDeviceGetComputeRunningProcesses_v3, the nvmlEventSet calls (no Xid events): "
        "the gpu_* series and events they give are absent")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["minimal"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "CUDA_VISIBLE_DEVICES": "GPU-f4ce0000"})
    assert_status(out, "none: CUDA_VISIBLE_DEVICES selects no device")
    assert ("CUDA_VISIBLE_DEVICES='GPU-f4ce0000' names none of the 2 NVML devices "
            "(NVML lacks nvmlDeviceGetUUID): gpu_* series absent" in out["notes"])


def test_not_supported_and_no_permission_drop_one_metric(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0", "nvidia1")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "FAKE_NVML_FAIL_POWER_0": "3",   # NOT_SUPPORTED
                                        "FAKE_NVML_FAIL_LIMIT_1": "4",   # NO_PERMISSION
                                        "FAKE_NVML_FAIL_UTIL_1": "3"})
    assert_status(out, "nvml 550.54.15, 2 devices")
    want = {**expected(0), **expected(1)}
    for k in ("gpu_0_power_usage_watts", "gpu_0_power_usage_percentage",
              "gpu_1_power_usage_percentage", "gpu_1_utilization_percentage"):
        del want[k]
    assert_values(gpu_series(out), want)
    assert ("gpu: gpu_1_utilization_percentage dropped: nvmlDeviceGetUtilizationRates "
            "says fake NVML: Not Supported; gpu_0_power_usage_* dropped: nvmlDeviceGetPowerUsage "
            "says fake NVML: Not Supported; gpu_1_power_usage_percentage dropped: "
            "nvmlDeviceGetEnforcedPowerLimit says fake NVML: Insufficient Permissions"
            in out["notes"])


def test_same_drop_on_many_devices_is_one_clause(machine, lib, probe_json):
    # eight GPUs without power readings (some vGPU / consumer boards): one
    # clause, not eight, so the line stays readable
    root = machine.dev_nodes(*[f"nvidia{i}" for i in range(8)])
    env = {"SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "8"}
    env.update({f"FAKE_NVML_FAIL_POWER_{i}": "3" for i in range(8)})
    out = probe_json(sysroot=root, env=env)
    assert_status(out, "nvml 550.54.15, 8 devices")
    assert ("gpu: gpu_{0,1,2,3,4,5,6,7}_power_usage_* dropped: nvmlDeviceGetPowerUsage says "
            "fake NVML: Not Supported" in out["notes"])
    assert len(gpu_series(out)) == 8 * (12 - 2)  # 12 a GPU at the default level


def test_memory_v2_version_mismatch_falls_back_to_v1(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_FAIL_MEMV2_0": "25"})
    s = gpu_series(out)
    assert s["gpu_0_memory_usage_megabytes"]["source"] == "nvmlDeviceGetMemoryInfo"
    assert s["gpu_0_memory_usage_megabytes"]["raw"] == pytest.approx((used(0) + RESERVED) / 1e6)


def test_device_lost_at_open(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0", "nvidia1")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "FAKE_NVML_LOST_AFTER_1": "0"})
    assert_status(out, "nvml 550.54.15, 1 device")
    assert_values(gpu_series(out), expected(0))
    assert ("gpu: GPU 1 lost (nvmlDeviceGetMemoryInfo_v2: fake NVML: GPU is lost): "
            "gpu_1_* dropped" in out["notes"])


def test_device_lost_at_handle(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "FAKE_NVML_FAIL_HANDLE_0": "15"})
    assert_status(out, "nvml 550.54.15, 1 device")
    assert_values(gpu_series(out), expected(1))
    assert ("gpu: GPU 0 lost (nvmlDeviceGetHandleByIndex_v2: fake NVML: GPU is lost): "
            "gpu_0_* dropped" in out["notes"])


def test_device_lost_during_the_sample(machine, lib, probe_json):
    # the open makes 4 queries per device (memory, utilization, power,
    # limit); the 5th, in the probe's sample, finds GPU 1 lost
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "2",
                                        "FAKE_NVML_LOST_AFTER_1": "4"})
    assert_status(out, "nvml 550.54.15, 2 devices")  # decided at open
    assert_values(gpu_series(out), expected(0))
    lines = [l for l in out["_stderr"].splitlines() if "GPU 1" in l]
    assert lines == ["scopemeter: warning: gpu: GPU 1 lost (nvmlDeviceGetMemoryInfo_v2: "
                     "fake NVML: GPU is lost): gpu_1_* series stop"]


def test_every_device_lost_is_a_warning(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_LOST_AFTER_0": "0"})
    assert_status(out, "unavailable: GPU 0 lost (nvmlDeviceGetMemoryInfo_v2: fake NVML: "
                       "GPU is lost): gpu_0_* dropped")
    assert gpu_series(out) == {}


# ---- the library itself fails ---------------------------------------------------

def test_library_missing_is_a_warning(machine, probe_json):
    root = machine.dev_nodes("nvidia0")
    missing = "/nonexistent/libnvidia-ml.so.1"
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": missing})
    err = f"{missing}: cannot open shared object file: No such file or directory"
    assert_status(out, f"unavailable: {err}")
    assert gpu_series(out) == {}
    assert (f"/dev/nvidia0 exists but NVML cannot be loaded ({err}): gpu_* series absent"
            in out["notes"])


def test_library_that_is_not_nvml(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["notnvml"]})
    err = f"{lib['notnvml']}: undefined symbol: nvmlInit_v2"
    assert_status(out, f"unavailable: {err}")
    assert gpu_series(out) == {}
    assert (f"{lib['notnvml']} is not a usable NVML ({err}): gpu_* series absent"
            in out["notes"])


def test_init_failure_carries_nvml_text(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_INIT_FAIL": "9"})  # DRIVER_NOT_LOADED
    # the text is the library's own (nvmlErrorString), marked "fake NVML:"
    assert_status(out, "unavailable: fake NVML: Driver Not Loaded")
    assert gpu_series(out) == {}
    assert ("/dev/nvidia0 exists but NVML init failed: fake NVML: Driver Not Loaded; "
            "gpu_* series absent" in out["notes"])


def test_count_failure_carries_nvml_text(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_COUNT_FAIL": "18"})
    assert_status(out, "unavailable: fake NVML: RM has detected an NVML/RM version mismatch.")


def test_nvml_with_no_device(machine, lib, probe_json):
    root = machine.dev_nodes("nvidia0")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["full"],
                                        "FAKE_NVML_DEVICES": "0"})
    assert_status(out, "unavailable: NVML reports no device")
    assert "/dev/nvidia0 exists but NVML reports no device: gpu_* series absent" in out["notes"]


def test_text_probe_shows_gpu_status(machine, lib, scopemeter_bin):
    import subprocess
    from conftest import clean_env
    root = machine.dev_nodes("nvidia0")
    env = clean_env(SCOPEMETER_SYSROOT=str(root), SCOPEMETER_NVML_LIBRARY=lib["full"],
                    FAKE_NVML_DEVICES="2")
    p = subprocess.run([scopemeter_bin, "probe", "--interval", "0"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "gpu: nvml 550.54.15, 2 devices" in p.stdout.splitlines()
    assert "system/gpu_1_power_usage_watts/rank0" in p.stdout


def test_nvml_without_its_deprecated_calls_keeps_every_series(machine, lib, probe_json):
    """A later NVML that has dropped what nvml.h 13 marks DEPRECATED(13.0)
    (the fake's libnvidia-ml-next.so: no nvmlDeviceGetTemperature, no
    nvmlDeviceGetCurrentClocksThrottleReasons; issue 46 item 12): probe
    shows every series of both GPUs, the temperature through
    nvmlDeviceGetTemperatureV, and no note of anything lacking."""
    root = machine.dev_nodes("nvidia0", "nvidia1")
    out = probe_json(sysroot=root, env={"SCOPEMETER_NVML_LIBRARY": lib["next"],
                                        "FAKE_NVML_DEVICES": "2"})
    got = gpu_series(out)
    assert {k: v["value"] for k, v in got.items()} == \
        {k: round(v * 10) / 10 for k, v in {**expected(0), **expected(1)}.items()}
    for i in (0, 1):
        assert got[f"gpu_{i}_temperature_celsius"]["source"] == \
            "nvmlDeviceGetTemperatureV(NVML_TEMPERATURE_GPU)"
        assert got[f"gpu_{i}_throttled_percentage"]["source"] == \
            "nvmlDeviceGetCurrentClocksEventReasons"
    assert not [n for n in out["notes"] if n.startswith("gpu:")], out["notes"]
    assert out["gpu"] == "nvml 550.54.15, 2 devices"


# ---- end to end: `scopemeter run` into a real MLflow server ---------------------

def test_run_records_gpu_series_and_tag(machine, lib, scopemeter_bin, mlflow_server):
    # CUDA_VISIBLE_DEVICES=1,0 on a 3-GPU host: gpu_0 and gpu_1 are recorded,
    # gpu_2 never; GPU 1 is lost after 12 queries (4 at open, then 4 per
    # sample: the third sample finds it lost), so its keys stop early while
    # gpu_0 goes on; the run itself is unaffected.
    from runread import get_run, histories, run_cli, tags_of
    root = machine.dev_nodes("nvidia0", "nvidia1", "nvidia2")
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "3"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "SCOPEMETER_SYSROOT": str(root),
                     "SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "3",
                     "FAKE_NVML_LOST_AFTER_1": "12", "CUDA_VISIBLE_DEVICES": "1,0"})
    assert p.returncode == 0, p.stderr
    assert p.run_id, p.stderr
    run = get_run(mlflow_server, p.run_id)
    assert run["info"]["status"] == "FINISHED"
    assert tags_of(run)["scopemeter.rank0.gpu"] == "nvml 550.54.15, 2 devices"

    hist = histories(mlflow_server, p.run_id)
    gpu = {k: v for k, v in hist.items() if k.startswith("system/gpu_")}
    assert set(gpu) == {f"system/{k}/rank0" for k in {**expected(0), **expected(1)}}
    for k, v in expected(0).items():
        assert {val for _, _, val in gpu[f"system/{k}/rank0"]} == {round(v * 10) / 10}, k
    for k, v in expected(1).items():
        assert {val for _, _, val in gpu[f"system/{k}/rank0"]} == {round(v * 10) / 10}, k
    n0 = len(gpu["system/gpu_0_utilization_percentage/rank0"])
    n1 = len(gpu["system/gpu_1_utilization_percentage/rank0"])
    assert 1 <= n1 < n0, (n0, n1)
    lost = [l for l in p.stderr.splitlines() if "GPU 1 lost" in l]
    assert lost == ["scopemeter: warning: gpu: GPU 1 lost (nvmlDeviceGetMemoryInfo_v2: "
                    "fake NVML: GPU is lost): gpu_1_* series stop"], p.stderr


# CMD of the ECC run: polls the run (MLflow's REST API; MLFLOW_RUN_ID and
# MLFLOW_TRACKING_URI are what `scopemeter run` gives CMD) until the series'
# latest value is the whole count (argv[1]) or went down (the old code's
# failure, seen at once), at most argv[2] seconds; prints what it saw.
ECC_WAIT = r"""
import json, os, sys, time, urllib.parse, urllib.request
uri, run = os.environ["MLFLOW_TRACKING_URI"], os.environ["MLFLOW_RUN_ID"]
want, deadline = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
seen = []
while time.monotonic() < deadline:
    q = urllib.parse.urlencode({"run_id": run})
    with urllib.request.urlopen(f"{uri}/api/2.0/mlflow/runs/get?{q}", timeout=30) as r:
        ms = json.loads(r.read())["run"]["data"].get("metrics", [])
    v = [m["value"] for m in ms if m["key"] == "system/gpu_0_ecc_errors_corrected/rank0"]
    if v and (not seen or v[0] != seen[-1]):
        seen.append(v[0])
    if seen and (seen[-1] >= want or seen[-1] < max(seen)):
        break
    time.sleep(0.1)
print("seen", seen, flush=True)
"""


@pytest.mark.timeout(300)
def test_ecc_count_survives_a_clear_in_the_run(machine, lib, scopemeter_bin, mlflow_server):
    """Volatile ECC counts cleared mid-run (nvmlDeviceClearEccErrorCounts,
    `nvidia-smi -p 0`; issue 46 item 5): the counter reads 0 at open, then
    20, 37, 43, cleared, 4, 10, 22, 34, cleared, 3, 9 (the fake's sequence,
    one value a sample, the last repeating).  The run's series never goes
    down and ends at 86, the errors the counter counted (43 + 34 + 9); the
    old difference from the value at open went 43 -> 4 and ended at 9.  CMD
    runs until the run shows the whole count (or a value going down), so no
    verdict depends on how fast samples come."""
    import sys
    from runread import history, run_cli
    root = machine.dev_nodes("nvidia0")
    p = run_cli(scopemeter_bin, ["--interval", "0.2", "--", sys.executable, "-c", ECC_WAIT,
                                 "86", "150"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "SCOPEMETER_SYSROOT": str(root),
                     "SCOPEMETER_NVML_LIBRARY": lib["full"],
                     "SCOPEMETER_DETAIL": "full",  # the ECC series are level full's
                     "FAKE_NVML_ECC_CORR_0": "0,20,37,43,4,10,22,34,3,9",
                     "FAKE_NVML_ECC_UNCORR_0": "0,0,1,1,0,1,1,1,0,1"}, timeout=240)
    assert p.returncode == 0, p.stderr
    assert p.run_id, p.stderr
    corr = [v for _, _, v in history(mlflow_server, p.run_id,
                                     "system/gpu_0_ecc_errors_corrected/rank0")]
    uncorr = [v for _, _, v in history(mlflow_server, p.run_id,
                                       "system/gpu_0_ecc_errors_uncorrected/rank0")]
    # every value a sum of the deltas so far, in order; the last the whole count
    sums = [0, 20, 37, 43, 47, 53, 65, 77, 80, 86]
    assert corr and corr[-1] == 86 and all(a <= b for a, b in zip(corr, corr[1:])), \
        (corr, p.stdout)
    assert set(corr) <= set(sums), (corr, sums)
    assert uncorr and uncorr[-1] == 3 and all(a <= b for a, b in zip(uncorr, uncorr[1:])), \
        uncorr


def test_plan_counts_what_probe_emits_with_gpus(machine, lib, probe_json, scopemeter_bin):
    """`plan`'s series per collector comes from the collectors' own counts
    (collectors.c); here it is tied to what a 3-GPU machine really emits, at
    each level (docs/series.md "Levels": 12 a GPU, 22 at full)."""
    import scopemeter
    root = machine.dev_nodes("nvidia0", "nvidia1", "nvidia2", "nvidiactl")
    env = {"SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "3"}
    out = probe_json(sysroot=root, env=env)
    limits = any(s["scope"] == "container" for s in out["series"])
    plan = scopemeter.plan(workers=1, gpus_per_worker=3, container_limits=limits)
    assert plan["series_per_collector"] == len(out["series"])
    assert plan["gpu_series_per_collector"] == len(gpu_series(out)) == 3 * 12
    assert plan["node_series_per_collector"] == sum(
        s["scope"] in ("node", "rootfs") for s in out["series"])
    full = probe_detail(scopemeter_bin, root, env, "--detail", "full")
    fplan = scopemeter.plan(workers=1, gpus_per_worker=3, container_limits=limits,
                            detail="full")
    assert fplan["detail"] == "full" and fplan["series_full"] == plan["series_full"]
    assert fplan["series_per_collector"] == len(full["series"]), sorted(gpu_series(full))
    assert fplan["gpu_series_per_collector"] == len(gpu_series(full)) == 3 * 22



# ---- events and holders reach the run (a real scopemeter run, a real server) ------------

def test_xid_and_holders_reach_the_run_before_stop(scopemeter_bin, mlflow_server, machine, lib):
    """An Xid the driver raises (pending at the fake's init), a remapped row
    and a process this container cannot see reach the run's tags with a
    window, not only at stop: the recorder is SIGKILLed once they are there,
    so no end tag was ever sent (docs/series.md, gpu_events)."""
    import signal
    import subprocess
    import time
    from mlflow.tracking import MlflowClient
    from conftest import clean_env

    root = machine.dev_nodes("nvidia0")
    env = clean_env(MLFLOW_TRACKING_URI=mlflow_server, SCOPEMETER_SYSROOT=root,
                    SCOPEMETER_NVML_LIBRARY=lib["full"], FAKE_NVML_XID_0="79",
                    FAKE_NVML_REMAP_0="0,1,1,0", FAKE_NVML_PROCS_0="4000000:2000000000")
    p = subprocess.Popen([scopemeter_bin, "run", "--interval", "0.5", "--", "sleep", "60"],
                         env=env, stderr=subprocess.PIPE, text=True)
    try:
        run_id = None
        while run_id is None:
            line = p.stderr.readline()
            assert line, "scopemeter run ended before creating its run"
            if "created run " in line:
                run_id = line.split("created run ")[1].split()[0]
        client = MlflowClient(tracking_uri=str(mlflow_server))
        tags = {}
        for _ in range(600):  # until the first windows are in (bounded: 60 s)
            tags = client.get_run(run_id).data.tags
            if "scopemeter.rank0.gpu_events" in tags and \
                    "scopemeter.rank0.gpu_memory_at_peak" in tags:
                break
            time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    ev = tags.get("scopemeter.rank0.gpu_events", "")
    assert ev.startswith("gpu0 xid=79 at=20") and ev.endswith(
        "Z xids=1 codes=79 remapped_uncorrected=1 remap_pending=1"), ev
    # pid 4000000 exists nowhere here: foreign; the GPU's used memory at its peak
    assert tags["scopemeter.rank0.gpu_memory_at_peak"] == \
        f"gpu0 used_mb={round(used(0) / 1e6, 1)} foreign_mb=2000.0"


@pytest.mark.timeout(300)
def test_xid_and_stray_context_reach_the_report(scopemeter_bin, mlflow_server, tmp_path, lib):
    """From the driver to the verdicts, nothing written by hand: the fake
    NVML delivers Xid 79 on GPU 0 and lists two real processes holding its
    memory, one of this rank (RANK=0, 2000 MB) and one of rank 3 (RANK=3,
    512 MB), each with the GPU node open as a CUDA context has and neither
    in the recorder's tree; `scopemeter run` records a few seconds, then
    `scopemeter report` (text and JSON) says the Xid in words at the time the
    collector stamped it and rank 3's process as a context on the wrong
    device.  The sysroot's /proc is the real one, so the classes come from
    the processes' real /proc entries (docs/gpu.md, "Who holds the GPU's
    memory")."""
    import json
    import subprocess
    import sys
    import time
    from datetime import datetime, timezone
    from runread import get_run, run_cli, tags_of
    from test_report import cli_report, rank_of, report_env

    root = tmp_path / "root"
    os.makedirs(root / "dev")
    (root / "dev" / "nvidia0").write_text("")
    os.symlink("/proc", root / "proc")
    node = os.path.realpath(root / "dev" / "nvidia0")
    hold = ("import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "print('ready', flush=True); time.sleep(120)")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    holders = [subprocess.Popen([sys.executable, "-c", hold, node], env={**env, "RANK": r},
                                stdout=subprocess.PIPE, text=True) for r in ("0", "3")]
    try:
        for h in holders:  # the node is open before the recorder starts
            assert h.stdout.readline() == "ready\n"
        own, rank3 = (h.pid for h in holders)
        t0 = time.time()
        p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "3"],
                    env={"MLFLOW_TRACKING_URI": mlflow_server, "SCOPEMETER_SYSROOT": str(root),
                         "SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_XID_0": "79",
                         "FAKE_NVML_PROCS_0": f"{own}:2000000000,{rank3}:512000000"})
        t1 = time.time()
    finally:
        for h in holders:
            h.kill()
            h.wait(timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.run_id, p.stderr
    assert "gpu: GPU 0: Xid 79" in p.stderr, p.stderr

    # the tags the collector wrote (the report's input): the Xid's time is the
    # sample's that drained it, within the recording
    tags = tags_of(get_run(mlflow_server, p.run_id))
    ev = tags["scopemeter.rank0.gpu_events"]
    assert ev.startswith("gpu0 xid=79 at=") and ev.endswith(" xids=1 codes=79"), ev
    at = ev.split("at=")[1].split()[0]
    stamp = datetime.strptime(at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    assert int(t0) - 1 <= stamp <= t1, (at, t0, t1)
    assert tags["scopemeter.rank0.gpu_memory_at_peak"] == \
        f"gpu0 used_mb={round(used(0) / 1e6, 1)} own_mb=2000.0 rank3_mb=512.0"

    xid = (f"GPU 0: Xid 79 at {at[11:19]} UTC — the GPU fell off the bus: it no longer answers "
           "over PCIe (usually: hardware or driver, not your code)")
    stray = ("GPU 0 (rank 0's): rank 3's process holds 512 MB — a CUDA context on the wrong "
             "device (set the device before the first CUDA call)")
    renv = report_env(MLFLOW_TRACKING_URI=mlflow_server)
    js = cli_report(scopemeter_bin, p.run_id, "--json", env=renv)
    assert js.returncode == 0, js.stderr
    r0 = rank_of(json.loads(js.stdout), 0)
    said = {c: t for c, t in zip(r0["verdict_codes"], r0["verdicts"]) if c.startswith("gpu_")}
    # exactly these two: the fake's other defaults (no throttling, no ECC
    # error, no remap, no foreign holder) give no GPU verdict
    assert said == {"gpu_xid": xid, "gpu_stray_context": stray}, r0["verdicts"]
    g0 = next(g for g in r0["gpus"] if g["index"] == 0)
    assert g0["events"]["xid"] == 79 and g0["events"]["xid_codes"] == [79]
    peak = g0["memory_at_peak_megabytes"]
    assert (peak["own"], peak["ranks"], peak["foreign"]) == (2000.0, {"3": 512.0}, 0.0), peak

    txt = cli_report(scopemeter_bin, p.run_id, env=renv)
    assert txt.returncode == 0, txt.stderr
    flat = " ".join(txt.stdout.split())  # the terminal's text wraps at 100 columns
    assert f"rank 0: {xid}" in flat, txt.stdout
    assert stray in flat, txt.stdout


@pytest.mark.timeout(120)
def test_own_pid_namespace_drops_the_process_list_instead_of_calling_it_foreign(
        scopemeter_bin, tmp_path, lib):
    """NVML's pids are the host's and the driver knows no pid namespace
    (docs/gpu.md, "Who holds the GPU's memory"): in a container's own pid
    namespace none of them maps to a process there, and classing them
    foreign would say "another container holds" the job's own memory.  A
    real pid namespace (unshare --pid --mount-proc, its /proc the new
    namespace's): the fake lists a real process of this rank holding GPU 0;
    on the host it is the rank's own 2000 MB, in the namespace the process
    series and the peak tag's holders are dropped, with one clause saying
    why, and every other GPU series stays."""
    import json
    import shutil
    import subprocess
    import sys
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and util-linux unshare")
    root = tmp_path / "root"
    os.makedirs(root / "dev")
    (root / "dev" / "nvidia0").write_text("")
    os.symlink("/proc", root / "proc")  # the /proc of whichever namespace runs the probe
    node = os.path.realpath(root / "dev" / "nvidia0")
    hold = ("import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "print('ready', flush=True); time.sleep(60)")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    holder = subprocess.Popen([sys.executable, "-c", hold, node], env={**env, "RANK": "0"},
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        penv = clean_env(SCOPEMETER_SYSROOT=str(root), SCOPEMETER_NVML_LIBRARY=lib["full"],
                         FAKE_NVML_PROCS_0=f"{holder.pid}:2000000000")
        probe = [scopemeter_bin, "probe", "--json", "--interval", "0.2"]
        outs = {}
        for where, pre in (("host", []), ("ns", ["unshare", "--pid", "--fork", "--mount-proc"])):
            p = subprocess.run(pre + probe, env=penv, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, (where, p.stderr)
            outs[where] = json.loads(p.stdout)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    host, ns = (gpu_series(outs[w]) for w in ("host", "ns"))
    assert host["gpu_0_process_memory_megabytes"]["raw"] == pytest.approx(2000.0)
    assert "gpu_0_process_memory_megabytes" not in ns, ns.keys()
    assert set(host) - set(ns) == {"gpu_0_process_memory_megabytes"}, set(host) ^ set(ns)
    clause = ("gpu_*_process_memory_megabytes and the holders of gpu_memory_at_peak dropped: "
              "this process has a pid namespace of its own (a container without hostPID) and "
              "NVML lists the host's pids, which cannot be mapped into it")
    assert any(clause in n for n in gpu_notes(outs["ns"])), gpu_notes(outs["ns"])
    assert not any(clause in n for n in gpu_notes(outs["host"])), gpu_notes(outs["host"])


# ---- detail level full: the GPU's real work, NVLink; the energy tag (issue 47) ----------

FULL_SIX = ("sm_active_percentage", "sm_occupancy_percentage", "tensor_active_percentage",
            "dram_bandwidth_percentage", "nvlink_receive_megabytes",
            "nvlink_transmit_megabytes")


def probe_detail(binary, root, env, *detail):
    """`scopemeter probe --json --interval 0.2 [--detail L]`: the probe opens
    (the first GPM sample, the NVLink counters' base) and samples once 0.2 s
    later, a GPM pair >= 100 ms apart whatever the machine's speed (a sleep
    never returns early)."""
    import json
    import subprocess
    e = clean_env(SCOPEMETER_SYSROOT=str(root), **env)
    p = subprocess.run([binary, "probe", "--json", "--interval", "0.2", *detail], env=e,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    out["_stderr"] = p.stderr
    return out


def test_detail_full_gpm_nvlink_per_gpu(machine, lib, scopemeter_bin):
    """GPU 0 has GPM (Hopper): the four percentages are the fake's rates of
    the interval between open's and the sample's GPM samples (the second
    value of each script); GPU 1 has none (before Hopper): one clause, its
    NVLink from the field counters still.  A metric the driver refuses is
    dropped alone.  NVLink: (5000 - 1000) KiB = 4.096 MB."""
    root = machine.dev_nodes("nvidia0", "nvidia1")
    env = {"SCOPEMETER_NVML_LIBRARY": lib["full"], "FAKE_NVML_DEVICES": "2",
           "FAKE_NVML_GPM_1": "0", "FAKE_NVML_GPM_SM_0": "60,75",
           "FAKE_NVML_GPM_TENSOR_0": "5,42", "FAKE_NVML_GPM_DRAM_0": "1,33",
           "FAKE_NVML_GPM_FAIL_OCC_0": "3",
           "FAKE_NVML_NVLINK_RX_0": "1000,5000", "FAKE_NVML_NVLINK_TX_1": "7,2055"}
    out = probe_detail(scopemeter_bin, root, env, "--detail", "full")
    s = gpu_series(out)
    got = {k: s[k]["raw"] for k in s if k.endswith(FULL_SIX)}
    assert got == {
        "gpu_0_sm_active_percentage": 75.0, "gpu_0_tensor_active_percentage": 42.0,
        "gpu_0_dram_bandwidth_percentage": 33.0,
        "gpu_0_nvlink_receive_megabytes": pytest.approx(4000 * 1024 / 1e6, rel=1e-12),
        "gpu_0_nvlink_transmit_megabytes": 0.0,
        "gpu_1_nvlink_receive_megabytes": 0.0,
        "gpu_1_nvlink_transmit_megabytes": pytest.approx(2048 * 1024 / 1e6, rel=1e-12),
    }, got
    assert s["gpu_0_sm_active_percentage"]["source"] == "nvmlGpmMetricsGet(NVML_GPM_METRIC_SM_UTIL)"
    assert s["gpu_0_sm_active_percentage"]["unit"] == "percent"
    assert ("gpu: gpu_1_{sm_active,sm_occupancy,tensor_active,dram_bandwidth}_percentage "
            "dropped: nvmlGpmQueryDeviceSupport says fake NVML: Not Supported") in out["notes"]
    assert out["_stderr"].count("gpu_0_sm_occupancy_percentage dropped: nvmlGpmMetricsGet("
                                "NVML_GPM_METRIC_SM_OCCUPANCY) says fake NVML: Not "
                                "Supported") == 1, out["_stderr"]
    # SCOPEMETER_DETAIL=full is the same level
    out2 = probe_detail(scopemeter_bin, root, {**env, "SCOPEMETER_DETAIL": "full"})
    assert {k for k in gpu_series(out2) if k.endswith(FULL_SIX)} == set(got)


MOVED_FOUR = ("sm_clock_megahertz", "memory_clock_megahertz", "ecc_errors_corrected",
              "ecc_errors_uncorrected")


def test_default_level_leaves_clocks_and_ecc_to_full(machine, lib, scopemeter_bin):
    """The default level's GPU series are 12 per GPU: the clocks and ECC
    counts are level full's (docs/series.md "Levels"; 16 before, the tab
    shrinks), the PCIe bytes and throttled shares stay; a bad word is said
    and ignored; full adds the four and the six of the GPU's work."""
    root = machine.dev_nodes("nvidia0")
    env = {"SCOPEMETER_NVML_LIBRARY": lib["full"]}
    out = probe_detail(scopemeter_bin, root, env)
    assert sorted(gpu_series(out)) == sorted(expected(0)), sorted(gpu_series(out))
    assert len(gpu_series(out)) == 12
    out = probe_detail(scopemeter_bin, root, {**env, "SCOPEMETER_DETAIL": "most"})
    assert len(gpu_series(out)) == 12
    full = probe_detail(scopemeter_bin, root, env, "--detail", "full")
    assert len(gpu_series(full)) == 12 + 10, sorted(gpu_series(full))
    assert {k for k in gpu_series(full) if k.endswith(MOVED_FOUR)} == \
        {f"gpu_0_{k}" for k in MOVED_FOUR}
    for k, v in expected(0, full=True).items():
        if k.endswith(MOVED_FOUR):
            assert gpu_series(full)[k]["raw"] == pytest.approx(v, rel=1e-12), k


def test_each_level_recorded_in_a_run(tmp_path, machine, lib, scopemeter_bin):
    """What a run records at each level (scopemeter run, the fake NVML):
    at the default no clock and no ECC series, the ECC counts in the
    gpu_events end tag and one line; with --detail full both series, the same
    counts.  2 corrected and 1 uncorrected errors after open."""
    import json
    from runread import run_cli
    root = machine.dev_nodes("nvidia0")
    env = {"SCOPEMETER_SYSROOT": str(root), "SCOPEMETER_NVML_LIBRARY": lib["full"],
           "FAKE_NVML_ECC_CORR_0": "0,2", "FAKE_NVML_ECC_UNCORR_0": "0,1"}
    got = {}
    for level in ("default", "full"):
        out = tmp_path / f"{level}.jsonl"
        p = run_cli(scopemeter_bin, ["--interval", "0.2", "--jsonl", str(out), "--detail", level,
                                     "--", "sleep", "0.5"], env=env)
        assert p.returncode == 0, p.stderr
        recs = [json.loads(line) for line in out.read_text().splitlines()]
        keys = {r["key"] for r in recs if r["kind"] == "metric"}
        tags = {r["key"]: r["value"] for r in recs if r["kind"] == "tag"}
        got[level] = (keys, tags, p.stderr)
    keys, tags, err = got["default"]
    assert not {k for k in keys if any(m in k for m in MOVED_FOUR)}, sorted(keys)
    assert "system/gpu_0_pcie_receive_megabytes/rank0" in keys, sorted(keys)
    assert tags.get("scopemeter.rank0.gpu_events") == "gpu0 ecc_corrected=2 ecc_uncorrected=1", tags
    assert "gpu: GPU 0: ECC errors since recording started: 2 corrected, 1 uncorrected" in err, err
    keys, tags, _ = got["full"]
    assert {f"system/gpu_0_{k}/rank0" for k in MOVED_FOUR} <= keys, sorted(keys)
    assert tags.get("scopemeter.rank0.gpu_events") == "gpu0 ecc_corrected=2 ecc_uncorrected=1", tags


def test_energy_end_tag_through_run(tmp_path, machine, lib, scopemeter_bin):
    """scopemeter run ends with scopemeter.rank0.gpu_energy: each GPU's
    energy since start in kWh (mJ / 3.6e9), a counter below its last value
    (a driver reload) counted whole; at the default level."""
    from runread import run_cli
    root = machine.dev_nodes("nvidia0", "nvidia1")
    out = tmp_path / "run.jsonl"
    # GPU 0: 1e9 at open, then 4.6e9 (+3.6e9 mJ = 1 kWh), then 1000 (reload,
    # +1000 mJ), repeating: 3600001000 mJ whatever the number of windows
    p = run_cli(scopemeter_bin, ["--interval", "0.2", "--jsonl", str(out), "--", "true"],
                env={"SCOPEMETER_SYSROOT": str(root), "SCOPEMETER_NVML_LIBRARY": lib["full"],
                     "FAKE_NVML_DEVICES": "2",
                     "FAKE_NVML_ENERGY_0": "1000000000,4600000000,1000"})
    assert p.returncode == 0, p.stderr
    import json
    tags = {r["key"]: r["value"] for r in map(json.loads, out.read_text().splitlines())
            if r["kind"] == "tag"}
    assert tags.get("scopemeter.rank0.gpu_energy") == \
        "gpu0 kwh=1.000000; gpu1 kwh=0.000000; total_kwh=1.000000", tags


FRONT_DETAIL = """
import sys, time, scopemeter
word = None if sys.argv[1] == "None" else sys.argv[1]
print("RESULT", scopemeter.enable_system_metrics(interval=0.2, detail=word), flush=True)
time.sleep(0.6)
scopemeter.disable_system_metrics()
"""


def test_front_detail_keyword(tmp_path, machine, lib):
    """enable_system_metrics(detail=) (docs/python.md) through the C setter
    sm_monitor_set_detail: "full" records the clocks and ECC counts, None
    takes SCOPEMETER_DETAIL, "default" beats SCOPEMETER_DETAIL=full; another
    word is one line and False, a non-str a TypeError."""
    import subprocess
    import sys
    from pyfront_util import new_run, python_env, read_run
    root = machine.dev_nodes("nvidia0")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    base = dict(MLFLOW_TRACKING_URI=uri, SCOPEMETER_SYSROOT=str(root),
                SCOPEMETER_NVML_LIBRARY=lib["full"])
    clock = "system/gpu_0_sm_clock_megahertz/rank0"
    for word, env_level, has_clock in (("full", None, True), ("None", None, False),
                                       ("None", "full", True), ("default", "full", False)):
        run_id = new_run(uri)
        env = python_env(**base, MLFLOW_RUN_ID=run_id,
                         **({"SCOPEMETER_DETAIL": env_level} if env_level else {}))
        p = subprocess.run([sys.executable, "-c", FRONT_DETAIL, word], env=env,
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 0 and "RESULT True" in p.stdout, (word, env_level, p.stderr)
        metrics, _ = read_run(uri, run_id)
        assert "system/gpu_0_temperature_celsius/rank0" in metrics, sorted(metrics)
        assert (clock in metrics) == has_clock, (word, env_level, sorted(metrics))
        assert ("system/gpu_0_ecc_errors_corrected/rank0" in metrics) == has_clock
    p = subprocess.run([sys.executable, "-c", FRONT_DETAIL, "most"], env=python_env(
        **base, MLFLOW_RUN_ID=new_run(uri)), capture_output=True, text=True, timeout=120,
        cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("scopemeter:")]
    assert p.returncode == 0 and "RESULT False" in p.stdout, p.stderr
    assert lines == ["scopemeter: warning: enable_system_metrics(): detail must be default or "
                     "full, got 'most'; system metrics not recorded"], p.stderr
    import scopemeter
    with pytest.raises(TypeError, match="detail must be 'default', 'full' or None, not int"):
        scopemeter.enable_system_metrics(detail=1)
