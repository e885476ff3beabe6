"""_late.py — when a call of enable_system_metrics() is late (docs/design.md §8).

Why this file exists: the recorder (_session.py) warns of a late call and the
report (_report/verdicts.py) says "recording started late" by the same
graces; both import them from here, so the report never imports the
recorder (its logging handler, its fork and signal hooks).  Nothing but
constants may live here: it is imported by both sides.

A call is late only when it comes after work the run should have recorded.
In the process that opened the run, that is anything past one window or
OWN_RUN_GRACE_S after the run's start: a second of delay loses nothing worth
a warning.  A worker attaching to a run opened earlier (a launcher's, rank
0's) first imports its framework and joins the rendezvous
(init_process_group): ATTACH_GRACE_S after its own start.
"""
OWN_RUN_GRACE_S = 10.0
ATTACH_GRACE_S = 60.0
