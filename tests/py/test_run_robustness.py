"""`scopemeter run` where its surroundings are unusual (reviewer's findings):
an inherited SIGCHLD disposition of SIG_IGN, a stderr pipe whose reader goes
away, and a job id that repeats across jobs (a fixed torchrun --rdzv-id) or
across restarts of one job (docs/cli.md, "Several ranks, one run")."""
import os
import subprocess
import sys
import time
import uuid

from conftest import clean_env
from runread import get_run, read_bytes, rest, sm_lines, start_cli

SIGPIPE_BIT = 1 << (13 - 1)  # /proc/PID/status SigIgn: bit N-1 for signal N
SIGCHLD_BIT = 1 << (17 - 1)


def sig_ignored(status_line):
    """The SigIgn mask from a '/proc/self/status' line 'SigIgn:\t<hex>'."""
    return int(status_line.split()[-1], 16)


# ---- signals ---------------------------------------------------------------------

def test_inherited_sigchld_ignored_still_exits_and_cmd_keeps_it(scopemeter_bin, tmp_path):
    # With SIGCHLD ignored the kernel reaps CMD and sends no SIGCHLD
    # (waitpid(2)); scopemeter used to wait on its signalfd forever.
    launcher = ("import os, signal, sys\n"
                "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
                "b = sys.argv[1]\n"
                "os.execv(b, [b, 'run', '--interval', '5', '--', 'grep', 'SigIgn', "
                "'/proc/self/status'])\n")
    p = subprocess.run([sys.executable, "-c", launcher, scopemeter_bin], env=clean_env(),
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # CMD got the disposition its caller gave (ignored signals survive exec)
    assert sig_ignored(p.stdout.strip()) & SIGCHLD_BIT, p.stdout
    assert not any("reaped elsewhere" in l for l in sm_lines(p.stderr)), p.stderr


def test_closed_stderr_pipe_does_not_kill_the_run(scopemeter_bin, tmp_path):
    # `scopemeter run -- CMD 2>&1 | head -c 10`: the reader is gone after the
    # first line; the next line scopemeter writes used to raise SIGPIPE, and
    # PR_SET_PDEATHSIG then killed CMD.
    script = ("sleep 2; grep SigIgn /proc/self/status > sig.txt; echo finished > done.txt; "
              "exit 3")
    p = subprocess.Popen([scopemeter_bin, "run", "--interval", "5", "--", "sh", "-c", script],
                         env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd=tmp_path)  # Popen restores SIGPIPE to SIG_DFL, as a shell has it
    try:
        assert read_bytes(p.stderr, 10) == b"scopemeter"
        p.stderr.close()
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 3  # CMD's status, not a death by SIGPIPE (-13)
    assert (tmp_path / "done.txt").read_text() == "finished\n"
    # CMD runs with SIGPIPE at its default action, as it was given
    assert not sig_ignored((tmp_path / "sig.txt").read_text()) & SIGPIPE_BIT


# ---- a job id that repeats ------------------------------------------------------------

JOB_TAG = "scopemeter.job_id"
PRINT_RUN = "import os, time; time.sleep(1); print(os.environ.get('MLFLOW_RUN_ID'))"


def rank_env(uri, rank, job, restart=None):
    # two pods of one rank each: both collect (--all-workers)
    return {"MLFLOW_TRACKING_URI": uri, "RANK": rank, "LOCAL_RANK": 0, "WORLD_SIZE": 2,
            "LOCAL_WORLD_SIZE": 1, "TORCHELASTIC_RUN_ID": job,
            "TORCHELASTIC_RESTART_COUNT": restart}


def launch(binary, uri, job, cwd, ranks=(0, 1), restart=None):
    """Starts the given ranks of one job at once; [(returncode, run id CMD saw, stderr)]."""
    procs = [start_cli(binary, ["--all-workers", "--interval", "0.5", "--", sys.executable, "-c",
                                PRINT_RUN],
                       env=rank_env(uri, r, job, restart), cwd=cwd) for r in ranks]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=120)
        out.append((p.returncode, so.strip().splitlines()[-1], se))
    return out


def tagged_run(uri, job, start_ms, status=None):
    """A run of experiment 0 tagged as job `job`'s run, as rank 0 creates it."""
    r = rest(uri, "runs/create", {"experiment_id": "0", "start_time": start_ms,
                                  "tags": [{"key": JOB_TAG, "value": f"torchelastic:{job}"}]})
    run_id = r["run"]["info"]["run_id"]
    if status:
        rest(uri, "runs/update", {"run_id": run_id, "status": status, "end_time": start_ms + 1})
    return run_id


def now_ms():
    return int(time.time() * 1000)


def test_two_jobs_with_the_same_job_id_get_two_runs(scopemeter_bin, mlflow_server, tmp_path):
    job = uuid.uuid4().hex  # a fixed --rdzv-id, used by two jobs one after the other
    runs = []
    for _ in range(2):
        res = launch(scopemeter_bin, mlflow_server, job, tmp_path)
        for rc, _, err in res:
            assert rc == 0, err
        ids = {run_id for _, run_id, _ in res}
        assert len(ids) == 1 and "None" not in ids, res  # the ranks of a job share one run
        runs.append(ids.pop())
        assert not any("continuing run" in l for l in sm_lines(res[0][2])), res[0][2]
    assert runs[0] != runs[1]  # the second job does not record into the first's run
    for run_id in runs:
        run = get_run(mlflow_server, run_id)
        assert run["info"]["status"] == "FINISHED"
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        assert tags[JOB_TAG] == f"torchelastic:{job}"
        assert "scopemeter.rank0.node" in tags and "scopemeter.rank1.node" in tags


def test_restart_continues_the_jobs_running_run(scopemeter_bin, mlflow_server, tmp_path):
    job = uuid.uuid4().hex
    # the run of attempt 0, left RUNNING (its rank 0 was killed before ending it)
    prev = tagged_run(mlflow_server, job, now_ms() - 60000)
    res = launch(scopemeter_bin, mlflow_server, job, tmp_path, restart=1)
    for rc, run_id, err in res:
        assert rc == 0, err
        assert run_id == prev, (run_id, err)
    assert any(f"continuing run {prev}" in l for l in sm_lines(res[0][2])), res[0][2]
    assert get_run(mlflow_server, prev)["info"]["status"] == "FINISHED"  # rank 0 ends it


def test_first_attempt_never_continues_a_run_left_running(scopemeter_bin, mlflow_server,
                                                          tmp_path):
    # an earlier job with the same id whose rank 0 died without ending its run
    job = uuid.uuid4().hex
    stale = tagged_run(mlflow_server, job, now_ms() - 60000)
    [(rc, run_id, err)] = launch(scopemeter_bin, mlflow_server, job, tmp_path, ranks=(0,),
                                 restart=0)
    assert rc == 0, err
    assert run_id not in (stale, "None"), err
    assert any(f"created run {run_id}" in l for l in sm_lines(err)), err
    assert get_run(mlflow_server, stale)["info"]["status"] == "RUNNING"  # not touched


def test_restart_does_not_continue_a_finished_run(scopemeter_bin, mlflow_server, tmp_path):
    job = uuid.uuid4().hex
    done = tagged_run(mlflow_server, job, now_ms() - 60000, status="FINISHED")
    [(rc, run_id, err)] = launch(scopemeter_bin, mlflow_server, job, tmp_path, ranks=(0,),
                                 restart=1)
    assert rc == 0, err
    assert run_id not in (done, "None"), err
    assert any(f"created run {run_id}" in l for l in sm_lines(err)), err


def test_other_ranks_take_the_newest_running_run(scopemeter_bin, mlflow_server, tmp_path):
    job = uuid.uuid4().hex
    t = now_ms()
    tagged_run(mlflow_server, job, t - 90000, status="FINISHED")  # an earlier job's
    older = tagged_run(mlflow_server, job, t - 60000)  # left RUNNING by a dead job
    newest = tagged_run(mlflow_server, job, t - 30000)  # the one rank 0 just created
    [(rc, run_id, err)] = launch(scopemeter_bin, mlflow_server, job, tmp_path, ranks=(1,))
    assert rc == 0, err
    assert run_id == newest != older, err
