"""The ABI check (docs/design.md §8): a program built against 0.1's header
and one built against today's run against the same libscopemeter.so, in the
same environment, and must both succeed and print the same lines.
Usage: compare.py ABI_0_1 ABI_NOW SYSROOT"""
import subprocess
import sys


def run(exe, sysroot):
    p = subprocess.run([exe, sysroot], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"{exe} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout.splitlines()


old, new = (run(exe, sys.argv[3]) for exe in sys.argv[1:3])
if old != new:
    diff = [f"0.1: {a!r}\nnow: {b!r}" for a, b in zip(old, new) if a != b]
    sys.exit(f"outputs differ ({len(old)} / {len(new)} lines):\n" + "\n".join(diff[:20]))
print(f"{len(old)} lines the same through 0.1's layouts and today's")
