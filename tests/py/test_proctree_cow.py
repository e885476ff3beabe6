"""docs/design.md §9, the process tree's memory through copy-on-write (issue 33
item 1): `scopemeter run --jsonl` in a real 2 GiB v1 memory cgroup, as the
user ran it, its process_memory_megabytes against the Pss sum this test reads
itself from /proc/PID/smaps_rollup of the whole tree (scopemeter, CMD and its
children) at the same moments, for the whole run.

The workload moves in steps and holds still between them; the test releases
each step, waits for the step's "done", then for two points whose samples both
began after it (the first may have straddled the step), reads its own Pss sum
at the hold's start and at its end, and lets the next step go.  Every point of
every hold must be within the documented bound, max(2 % of Pss, 4 MB) plus the
0.1 MB rounding (design.md §9 "Memory"), of the span of those two reads.

How each verdict stays free of the machine's speed (issue 49 item 1): the
bound is the documented error, never a margin; what the design leaves to a
read (exits that took more than their private pages, MEM_DOUBT; faults that
were not all unsharing, MEM_UNSHARE) is held only from the read the step calls
for, and that read is a condition, not a time: the recorder runs with
SCOPEMETER_TRACE=proc (docs/cli.md), which says each read of the tree, when
it began, what it read and what it cost, and each sample between reads with
the read it waits for.  A step of kind "faults" or "exits" holds from the
first sample after its done that waits for no read a change calls for (a read
kept, or an estimate whose next read waits only for resident pages or age):
when the estimate follows the step exactly no read is called for, and the
hold begins at once.  What is judged is the estimate from there; a recorder
that never takes the read it calls for fails on the test's timeout.  (Before, the hold began T*3
over the rule's share of one core after the done, T the CPU time of the
test's own read of the tree; a stress run's read cost rose from 28 to 52 ms
within the run, and the recorder's read came after that hold began: 351.8 MB
for 362.5 at d1.)  The peak tag is waited for as a condition too (a window tag
at least the tree's Pss less the bound).  Page-cache pages shared with a
process outside the tree (another program loading torch's libraries) move the
tree's Pss with no fault and no resident page of its own, a move the design
says the estimate gets wrong by at most the move: the bound adds the move of
the tree's Pss_File since the recorder's last read (the trace gives the read's,
the test reads its own).  Measured here: a second program importing torch
took a torch process's Pss from 203 to 174 MB (Pss_File 60 to 31) at the same
resident 217 MB; two stress passes beside other agents' torch programs missed
by 10.7 MB, one each way (351.8 for 362.5 at d1, 386.6 for 377.9 at d2).  A failure prints the values, the bound, the
read the hold began from and the recorder's reads.

- cow.py: a parent touches 200 MB, forks 3 children, each child then writes
  every page of it in four steps (the issue's reproduction: the tree stayed
  at the parent's 221 MB while Pss went to 850 MB), then they exit;
- share.py: a parent touches 1 GB, forks 9 children that write nothing, 6
  of them then take 16 MB of their own and exit, 3 more are forked and take
  16 MB each, all exit: a tree that costs 0.2-0.4 s a read, so what follows
  the first forks is between reads, where the series is estimated;
- orphan.py: a parent of 1 GB forks 6 children, frees 600 MB of it (theirs
  alone now), and they exit: what they took is more than their private pages;
- a torch DataLoader whose 2 forked workers each write into the tensor the
  dataset inherited from the parent (16 MB a step, 128 MB in all);
- issue 46 item 4's: a 500 MiB parent forks 3 children that rewrite 100 MiB
  each at once, then exit; its process_tree_peak tags against the test's Pss.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import clean_env, is_root
from test_cgroup_real import MOUNTS, Cgroups, write

GiB = 1 << 30

# what every workload speaks: mark("dN") when done, wait("gN") to go; touch
STEPS = """
    import os, sys, time
    d = sys.argv[1]
    def mark(name):
        open(os.path.join(d, name), "w").close()
    def wait(name):
        while not os.path.exists(os.path.join(d, name)):
            time.sleep(0.02)
    def touch(n):                       # n bytes, every page resident
        b = bytearray(n)
        for i in range(0, n, 4096):
            b[i] = 1
        return b
"""

COW = STEPS + """
    N = 200 * 1000 * 1000
    b = touch(N)
    mark("d0")
    wait("g0")
    kids = []
    for c in (1, 2, 3):
        pid = os.fork()
        if pid == 0:                    # forked: every page shared
            for q in (1, 2, 3, 4):      # then every page written, a quarter a step
                wait("g%d%d" % (c, q))
                for i in range((q - 1) * N // 4, q * N // 4, 4096):
                    b[i] = 2
                mark("d%d%d" % (c, q))
            wait("g98")
            os._exit(0)
        kids.append(pid)
    mark("d1")
    for pid in kids:
        os.waitpid(pid, 0)
    mark("d98")
    wait("g99")
"""
COW_STEPS = ([(None, ["d0"]), ("g0", ["d1"])] +
             [(f"g{c}{q}", [f"d{c}{q}"], "faults") for c in (1, 2, 3) for q in (1, 2, 3, 4)] +
             [("g98", ["d98"], "exits")])

# children that wait, and their parent's join; SHARE and ORPHAN fork with it
FORKS = """
    def fork(n, until, grow=None, name=""):
        kids = []
        for c in range(n):
            pid = os.fork()
            if pid == 0:                # forked: every page shared, none written
                if grow:                # then 16 MB of its own, the child's mark
                    wait(grow)
                    own = touch(16 * 1000 * 1000)
                    mark("%s%d" % (name, c))
                wait(until)
                os._exit(0)
            kids.append(pid)
        return kids
    def join(kids, done):
        for pid in kids:
            os.waitpid(pid, 0)
        mark(done)
"""

SHARE = STEPS + FORKS + """
    N = 1000 * 1000 * 1000
    b = touch(N)
    mark("d0")
    wait("g1")
    early, late = fork(6, "g3", "g2", "e"), fork(3, "g98")
    mark("d1")
    wait("g3")
    join(early, "d3")
    wait("g4")
    late += fork(3, "g98", "g4", "n")
    mark("d4")
    wait("g98")
    join(late, "d98")
    wait("g99")
"""
SHARE_STEPS = [(None, ["d0"]), ("g1", ["d1"]), ("g2", [f"e{c}" for c in range(6)]),
               ("g3", ["d3"], "exits"), ("g4", ["d4", "n0", "n1", "n2"]), ("g98", ["d98"], "exits")]

ORPHAN = STEPS + FORKS + """
    c = touch(400 * 1000 * 1000)
    keep = fork(1, "g99")               # c is shared with it to the end
    b = touch(600 * 1000 * 1000)
    mark("d0")
    wait("g1")
    kids = fork(6, "g3")
    mark("d1")
    wait("g2")
    del b                               # the parent frees b: the 6 children's alone
    mark("d2")
    wait("g3")
    join(kids, "d3")
    wait("g99")
    join(keep, "d99")
"""
# The hold after the exits begins when the read they call for is due, T/0.1
# after the last read (proc_estimate.c MEM_DOUBT; T from this run, the
# module's docstring); the 2 % spacing of before waited T/0.02.
ORPHAN_STEPS = [(None, ["d0"]), ("g1", ["d1"]), ("g2", ["d2"]), ("g3", ["d3"], "exits")]

LOADER = STEPS + """
    import torch
    from torch.utils.data import DataLoader, Dataset
    torch.set_num_threads(1)
    CHUNK = 4 * 1000 * 1000             # floats: 16 MB a step
    class Writes(Dataset):
        def __init__(self):
            self.t = torch.ones(8 * CHUNK)   # 128 MB, inherited by the forked workers
        def __len__(self):
            return 9                    # the 9th writes nothing: the loop's end follows it
        def __getitem__(self, i):
            wait("g%d" % (i + 1))
            if i < 8:
                self.t[i * CHUNK:(i + 1) * CHUNK] += 1   # copy-on-write: the worker's own pages
            mark("d%d" % (i + 1))
            return i
    ds = Writes()
    mark("d0")
    wait("g0")
    for _ in DataLoader(ds, batch_size=None, num_workers=2, prefetch_factor=1,
                        multiprocessing_context="fork",
                        worker_init_fn=lambda w: mark("w%d" % w)):
        pass
    mark("d98")                         # the workers are joined
    wait("g99")
"""
LOADER_STEPS = ([(None, ["d0"]), ("g0", ["w0", "w1"])] +
                [(f"g{i}", [f"d{i}"], "faults") for i in range(1, 9)] + [("g9", ["d98"], "exits")])

# issue 46 item 4: a 500 MiB parent forks 3 children that rewrite 100 MiB
# each at once (the read the forks call for meets their writes), then exit
PEAK = STEPS + FORKS + """
    N = 500 * 1024 * 1024
    b = touch(N)
    mark("d0")
    wait("g1")
    kids = []
    for c in range(3):
        pid = os.fork()
        if pid == 0:                    # forked: every page shared
            M = 100 * 1024 * 1024       # then 100 MiB of it written, its own
            for i in range(c * M, (c + 1) * M, 4096):
                b[i] = 2
            mark("w%d" % c)
            wait("g98")
            os._exit(0)
        kids.append(pid)
    wait("g98")
    join(kids, "d98")
    wait("g99")
"""
PEAK_STEPS = [(None, ["d0"]), ("g1", ["w0", "w1", "w2"], "faults+peak"),
              ("g98", ["d98"], "exits")]


def tree(root):
    """root and its descendants, from /proc/PID/task/TID/children."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                pass
    return out


def pss_mb(root, file=None):
    """The tree's Pss sum, in the series' MB (10^6 bytes), and the CPU time
    reading it took this thread (s): the kernel walks each page table.  Its
    Pss_File sum (MB) is appended to the list file when one is given."""
    kb, fkb, t0 = 0, 0, time.thread_time()
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        kb += int(line.split()[1])
                    elif line.startswith("Pss_File:"):
                        fkb += int(line.split()[1])
        except OSError:
            pass  # exited since the walk
    if file is not None:
        file.append(fkb * 1024 / 1e6)
    return kb * 1024 / 1e6, time.thread_time() - t0


class Points:
    """process_memory_megabytes points (and process_tree_peak tags) of the
    JSONL file, read as it grows."""

    def __init__(self, path):
        self.path, self.pos, self.pts, self.peaks = path, 0, [], []

    def poll(self):
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                while True:
                    line = f.readline()
                    if not line.endswith("\n"):
                        break
                    self.pos += len(line.encode())
                    r = json.loads(line)
                    if r["kind"] == "metric" and "process_memory_megabytes" in r["key"]:
                        self.pts.append((r["timestamp"], r["value"]))
                    if r["kind"] == "tag" and r["key"].endswith(".process_tree_peak"):
                        kv = dict(w.split("=") for w in r["value"].split())
                        self.peaks.append(float(kv["memory_mb"]))
        except FileNotFoundError:
            pass
        return self.pts


def bound(pss):
    return max(0.02 * pss, 4 * 1024 * 1024 / 1e6) + 0.1


# what a step leaves to a read, and that read's share of one core (design.md §9)
HOLD_FROM_READ = ("faults", "exits")  # the steps whose verdict waits for a read (above)
TRACE = re.compile(r"trace: process tree \(own\) (read|estimated) at ([0-9.]+)(?: \((\w+)\))?: "
                   r"(.*)")
SETTLED = ("resident", "age")  # an estimate waiting for none of the reads a change calls for


class Reads:
    """scopemeter's stderr, read as it comes: its lines, and the reads of the
    own tree it traced (SCOPEMETER_TRACE=proc) as (began, why, what)."""

    def __init__(self, stream):
        self.lines, self.lock = [], threading.Lock()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream):
        for line in stream:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def samples(self):
        """(what, when, why, the rest): every read and estimate traced."""
        with self.lock:
            found = [TRACE.search(x) for x in self.lines]
        return [(m[1], float(m[2]), m[3], m[4]) for m in found if m]

    def reads(self):
        return [x for x in self.samples() if x[0] == "read"]

    def settled_after(self, t_s):
        """The first sample after t_s (seconds) that waits for no read a
        change calls for: a read kept, or an estimate whose next read waits
        only for resident pages moving or age (design.md §9, the table).
        None while a read is still called for."""
        for what, when, why, rest in self.samples():
            if when <= t_s:
                continue
            if what == "read" and "not kept" not in rest:
                return what, when, why, rest
            m = re.search(r"next read in [0-9.]+ s \((\w+)\)", rest)
            if what == "estimated" and m and m[1] in SETTLED:
                return what, when, m[1], rest
        return None

    def text(self):
        with self.lock:
            return "\n".join(self.lines[-40:])


def drive(tmp_path, text, steps, timeout, peaks=None):
    """Runs the workload's steps; returns (step, point, the test's Pss at the
    hold's start, at its end) of every point held, and the process_tree_peak
    tags into peaks."""
    if not is_root() or "memory" not in MOUNTS:
        pytest.skip("needs root and a cgroup v1 memory controller")
    # A library this process maps shares its page-cache pages with the tree's:
    # the tree's Pss then counts them by half, the estimate whole until its next
    # read (design.md §9, "pages shared with a process outside the tree").
    # torch's: 38 MB of a 350 MB workload measured here, and the suite's
    # process had it (test_ray, test_torchrun imported it at collection; a
    # stress run read 325.1 MB for 318.6 at d0).  So the suite looks torch up
    # (importlib.util.find_spec) and never imports it, and what another
    # program's mapping moves is in the bound (the Pss_File term, below).
    src = tmp_path / "work.py"
    src.write_text(textwrap.dedent(text))
    d = tmp_path / "sync"
    d.mkdir()
    out = tmp_path / "p.jsonl"
    cg = Cgroups("cow")
    cg.dirs = {"memory": cg.dirs["memory"]}
    cg.create()
    write(f"{cg.dirs['memory']}/memory.limit_in_bytes", str(2 * GiB))
    proc = subprocess.Popen(
        [os.environ.get("SCOPEMETER_BIN", "scopemeter"), "run", "--jsonl", str(out),
         "--interval", "0.5", "--", sys.executable, str(src), str(d)],
        env=dict(clean_env(), SCOPEMETER_TRACE="proc"), preexec_fn=cg.enter,
        stderr=subprocess.PIPE, text=True)
    points = Points(str(out))
    err = Reads(proc.stderr)
    holds = []  # (step, t_done_ms, t_go_ms, the test's Pss, the hold's wait, the read)
    cost = 0.0  # the most CPU time a read of this tree took the test (s), for the messages
    try:
        end = time.monotonic() + timeout
        for go, dones, *kind in steps:
            t_go = time.time() * 1000
            if holds:
                holds[-1] = holds[-1][:2] + (t_go,) + holds[-1][3:]
            if go:
                (d / go).touch()
            while not all((d / n).exists() for n in dones):
                assert proc.poll() is None, err.text()
                assert time.monotonic() < end, f"{dones} never came"
                time.sleep(0.02)
            kind = kind[0] if kind else ""
            t_step, read = time.time(), None
            cost = max(cost, pss_mb(proc.pid)[1])
            # Held from the read the step calls for, if it calls for one: the
            # first sample after the done that waits for no such read.
            while kind.split("+")[0] in HOLD_FROM_READ:
                read = err.settled_after(t_step)
                if read:
                    break
                assert proc.poll() is None and time.monotonic() < end, (
                    f"step {dones[0]}: the read it calls for never came; {err.text()}")
                time.sleep(0.05)
            t_done = max(t_step, read[1] if read else 0) * 1000
            wait = t_done / 1000 - t_step
            files = []  # the tree's Pss_File at the hold's start and end (MB)
            before, c0 = pss_mb(proc.pid, files)
            while len([ts for ts, _ in points.poll() if ts > t_done]) < 2:
                assert proc.poll() is None and time.monotonic() < end, err.text()
                time.sleep(0.05)
            while "peak" in kind:  # the peak tag reaches the tree's Pss: a condition
                points.poll()
                if any(v >= before - bound(before) for v in points.peaks):
                    break
                assert proc.poll() is None and time.monotonic() < end, (
                    f"step {dones[0]}: no process_tree_peak of at least {before:.1f} - "
                    f"{bound(before):.1f} MB came; peaks {points.peaks}")
                time.sleep(0.05)
            after, c1 = pss_mb(proc.pid, files)
            cost = max(cost, c0, c1)
            holds.append((dones[0], t_done, None, (before, after), wait, read, files))
        holds[-1] = holds[-1][:2] + (time.time() * 1000,) + holds[-1][3:]
        (d / "g99").touch()
        proc.wait(timeout=60)
        err.thread.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cg.remove()
    assert proc.returncode == 0, err.text()
    pts = points.poll()
    if peaks is not None:
        peaks += points.peaks
    checked = []
    for k, t_done, t_go, (before, pss), wait, read, files in holds:
        # Page-cache pages the tree maps are in its Pss by 1/mappers, and a
        # process outside the tree that maps or unmaps them (another program
        # loading torch) moves that share without a fault or a resident page
        # of the tree: a move the estimate gets wrong by at most the move
        # (design.md §9).  So the bound takes the move of the tree's Pss_File
        # since the recorder's last read before the hold (the trace says it),
        # as the test read it; 0 where nothing outside moved.
        base = [r for r in err.reads() if r[1] * 1000 <= t_done and "of it file" in r[3]]
        m = re.search(r"([0-9.]+) MB of it file pages", base[-1][3]) if base else None
        moved = max(abs(f - float(m[1])) for f in files) if m else 0.0
        # a point whose sample began after the step: its predecessor's time is after "done"
        inside = [v for (t0, _), (t1, v) in zip(pts, pts[1:]) if t0 > t_done and t1 <= t_go]
        assert inside, (k, t_done, t_go, pts)
        # The tree is still, not frozen: an interpreter that just built a
        # tensor frees and trims for a while after (CI: 7 MB less Pss at the
        # end of the d0 hold than at its start).  The points were sampled
        # between the test's two reads, so each is held to the bound around
        # the span of those two, not to the last one alone.
        lo, hi = min(before, pss), max(before, pss)
        for v in inside:
            checked.append((k, v, round(before, 1), round(pss, 1)))
            assert lo - bound(lo) - moved <= v <= hi + bound(hi) + moved, (
                f"step {k}: process_memory_megabytes {v} MB, the tree's Pss {before:.1f} MB "
                f"at the hold's start and {pss:.1f} MB at its end (bound {bound(pss):.1f} MB: "
                f"max(2 %, 4 MB) + 0.1, design.md §9, plus {moved:.1f} MB its file pages' "
                f"Pss moved since the recorder's read, {files} against {m[1] if m else None}; "
                f"the hold began {wait:.2f} s after the "
                f"step's done, {'at the read ' + repr(read) if read else 'at once'}; the test's "
                f"reads of the tree cost up to {cost * 1e3:.1f} ms of CPU); every hold: "
                f"{checked}; the recorder's reads: {err.reads()}")
    return checked


@pytest.mark.timeout(150)
def test_copy_on_write_children_track_pss(tmp_path):
    """Verdict by a bound, not a seam: every point of every hold within the
    documented error of the test's own Pss; the holds after the writes
    begin when MEM_UNSHARE's read is due and the one after the exits when
    MEM_DOUBT's is, both derived from the read cost this run measured (the
    module's docstring).  The seam for the rules is tests/c/test_proc_estimate.c."""
    checked = drive(tmp_path, COW, COW_STEPS, timeout=120)
    first, last = checked[0][3], [p for k, _, _, p in checked if k == "d34"][0]
    assert last > 3 * first  # the fixture really unshared: 200 MB once, then four times


@pytest.mark.timeout(150)
def test_children_that_come_and_go_between_reads_track_pss(tmp_path):
    """Verdict by a bound: the documented error around the test's own Pss;
    the holds after the exits begin when MEM_DOUBT's read is due (derived
    from the read cost this run measured); forks and growth are held at
    once, as the design says they are exact between reads.  The forks of a
    1 GB parent are slow under load: a read they overtake is read again
    (coll_proc.c read_tree; the C seam is test_proc.c's
    test_read_overtaken_by_a_fork_or_an_exit)."""
    # A 1 GB parent forks 9 children: the read that follows costs 0.2-0.4 s
    # of CPU (10 page tables of 1 GB), so the tree is read again no sooner
    # than T/0.02 (10-20 s) after, and what follows lands between reads,
    # within the next 6 s: the points there are the estimate's (coll_proc.c
    # MEM_SET).  6 children grow by 16 MB and exit; 3 are forked, grow and
    # exit.  Before the per-process records each took the tree's
    # Pss/resident of the resident pages that came or went (a fork added 3 GB
    # to a 1 GB tree, 9 exits left 100 MB; the kernel gives the parent back
    # the pages they shared); before the records kept what the estimate
    # added, the exits left the 96 MB the first 6 grew by and the 48 MB of
    # the last 3.
    checked = drive(tmp_path, SHARE, SHARE_STEPS, timeout=120)
    held = {k: p for k, _, _, p in checked}
    assert set(held) == {"d0", "d1", "e0", "d3", "d4", "d98"}, held
    assert held["e0"] > held["d1"] + 80 and held["d4"] > held["d3"] + 40, held
    assert all(p > 900 for p in held.values()), held  # the fixture held 1 GB throughout


@pytest.mark.timeout(150)
def test_children_exiting_with_pages_only_they_shared_are_read_again(tmp_path):
    """CI's 832 MB for a 416 MB tree.  Verdict by a bound: the hold after the
    exits begins at the read MEM_DOUBT calls for, a condition on the
    recorder's traced reads (was T*3/0.1 after the step from the test's own
    read cost, before that a fixed 2.5 s); the numbers themselves are a seam
    in tests/c/test_proc_estimate.c test_ci_orphaned_pages."""
    # 6 children of a parent of 1 GB, which then frees 600 MB of it: those
    # are the children's alone, shared 6 ways, none of it private to any.
    # Their exits free it, and no file said so: an exit takes away its
    # private pages (coll_proc.c MEM_SET), and what it shared only with those
    # that exited with it is unknown until a read, which the exits' Pss −
    # private (600 MB) calls for after T/0.1 (MEM_DOUBT).  Before, it waited
    # for the 2 % spacing, T/0.02, and the series stayed at the tree's
    # resident pages (its cap: 820 MB, the 400 MB the parent shares with
    # another child twice) where Pss was 420 MB (CI: 2 DataLoader workers
    # left 7 MB on a 317 MB tree).
    checked = drive(tmp_path, ORPHAN, ORPHAN_STEPS, timeout=120)
    held = {k: p for k, _, _, p in checked}
    assert set(held) == {"d0", "d1", "d2", "d3"}, held
    assert held["d2"] > 900 and held["d3"] < 500, held  # the exits freed 600 MB


@pytest.mark.launchers
@pytest.mark.timeout(240)
def test_dataloader_workers_writing_inherited_tensor_track_pss(tmp_path):
    """CI's 324.5 MB for 317.5 at d98, a stress run's 351.8 for 362.5 at d1.
    Verdict by a bound: the holds after the writes and after the workers'
    exits begin at the reads MEM_UNSHARE and MEM_DOUBT call for, a condition
    on the recorder's traced reads (before: T*3 over the share after the
    step, T the test's own read cost, which doubled within a loaded run);
    the numbers are a seam in tests/c/test_proc_estimate.c
    test_ci_dataloader_exits.  The test process never imports torch (drive)."""
    if importlib.util.find_spec("torch") is None:  # not imported here: see test_proctree_cow.drive
        pytest.skip("torch not installed (pip install torch==2.13.0)")
    checked = drive(tmp_path, LOADER, LOADER_STEPS, timeout=200)
    first, last = checked[0][3], [p for k, _, _, p in checked if k == "d8"][0]
    assert last > first + 100  # 128 MB unshared by the workers


@pytest.mark.timeout(150)
def test_process_tree_peak_is_a_value_the_tree_had(tmp_path):
    """issue 46 item 4: the peak tag (window and end) is read as a fact, so
    it is never above the highest Pss the test read by more than the
    documented bound (the series read 867.9 MB where the tree peaked at 849,
    and the tag kept it).  Verdict by the bound; the hold after the writes
    waits for a peak tag within the bound of the tree's Pss, a condition
    (proc_estimate.c MEM_PEAK: the peak takes reads and estimates held to
    their error); the seam is test_proc_estimate.c
    test_peak_takes_what_is_held_to_its_error."""
    peaks = []
    checked = drive(tmp_path, PEAK, PEAK_STEPS, timeout=120, peaks=peaks)
    top = max(max(before, pss) for _, _, before, pss in checked)
    assert peaks, checked
    assert max(peaks) <= top + bound(top), (
        f"process_tree_peak {max(peaks)} MB, the tree's Pss at most {top:.1f} MB (bound "
        f"{bound(top):.1f} MB, max(2 %, 4 MB) + 0.1); every peak tag: {peaks}; holds: {checked}")
    assert top > 800, checked  # the fixture unshared: 524 MB, then 3 x 105 MB more
