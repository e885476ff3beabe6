# tests/vm/cases.sh — the measurement cases on a real cgroup v2 kernel, one
# boot (tests/vm/guest.py runs it as root in the guest, cwd /tmp/out).
# Each case writes /tmp/out/<case>/: what scopemeter said (probe.json or a
# JSONL file) and the kernel's own files read around it in the same guest
# (before/ and after/), with real allocations inside the cgroup; the
# comparisons are tests/py/test_vm_cgroup2.py's.
set -u
. ./lib.sh
# whether the kernel has PSI (the container's pressure series exist then)
[ -r /proc/pressure/memory ] && echo yes > $OUT/psi || echo no > $OUT/psi

# ---- Kubernetes-like container: own cgroup namespace and cgroup2 mount,
# container limit below the pod limit, half a core of cpu.max
k8s() {
  local d=$OUT/k8s pod=$CG/kubepods/pod1
  mkdir -p $d $pod/ctr
  enable kubepods; enable kubepods/pod1
  echo 300M > $pod/memory.max
  echo 200M > $pod/ctr/memory.max
  echo "50000 100000" > $pod/ctr/cpu.max
  cat > $d/inner.sh <<EOF
. $OUT/lib.sh
# what a runtime does in the container's mount namespace: its own cgroup2
# mount, whose root is the namespace's root (the same superblock cannot be
# mounted twice on one mount point: the inherited one goes first)
umount /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 1
cat /proc/self/cgroup > $d/proc_self_cgroup
grep ' /sys/fs/cgroup ' /proc/self/mountinfo > $d/mountinfo
$BIN/alloc 100 $d/ready $d/go & a=\$!
waitfile $d/ready
# a busy loop against the half core (started after the allocation, and at
# nice 19: the rest of the case shares the same half core)
nice -n 19 sh -c 'while :; do :; done' & spin=\$!
snap $d/limit_before /sys/fs/cgroup
$SM probe --json --interval 1 > $d/probe.json 2> $d/probe.err
kill \$spin
snap $d/limit_after /sys/fs/cgroup
touch $d/go; wait \$a
EOF
  sh -c "echo \$\$ > $pod/ctr/cgroup.procs; exec unshare -C -m bash $d/inner.sh"
  echo $? > $d/rc
}

# ---- Slurm-like task (Slurm's own v2 layout): the only limit is on job_12,
# above step_0/user/task_0
slurm() {
  local d=$OUT/slurm j=system.slice/slurmstepd.scope/job_12
  mkdir -p $d $CG/$j/step_0/user/task_0
  enable system.slice; enable system.slice/slurmstepd.scope; enable $j
  enable $j/step_0; enable $j/step_0/user
  echo 150M > $CG/$j/memory.max
  in_cgroup $j/step_0/user/task_0 $d 60 $j
}

# ---- systemd-like slice limit above the service
slice() {
  local d=$OUT/slice s=workload.slice
  mkdir -p $d $CG/$s/train.service
  enable $s
  echo 180M > $CG/$s/memory.max
  echo "150000 100000" > $CG/$s/cpu.max
  in_cgroup $s/train.service $d 50 $s
}

# ---- a cpuset-only limit: one of the guest's two CPUs, no quota, no memory.max
cpuset() {
  local d=$OUT/cpuset
  mkdir -p $d $CG/cpusetonly
  echo 1 > $CG/cpusetonly/cpuset.cpus
  in_cgroup cpusetonly $d 10
}

# ---- no limit at all
nolimit() {
  local d=$OUT/nolimit
  mkdir -p $d $CG/nolimit
  in_cgroup nolimit $d 10
}

# ---- memory.peak against the peak tag: an earlier, higher peak in the same
# cgroup, then a run of scopemeter with a smaller allocation
peak() {
  local d=$OUT/peak
  mkdir -p $d $CG/peak
  echo 300M > $CG/peak/memory.max
  sh -c "echo \$\$ > $CG/peak/cgroup.procs; exec $BIN/alloc 150"
  snap $d/before $CG/peak
  sh -c "echo \$\$ > $CG/peak/cgroup.procs; cd $d; exec $SM run --interval 0.3 \
         --jsonl $d/run.jsonl -- $BIN/alloc 60 $d/ready $d/go" > $d/run.err 2>&1 &
  local r=$!
  waitfile $d/ready
  snap $d/during $CG/peak
  # three samples of the held allocation: the sampled peak sees it
  waitlines $d/run.jsonl container_memory_usage_megabytes 3
  touch $d/go
  wait $r; echo $? > $d/rc
  snap $d/after $CG/peak
}

# ---- two pods: two network namespaces and two cgroups, one rank in each,
# each sending a different amount over its own loopback at the same time
pods() {
  local d=$OUT/pods rank mb
  mkdir -p $d
  for rank in 0 1; do
    mb=$((4 + 20 * rank))
    mkdir -p $CG/pod$rank
    echo $((150 + 100 * rank))M > $CG/pod$rank/memory.max
    ip netns add pod$rank
    ip netns exec pod$rank ip link set lo up
    nsenter --net=/run/netns/pod$rank cat /proc/net/dev > $d/netdev$rank.before
    # nsenter --net, not ip netns exec: that one remounts /sys for the
    # namespace, and the cgroup2 mount under it would be gone
    nsenter --net=/run/netns/pod$rank sh -c "echo \$\$ > $CG/pod$rank/cgroup.procs; cd $d; \
       RANK=$rank LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 NODE_NAME=vm-node \
       exec $SM run --all-workers --interval 0.3 --jsonl $d/rank$rank.jsonl -- \
       python3 $VM/send.py $mb $d/rank$rank.jsonl" > $d/rank$rank.err 2>&1 &
    eval "p$rank=\$!"
  done
  wait $p0; echo $? > $d/rc0
  wait $p1; echo $? > $d/rc1
  for rank in 0 1; do
    nsenter --net=/run/netns/pod$rank cat /proc/net/dev > $d/netdev$rank.after
    snap $d/cg$rank $CG/pod$rank
  done
}

for c in k8s slurm slice cpuset nolimit peak pods; do
  echo "case $c $(cut -d' ' -f1 /proc/uptime)"
  $c
done
echo "cases done $(cut -d' ' -f1 /proc/uptime)"
