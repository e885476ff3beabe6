"""The C API as a native program meets it (docs/design.md §8): `meson install`
puts the headers, libscopemeter.so and scopemeter.pc under a prefix;
`pkg-config --cflags --libs scopemeter` builds a program against them, which
runs and reports the version written once, in VERSION (the header's
SM_VERSION, the library's sm_version() and the .pc's Version all agree)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROG = r"""
#include <stdio.h>
#include <string.h>
#include <scopemeter.h>
#include <scopemeter_mlflow.h>
int main(void)
{
    /* the sized structs as a program fills them (scopemeter.h, "Growth") */
    sm_plan_input in = SM_PLAN_INPUT_INIT;
    sm_plan plan = SM_PLAN_INIT;
    sm_run_request req = SM_RUN_REQUEST_INIT;
    sm_run_result res = SM_RUN_RESULT_INIT;
    int rc;
    in.workers = 8;
    rc = sm_plan_estimate(&in, &plan, NULL, 0);
    printf("header %s hex %06x library %s run-id-ok %d %d plan %d %d sized %d\n", SM_VERSION,
           SM_VERSION_HEX, sm_version(), sm_mlflow_valid_run_id("0123abc"),
           sm_mlflow_valid_run_id("../x"), rc, plan.collectors,
           req.size == sizeof req && res.size == sizeof res);
    return strcmp(SM_VERSION, sm_version()) != 0;
}
"""


@pytest.mark.timeout(300)
@pytest.mark.skipif(not shutil.which("pkg-config") or not shutil.which("cc"),
                    reason="needs pkg-config and a C compiler")
def test_installed_c_api_builds_with_pkg_config(tmp_path):
    build = os.environ.get("SCOPEMETER_BUILD") or os.path.join(ROOT, "build")
    dest = tmp_path / "dest"
    p = subprocess.run(["meson", "install", "-C", build, "--destdir", str(dest),
                        "--tags", "devel,c-api"], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    pcs = list(dest.rglob("scopemeter.pc"))
    assert len(pcs) == 1, pcs
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcs[0].parent), PKG_CONFIG_SYSROOT_DIR=str(dest))
    version = open(os.path.join(ROOT, "VERSION")).read().strip()
    mod = subprocess.run(["pkg-config", "--modversion", "scopemeter"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert mod == version
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "scopemeter"], env=env,
                           capture_output=True, text=True, check=True).stdout.split()
    src = tmp_path / "prog.c"
    src.write_text(PROG)
    exe = tmp_path / "prog"
    # -Wextra: the SM_*_INIT macros initialise every field (-Wmissing-field-initializers)
    cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe)] + flags,
                        capture_output=True, text=True, timeout=120)
    assert cc.returncode == 0, cc.stderr
    libdir = [f[2:] for f in flags if f.startswith("-L")][0]
    run = subprocess.run([str(exe)], env=dict(os.environ, LD_LIBRARY_PATH=libdir),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    major, minor, patch = (int(x) for x in version.split("."))
    assert run.stdout.split() == ["header", version, "hex", f"{(major << 16) | (minor << 8) | patch:06x}",
                                  "library", version, "run-id-ok", "1", "0", "plan", "0", "1",
                                  "sized", "1"], run.stdout
