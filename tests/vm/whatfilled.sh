# tests/vm/whatfilled.sh — what filled the pod (docs/design.md §9) on a real
# cgroup v2 kernel, one boot (tests/vm/guest.py runs it as root in the guest,
# cwd /tmp/out).  Each case writes /tmp/out/<case>/: what scopemeter said and
# the kernel's own files read around it; tests/py/test_vm_cgroup2.py compares.
set -u
. ./lib.sh

# the kernel's files plus the PSI ones (snap leaves them out)
snap_psi() {
  snap $1 $2
  local f v
  for f in memory.pressure cpu.pressure; do
    if [ -r $2/$f ]; then
      IFS= read -r -d '' v < $2/$f
      printf '%s' "$v" > $1/$f
    fi
  done
  return 0
}

cat /proc/cmdline > $OUT/cmdline
[ -r /proc/pressure/memory ] && echo yes > $OUT/psi || echo no > $OUT/psi

# ---- the parts: 100 MB written to a tmpfs and 60 MiB of anonymous memory held
# in a cgroup with a memory and a CPU limit; probe runs there
parts() {
  local d=$OUT/parts c=$CG/fill
  mkdir -p $d $c /tmp/fillshm
  echo 400M > $c/memory.max
  echo "50000 100000" > $c/cpu.max
  mount -t tmpfs tmpfs /tmp/fillshm
  # shmem is charged to the cgroup of the task that writes the page
  sh -c "echo \$\$ > $c/cgroup.procs; exec dd if=/dev/zero of=/tmp/fillshm/data bs=1M \
         count=100 status=none"
  sh -c "echo \$\$ > $c/cgroup.procs; exec $BIN/alloc 60 $d/ready $d/go" &
  local a=$!
  waitfile $d/ready
  snap_psi $d/before $c
  sh -c "echo \$\$ > $c/cgroup.procs; exec $SM probe --json --interval 1" \
    > $d/probe.json 2> $d/probe.err
  echo $? > $d/rc
  snap_psi $d/after $c
  touch $d/go; wait $a
  rm -f /tmp/fillshm/data; umount /tmp/fillshm
}

# ---- pressure: memory.high below what the job holds (reclaim and throttling:
# memory stall, memory.events high) and two busy loops on one CPU (CPU stall),
# recorded by `scopemeter run` into a JSONL file
high() {
  local d=$OUT/high c=$CG/high
  mkdir -p $d $c
  echo 300M > $c/memory.max
  echo 40M > $c/memory.high
  echo 1 > $c/cpuset.cpus
  snap_psi $d/before $c
  sh -c "echo \$\$ > $c/cgroup.procs; cd $d; exec $SM run --interval 0.3 \
         --jsonl $d/run.jsonl -- sh -c 'sh -c \"while :; do :; done\" & s1=\$!; \
         sh -c \"while :; do :; done\" & s2=\$!; timeout 120 $BIN/alloc 48; sleep 1; \
         kill \$s1 \$s2'" > $d/run.err 2>&1
  echo $? > $d/rc
  snap_psi $d/after $c
}

for c in parts high; do
  echo "case $c $(cut -d' ' -f1 /proc/uptime)"
  $c
done
echo "cases done $(cut -d' ' -f1 /proc/uptime)"
