"""bench/harness.py — what bench/run's sections share: the context of one run
(Ctx: the build's programs, the servers, the tables and targets the sections
fill), the constants more than one section reads, and log().  A section's own
measurement never lives here: each is in bench/sections/ (bench/README.md)."""
import os
import re
import sys
import tempfile
import threading

import benchlib as B


STOP_TIMEOUT = 5.0          # the bound given to scopemeter's stop in measurement 6


INTERVALS = (10.0, 1.0)     # MLflow's default period, and the stressed one


SCALE_N = (1, 4, 8, 16, 64)


SERVER_ENV = {"MLFLOW_SQLALCHEMYSTORE_POOLCLASS": "NullPool",
              "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


# what every healthy `scopemeter run` start prints (docs/monitor.md)
ROUTINE = ("collecting ", "no cgroup limit", "/dev/nvidia", "write-load cap", "no node name",
           "created run")


# the end receipt of a healthy run: everything delivered (src/engine/monitor.c)
RECEIPT = re.compile(r"logged \d+ windows \(\d+ points, \d+ tags\): \d+ delivered, 0 dropped "
                     r"\(buffer full\), 0 refused, 0 undelivered at stop$")


EXPERIMENT = "scopemeter-bench"


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Ctx:
    def __init__(self, args, p):
        self.args, self.p = args, p
        self.build = os.path.abspath(args.build)
        self.cli = os.path.join(self.build, "cli", "scopemeter")
        self.sample_cost = os.path.join(self.build, "bench", "sample_cost")
        self.window_floor = os.path.join(self.build, "bench", "window_floor")
        self.tree_cost = os.path.join(self.build, "bench", "tree_cost")
        self.pyfront = B.pyfront_dir(self.build)
        self.tmp = tempfile.mkdtemp(prefix="scopemeter-bench-")
        self.server = None
        self.spare = None        # a second server, only for the SIGSTOP case (thread-started)
        self.cost = None         # table 10's servers (thread-started)
        self.wandb = None        # version string, or None
        self.wandb_why = None    # why W&B rows are skipped
        self.results = {}        # section -> raw and summarised numbers
        self.tables = []
        self.targets = []        # (target, criterion, measured, met)
        self.errors = []

    def start_spare(self):
        """Starts the second server in the background (it takes a while)."""
        box = {}

        def go():
            try:
                box["server"] = B.Server(os.path.join(self.tmp, "spare"))
            except Exception as e:
                box["error"] = e
        t = threading.Thread(target=go, daemon=True)
        t.start()
        self.spare = (t, box)

    def spare_server(self):
        if self.spare is None:
            self.start_spare()
        t, box = self.spare
        t.join()
        if "error" in box:
            raise box["error"]
        return box["server"]

    def stop_spare(self):
        if self.spare is not None:
            t, box = self.spare
            t.join()
            if "server" in box:
                box["server"].stop()

    def env(self, **extra):
        return B.child_env(self.pyfront, **extra)

    def py(self, script, *args):
        return [sys.executable, os.path.join(B.BENCH, script)] + [str(a) for a in args]
