# tests/vm/lib.sh — helpers the guest scripts share (sourced, bash).
# The test stages the binaries in /tmp/out/bin (a copy of build/cli/scopemeter
# and tests/vm/alloc.c built on the host); they are copied to the guest's
# tmpfs first, so a rebuild on the host during the boot cannot change them
# under a running process (9p serves the host's file as it is now).
# OUT: the script's own results directory; the test boots the guest once
# and runs each script in its own subdirectory of the export (OUT set), a
# script booted alone writes to the export itself.
OUT=${OUT:-/tmp/out}
CG=/sys/fs/cgroup
VM=$OUT/vm
BIN=/tmp/bin
SM=$BIN/scopemeter
if [ ! -x $SM ]; then mkdir -p $BIN && cp $OUT/bin/* $BIN/; fi

# every controller for the children of $CG/$1
enable() { echo "+memory +cpu +cpuset +pids" > $CG/$1/cgroup.subtree_control; }

# the kernel's own files of cgroup dir $2 into dir $1, as they are now
# (bash builtins only: a fork and exec per file is slow under TCG, and
# slower still inside a throttled cgroup)
snap() {
  mkdir -p $1
  local f v
  for f in memory.current memory.stat memory.max memory.peak memory.events \
           memory.oom.group cpu.stat cpu.max cpuset.cpus.effective; do
    if [ -r $2/$f ]; then
      IFS= read -r -d '' v < $2/$f
      printf '%s' "$v" > $1/$f
    fi
  done
  return 0
}

# wait for a file (bounded: a guest that hangs is ended by the host's timeout)
waitfile() {
  local n=0
  while [ ! -e $1 ] && [ $n -lt 3000 ]; do sleep 0.05; n=$((n + 1)); done
}

# wait until file $1 has $3 lines containing $2
waitlines() {
  local n=0
  while [ "$(grep -c "$2" $1 2>/dev/null || true)" -lt $3 ] && [ $n -lt 3000 ]; do
    sleep 0.05; n=$((n + 1))
  done
}

# in_cgroup REL DIR MIB [LIMIT_REL]: an allocation of MIB held in $CG/REL
# while `scopemeter probe --json` runs there; the kernel's files of the
# process's own cgroup (own_*) and of the level holding the limit (limit_*)
# read before and after
in_cgroup() {
  local rel=$1 d=$2 mib=$3 lim=${4:-$1}
  rm -f $d/ready $d/go
  sh -c "echo \$\$ > $CG/$rel/cgroup.procs; exec $BIN/alloc $mib $d/ready $d/go" &
  local a=$!
  waitfile $d/ready
  snap $d/own_before $CG/$rel
  snap $d/limit_before $CG/$lim
  sh -c "echo \$\$ > $CG/$rel/cgroup.procs; cat /proc/self/cgroup > $d/proc_self_cgroup; \
         exec $SM probe --json --interval 1" > $d/probe.json 2> $d/probe.err
  echo $? > $d/rc
  snap $d/own_after $CG/$rel
  snap $d/limit_after $CG/$lim
  touch $d/go
  wait $a
}
