# tests/vm/rdma.sh — the interconnect against a real kernel (tests/py/test_vm_rdma.py):
# Soft-RoCE (rdma_rxe) on a veth in the guest, real RDMA traffic between two
# processes (ibv_rc_pingpong, server and client on the one rxe device: rxe
# delivers to its own address without the netdev, rxe_net.c's loopback),
# and what the RDMA collector says (tests/tools/cg_driver rdma) against the
# kernel's own counter files read around the traffic, and the network
# collector (cg_driver network) over the same span.  Then the link taken
# down.  Not two network namespaces: this kernel's rxe opens its RoCE UDP
# socket and routes its sends in the initial namespace only
# (drivers/infiniband/sw/rxe/rxe_net.c of 6.1: rxe_setup_udp_tunnel(&init_net,
# ...)), so an rxe on a veth moved into another namespace receives nothing.
# Each step writes its result into this directory (/tmp/out); the
# pytest compares.  Runs as root in the guest, cwd /tmp/out; bin/cg_driver
# staged by the test.
set -u
exec 2>&1
say() { echo "STEP $*"; }

ip link set lo up
ip link add va type veth peer name vb
ip addr add 10.9.0.1/24 dev va
ip link set va up
ip link set vb up
uname -r > kernel
if ! rdma link add rxe0 type rxe netdev va; then
  say "rdma link add failed"; lsmod > lsmod 2>&1; exit 10
fi
rdma link show > rdma_link 2>&1
P=/sys/class/infiniband/rxe0/ports/1
ls $P > port_files
ls $P/counters > counters_files 2>&1 || echo "no counters/" > counters_files
ls $P/hw_counters > hw_files 2>&1 || echo "no hw_counters/" > hw_files
cat $P/state > state_before
# the GID of the IPv4 address (RoCE v2): ::ffff:10.9.0.1
gid=""
for i in $(seq 0 15); do
  g=$(cat $P/gids/$i 2>/dev/null) || continue
  case "$g" in *ffff:0a09:0001) gid=$i; break ;; esac
done
echo "gid index ${gid:-none}" > gid
[ -n "$gid" ] || { say "no IPv4 GID"; exit 11; }

# the network collector keeps sampling from a fifo; its first sample before the traffic
# (in the guest's tmpfs: a fifo on the 9p export would be the host's)
mkfifo /tmp/net.in
./bin/cg_driver network < /tmp/net.in > net.out &
netpid=$!
exec 3> /tmp/net.in
echo sample >&3
for i in $(seq 1 300); do grep -q '^sample ' net.out && break; sleep 0.1; done

{
  echo sample
  echo "run cat $P/hw_counters/sent_pkts $P/hw_counters/rcvd_pkts > kernel_before; cat /proc/net/dev > netdev_before; grep . $P/hw_counters/* > hw_before"
  echo "run ibv_rc_pingpong -d rxe0 -g $gid -n 200 -s 4096 > server.log 2>&1 & sleep 3; ibv_rc_pingpong -d rxe0 -g $gid -n 200 -s 4096 127.0.0.1 > client.log 2>&1; echo \$? > client.rc; wait"
  echo "run cat $P/hw_counters/sent_pkts $P/hw_counters/rcvd_pkts > kernel_after; cat /proc/net/dev > netdev_after"
  echo sample
  echo "tags start"
  echo "run ip link set va down; sleep 1; cat $P/state > state_down; grep . $P/hw_counters/* > hw_after"
  echo "tags window"
  echo "tags end"
  echo quit
} | ./bin/cg_driver rdma > rdma.out
echo sample >&3
echo quit >&3
exec 3>&-
wait $netpid
say done
