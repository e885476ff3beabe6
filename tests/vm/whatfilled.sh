# tests/vm/whatfilled.sh — what filled the pod (docs/design.md §9) on a real
# cgroup v2 kernel, one boot (tests/vm/guest.py runs it as root in the guest,
# cwd /tmp/out).  Each case writes /tmp/out/<case>/: what scopemeter said and
# the kernel's own files read around it; tests/py/test_vm_cgroup2.py compares.
# The boot has a virtio disk (/dev/vda, ext4 made by the host: guest.disk())
# for the disk I/O case.
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

# the cgroup's io.stat into file $1, as it is now (a builtin read, no fork)
snap_io() {
  local v=""
  IFS= read -r -d '' v < $2/io.stat
  printf '%s' "$v" > $1
  return 0
}

# ---- disk I/O (docs/series.md "Disk I/O"): the guest's virtio disk (ext4,
# made by the host), a cgroup with a memory limit and the io controller;
# tests/vm/diskjob.py under `scopemeter run` writes 200 MiB with fsync,
# reads 100 MiB with O_DIRECT, writes 100 MiB that `sync` from the root
# cgroup writes back.  After each phase the cgroup's io.stat is read while
# the job waits, and the script waits for two more windows of the JSONL: the
# second of them was sampled after the reading.
disk() {
  local d=$OUT/disk c=$CG/disk ph n r
  mkdir -p $d /tmp/disk
  cat /proc/partitions > $d/partitions
  mount -t ext4 /dev/vda /tmp/disk || { echo "no ext4 on /dev/vda" > $d/err; return 0; }
  cat /sys/block/vda/dev > $d/dev
  echo "+io" > $CG/cgroup.subtree_control
  mkdir -p $c
  echo 300M > $c/memory.max
  cat $c/cgroup.controllers > $d/controllers
  snap_io $d/start.io $c
  sh -c "echo \$\$ > $c/cgroup.procs; cd $d; exec $SM run --interval 0.3 \
         --jsonl $d/run.jsonl -- python3 $VM/diskjob.py $d /tmp/disk" > $d/run.err 2>&1 &
  r=$!
  for ph in write read nosync; do
    waitfile $d/$ph.done
    # the root cgroup's sync: on v2 the pages are written back for the
    # cgroup that dirtied them, whoever starts the writeback
    if [ $ph = nosync ]; then snap_io $d/presync.io $c; sync; fi
    snap_io $d/$ph.io $c
    n=$(grep -c container_disk_write_megabytes $d/run.jsonl || true)
    echo $n > $d/$ph.lines
    waitlines $d/run.jsonl container_disk_write_megabytes $((n + 2))
    touch $d/$ph.go
  done
  wait $r; echo $? > $d/rc
  snap_io $d/end.io $c
  umount /tmp/disk
}

# ---- the recorder killed with its job (docs/design.md §9, "Tags that
# survive an OOM kill"): scopemeter run and CMD in one cgroup with
# memory.oom.group=1, as the Python front is in the training process.
# CMD holds 48 MiB, with scopemeter's own few MiB a little over memory.high
# (48M; far over, the kernel's throttling makes the allocation take half a
# minute under TCG), until the JSONL has the memory_at_peak and
# memory_events window tags with the high events, then memory.high is lifted
# and CMD allocates 400 MiB against memory.max (150M): the kernel kills
# every process of the cgroup, scopemeter included; what the JSONL had
# before is what a dead front leaves.
oomgroup() {
  local d=$OUT/oomgroup c=$CG/oomgroup n
  mkdir -p $d $c
  echo 150M > $c/memory.max
  echo 48M > $c/memory.high
  echo 1 > $c/memory.oom.group
  snap $d/before $c
  sh -c "echo \$\$ > $c/cgroup.procs; cd $d; exec $SM run --interval 0.3 \
         --jsonl $d/run.jsonl -- sh -c '$BIN/alloc 48 $d/held $d/go; exec $BIN/alloc 400'" \
    > $d/run.err 2>&1 &
  local r=$!
  waitfile $d/held
  # two more windows: the second was sampled with the 48 MiB held; and a
  # memory_events tag that counts the kernel's high events
  n=$(grep -c container_memory_usage_megabytes $d/run.jsonl || true)
  waitlines $d/run.jsonl container_memory_usage_megabytes $((n + 2))
  waitlines $d/run.jsonl 'rank0.memory_events.*high=[1-9]' 1
  cp $d/run.jsonl $d/before_kill.jsonl
  echo max > $c/memory.high
  touch $d/go
  wait $r; echo $? > $d/rc
  snap $d/after $c
  dmesg | grep -E "Killed process|oom-kill" > $d/oom_lines || true
}

for c in parts high disk oomgroup; do
  echo "case $c $(cut -d' ' -f1 /proc/uptime)"
  $c
done
echo "cases done $(cut -d' ' -f1 /proc/uptime)"
