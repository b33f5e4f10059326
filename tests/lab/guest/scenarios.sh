#!/bin/bash
# The lab scenarios, run as PID 1 in the VM by the initramfs /init once the 9p shares are
# mounted: /usr and /etc are the host's (read-only), /kernel the guest kernel's modules,
# /lab this directory and the railscope binary (read-only), /out the result directory.
# The VM has no network device: every address below lives on veth pairs inside the VM.
#
# Every step scrapes each running agent and records what sysfs, `rdma` and `ibv_devinfo`
# say at the same moment (out/steps/NN-name/); tests/tests/lab/lab.rs asserts on them.
#   agent "root"   (port 9477): defaults: hw counters over RDMA netlink, MTU from verbs
#   agent "derive" (port 9478): verbs disabled: active MTU derived from the netdev MTU
#   agent "sysfs"  (port 9479): hw counters from sysfs, verbs disabled (as on a fixture tree)
#   agent "nobody" (port 9480, full lab only): defaults, run as uid/gid 65534
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LC_ALL=C
OUT=/out
MODE=$(sed -n 's/.*lab\.mode=\([a-z]*\).*/\1/p' /proc/cmdline)
mkdir -p /root $OUT/steps $OUT/info $OUT/traffic
exec > >(tee -a $OUT/guest.log) 2>&1
T() { cut -d' ' -f1 /proc/uptime; }
mark() { echo "$1 $(T)" >>$OUT/timings.txt; echo "== $1 $(T)"; }
fatal() { echo "LAB_FATAL: $*" | tee -a $OUT/FATAL; exit 1; }
finish() {
    mark T_SCRIPT_END
    for p in ${AGENT_PIDS:-}; do kill "$p" 2>/dev/null; done
    sync
    echo o >/proc/sysrq-trigger
    sleep 30
}
trap finish EXIT
mark T_SCRIPT_START
echo "mode=$MODE kernel=$(uname -r) cpus=$(nproc)"

# ---------------------------------------------------------------- modules
# The kernel's own request_module() (the crc32 crypto module rdma_rxe asks for, crc32c for
# siw) runs kernel.modprobe, which would look in the absent /lib/modules: use a wrapper.
printf '#!/bin/sh\nexec /usr/sbin/modprobe -d /kernel "$@"\n' >/run/modprobe
chmod 755 /run/modprobe
echo /run/modprobe >/proc/sys/kernel/modprobe
for m in rdma_rxe siw veth rdma_ucm ib_umad netdevsim; do
    modprobe -d /kernel $m || fatal "modprobe $m"
done
mark T_MODULES_LOADED

# ---------------------------------------------------------------- netdevs and RDMA devices
ip link set lo up
ip link add veth0 type veth peer name veth1 || fatal "veth0/veth1"
ip link add veth2 type veth peer name veth3 || fatal "veth2/veth3"
ip addr add 10.77.0.1/32 dev veth0
ip addr add 10.77.0.2/32 dev veth1
ip addr add 10.77.1.1/32 dev veth2
ip addr add 10.77.1.2/32 dev veth3
for i in veth0 veth1 veth2 veth3; do ip link set $i up; done
rdma link add rxe0 type rxe netdev veth0 || fatal "rdma link add rxe0"
rdma link add rxe1 type rxe netdev veth1 || fatal "rdma link add rxe1"
rdma link add siw0 type siw netdev veth2 || fatal "rdma link add siw0"
rdma link add siw1 type siw netdev veth3 || fatal "rdma link add siw1"
# Both rxe addresses are local, so without this the packets would go through lo, where no
# rxe device listens: send each side's traffic out of its own veth.
for k in all default veth0 veth1; do
    sysctl -qw net.ipv4.conf.$k.accept_local=1 net.ipv4.conf.$k.rp_filter=0 net.ipv4.conf.$k.arp_ignore=1
done
ip route add 10.77.0.2/32 dev veth0 src 10.77.0.1 table 100
ip route add 10.77.0.1/32 dev veth1 src 10.77.0.2 table 101
ip rule add pref 10 oif veth0 lookup 100
ip rule add pref 11 oif veth1 lookup 101
ip rule add pref 100 lookup local
ip rule del pref 0 lookup local
mark T_DEVICES_UP
rdma link show

# ---------------------------------------------------------------- netdevsim: devlink health and FEC
# A netdevsim device (drivers/net/netdevsim) with one port: its devlink instance has the
# health reporters "empty" and "dummy" (health.c), broken through debugfs; its netdev has
# FEC settings (ethtool.c: get/set_fecparam, get_err makes FEC_GET fail) and no module
# EEPROM. Without udev the netdev keeps the kernel's name (eth0).
mount -t debugfs none /sys/kernel/debug || fatal "mount debugfs"
echo "10 1" >/sys/bus/netdevsim/new_device || fatal "netdevsim new_device"
NSIM_DBG=/sys/kernel/debug/netdevsim/netdevsim10
NSIM=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
    NSIM=$(ls /sys/bus/netdevsim/devices/netdevsim10/net/ 2>/dev/null | head -1)
    [ -n "$NSIM" ] && break
    sleep 0.2
done
[ -n "$NSIM" ] || fatal "netdevsim10 has no netdev"
ip link set "$NSIM" up || fatal "ip link set $NSIM up"
ethtool --set-fec "$NSIM" encoding rs || fatal "ethtool --set-fec $NSIM encoding rs"
echo "$NSIM" >$OUT/info/netdevsim-netdev
nsim_info() { # NAME: what ethtool and devlink say about the netdevsim device now
    {
        echo "\$ ethtool $NSIM"; ethtool "$NSIM"; echo "[rc=$?]"
        echo "\$ ethtool --show-fec $NSIM"; ethtool --show-fec "$NSIM"; echo "[rc=$?]"
        echo "\$ ethtool -m $NSIM"; ethtool -m "$NSIM"; echo "[rc=$?]"
        echo "\$ devlink -j health show"; devlink -j health show; echo "[rc=$?]"
        echo "\$ devlink -j dev info"; devlink -j dev info; echo "[rc=$?]"
    } >$OUT/info/netdevsim-$1.txt 2>&1
    devlink -j health show >$OUT/info/netdevsim-$1-health.json 2>/dev/null
}
nsim_info created
LT="timeout 120 python3 /lab/guest/labtool.py"
G0=$($LT gidx rxe0) || fatal "$G0"
G1=$($LT gidx rxe1) || fatal "$G1"
echo "IPv4 RoCE v2 GID index: rxe0=$G0 rxe1=$G1"
{
    echo "\$ rdma -j -d link show"; rdma -j -d link show; echo "[rc=$?]"
    echo "\$ rdma -j -d dev show"; rdma -j -d dev show; echo "[rc=$?]"
    echo "\$ rdma statistic show"; rdma statistic show; echo "[rc=$?]"
    echo "\$ ibv_devinfo -v"; ibv_devinfo -v; echo "[rc=$?]"
    echo "\$ ls -l /dev/infiniband"; ls -l /dev/infiniband
} >$OUT/info/devices.txt 2>&1

# ---------------------------------------------------------------- agents
AGENT_PIDS=""
# One copy in the guest's memory: four agents paging a debug binary in over 9p are slow.
cp /lab/railscope /run/railscope || fatal "copying railscope"
chmod 755 /run/railscope
mark T_BINARY_COPIED
AGENTS="9477=root 9478=derive 9479=sysfs"
start_agent() { # NAME PORT [prefix...] -- [args...]
    local name=$1 port=$2
    shift 2
    local prefix=()
    while [ "$1" != -- ]; do prefix+=("$1"); shift; done
    shift
    # Generous scrape deadline: under TCG a collection takes seconds.
    "${prefix[@]}" /run/railscope --web.listen-address 127.0.0.1:$port --scrape.timeout-max 60s --web.request-timeout 90s \
        --collector.netdev.device-include '^veth' --collector.ethtool.device-include '^veth' \
        "$@" >$OUT/agent-$name.stdout 2>$OUT/agent-$name.log &
    AGENT_PIDS="$AGENT_PIDS $!"
    echo "$!" >$OUT/agent-$name.pid
}
start_agent root 9477 --
start_agent derive 9478 -- --collector.infiniband.verbs-library ''
start_agent sysfs 9479 -- --collector.infiniband.verbs-library '' --collector.infiniband.hw-counters-source sysfs
if [ "$MODE" = full ]; then
    start_agent nobody 9480 setpriv --reuid=65534 --regid=65534 --clear-groups --
    AGENTS="$AGENTS 9480=nobody"
fi
PORTS=""
for spec in $AGENTS; do PORTS="$PORTS ${spec%%=*}"; done
$LT wait-ready $PORTS || fatal "agents not ready"
mark T_AGENTS_READY

N=0
step() { # NAME: scrape every agent and record sysfs, rdma and verbs views
    local dir
    N=$((N + 1))
    dir=$OUT/steps/$(printf %02d $N)-$1
    $LT step "$dir" $AGENTS || fatal "step $1"
    rdma -j statistic show >$dir/rdma-statistic.json 2>$dir/rdma-statistic.stderr
    echo $? >$dir/rdma-statistic.rc
    rdma -j link show >$dir/rdma-link.json 2>&1
    ibv_devinfo >$dir/ibv_devinfo.txt 2>&1
    echo "$dir" >>$OUT/steps.txt
    mark "T_STEP_$1"
}

step idle

# ---------------------------------------------------------------- traffic rxe1 -> rxe0 over the veth pair
ITERS=${ITERS:-300}
BW="ib_write_bw -F --report_gbits -n $ITERS -s 65536 -p 18515"
timeout 120 stdbuf -oL -eL $BW -d rxe0 -x $G0 >$OUT/traffic/server.txt 2>&1 &
SPID=$!
sleep 3
timeout 120 stdbuf -oL -eL $BW -d rxe1 -x $G1 127.0.0.1 >$OUT/traffic/client.txt 2>&1
echo $? >$OUT/traffic/client.rc
wait $SPID
echo $? >$OUT/traffic/server.rc
echo "ib_write_bw: client rc=$(cat $OUT/traffic/client.rc) server rc=$(cat $OUT/traffic/server.rc)"
tail -3 $OUT/traffic/client.txt
echo "$ITERS 65536" >$OUT/traffic/params
mark T_TRAFFIC_DONE
step traffic

# ---------------------------------------------------------------- netdevsim: a reporter in error, FEC_GET failing
# fail_recover makes the dummy reporter's recovery fail, so the report leaves it in error
# (devlink_health_report() returns the recovery's error: the write fails, as expected).
echo 1 >$NSIM_DBG/health/fail_recover || fatal "fail_recover"
echo "railscope lab: dummy reporter broken" >$NSIM_DBG/health/break_health 2>/dev/null
echo 5 >$NSIM_DBG/ports/0/ethtool/get_err || fatal "ethtool get_err"
nsim_info broken
step health-broken
echo 0 >$NSIM_DBG/ports/0/ethtool/get_err || fatal "ethtool get_err 0"
echo 0 >$NSIM_DBG/health/fail_recover || fatal "fail_recover 0"
devlink health recover netdevsim/netdevsim10 reporter dummy || fatal "devlink health recover"
nsim_info recovered
step health-recovered

# ---------------------------------------------------------------- railscope doctor on the live devices
# At the veths' MTU of 1500 rxe's active MTU is 1024 (a finding); at 4200 it is 4096 (none).
doctor() { # NAME
    /run/railscope doctor --output json --scrape.timeout-max 60s \
        --collector.netdev.device-include '^veth' --collector.ethtool.device-include '^veth' \
        >$OUT/doctor-$1.json 2>$OUT/doctor-$1.stderr
    echo $? >$OUT/doctor-$1.rc
    /run/railscope doctor --color never --scrape.timeout-max 60s \
        --collector.netdev.device-include '^veth' --collector.ethtool.device-include '^veth' \
        >$OUT/doctor-$1.txt 2>&1
    mark "T_DOCTOR_$1"
}
doctor mtu-1500
for i in veth0 veth1 veth2 veth3; do ip link set $i mtu 4200; done
doctor mtu-4200
for i in veth0 veth1 veth2 veth3; do ip link set $i mtu 1500; done

if [ "$MODE" = full ]; then
    # ------------------------------------------------------------ capture (tests/fixtures/softroce-live)
    # Written to the guest's memory first: thousands of small writes over 9p are slow.
    timeout 300 python3 /lab/guest/dump-sysfs.py /tmp/capture veth0 veth1 veth2 veth3 || fatal "sysfs capture"
    {
        uname -a
        echo "\$ rdma link show"; rdma link show
        echo "\$ ibv_devinfo"; ibv_devinfo
        echo "\$ ip -br link"; ip -br link
    } >/tmp/capture/commands.txt 2>&1
    tar -C /tmp -cf $OUT/capture.tar capture || fatal "tar capture"
    mark T_CAPTURED

    # ------------------------------------------------------------ netdev MTU sweep
    # 4150: rxe (4150 - 80 headers -> 2048) and siw (4150 -> 4096) disagree.
    for mtu in 1500 4150 4200 9000; do
        for i in veth0 veth1 veth2 veth3; do ip link set $i mtu $mtu || fatal "mtu $mtu on $i"; done
        step mtu-$mtu
    done
    for i in veth0 veth1 veth2 veth3; do ip link set $i mtu 1500; done

    # ------------------------------------------------------------ a veth set down (veth0 loses carrier)
    ip link set veth1 down
    sleep 1
    step veth1-down
    ip link set veth1 up
    sleep 2
    step veth1-up

    # ------------------------------------------------------------ an RDMA device deleted between scrapes
    rdma link delete rxe1 || fatal "rdma link delete rxe1"
    step rxe1-deleted
    step after-delete
fi

for spec in $AGENTS; do
    name=${spec#*=}
    pid=$(cat $OUT/agent-$name.pid)
    if kill -0 "$pid" 2>/dev/null; then echo "agent $name alive" >>$OUT/agents-alive.txt; fi
done
dmesg >$OUT/info/dmesg.txt
mark T_LAB_DONE
echo "$MODE lab finished at $(T) s guest uptime" >$OUT/DONE
