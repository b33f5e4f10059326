#!/usr/bin/env bash
# tests/lab/lab.sh - boot a stock Debian kernel in QEMU with a real kernel RDMA stack
# (Soft-RoCE rdma_rxe and Soft-iWARP siw), run railscope inside it through the lab
# scenarios, and leave every scrape and what the guest read next to it in OUT.
#
#   tests/lab/lab.sh WORK OUT [trimmed|full]
#
# WORK  cache directory (kernel, siw and netdevsim modules, initramfs, downloaded packages); reused
#       between runs. tests/tests/lab/lab.rs uses target/lab.
# OUT   result directory, emptied first; the guest writes into it over virtio-9p.
# mode  trimmed (default): boot, create devices, one short traffic burst, scrape.
#       full: every scenario (see tests/lab/README.md) and a sysfs capture.
#
# Environment:
#   RAILSCOPE_BIN  the railscope binary to run in the guest (required). It runs on the
#                  host's /usr, shared read-only into the guest, so it must be built here.
#   LAB_KV         Debian kernel ABI to boot (default: what linux-image-amd64 depends on)
#   LAB_ACCEL      auto (default: KVM if a probe boots the kernel under it, else TCG), kvm, tcg
#   LAB_VM_TIMEOUT hard limit on the VM run in seconds (default 900)
#   LAB_BOOT_TIMEOUT seconds for the kernel to reach /init (default 180)
#
# Needs root (apt-get, depmod into WORK, building siw and netdevsim). A missing package is installed when
# running as root on Debian, and is a failure otherwise. Nothing is installed on the host
# except Debian packages; the guest kernel is extracted into WORK, never installed.
# The VM has no network device (-nodefaults -nic none); its only interfaces are lo and the
# veth pairs it creates itself.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:?usage: lab.sh WORK OUT [trimmed|full]}
OUT=${2:?usage: lab.sh WORK OUT [trimmed|full]}
MODE=${3:-trimmed}
case $MODE in trimmed | full) ;; *) echo "lab.sh: mode must be trimmed or full" >&2; exit 2 ;; esac
: "${RAILSCOPE_BIN:?RAILSCOPE_BIN must name the railscope binary}"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
mkdir -p "$WORK" "$OUT"
WORK=$(cd "$WORK" && pwd)
OUT=$(cd "$OUT" && pwd)
find "$OUT" -mindepth 1 -delete
T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
log() { echo "lab.sh [$(elapsed)s] $*" >&2; }
die() { echo "lab.sh: FAILED: $*" >&2; exit 1; }
timing() { echo "$1 $(elapsed)" >> "$OUT/host-timings.txt"; }

# ------------------------------------------------------------------ packages
UPDATED=0
apt_install() { # package...
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "install the Debian packages: $*"
    log "installing $*"
    if [ $UPDATED = 0 ]; then apt-get update -qq || die "apt-get update"; UPDATED=1; fi
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null || die "apt-get install $*"
}
need() { # command package
    command -v "$1" >/dev/null 2>&1 || apt_install "$2"
    command -v "$1" >/dev/null 2>&1 || die "$1 still missing after installing $2"
}
need qemu-system-x86_64 qemu-system-x86
need ibv_devinfo ibverbs-utils
need ib_write_bw perftest
need rdma iproute2
need devlink iproute2
need ethtool ethtool
need modprobe kmod
need depmod kmod
need cpio cpio
need gzip gzip
need xz xz-utils
need python3 python3
need setpriv util-linux
need make make
need gcc gcc
need strip binutils
need stdbuf coreutils
# The static busybox is the initramfs' only program (the dynamic one needs a libc there).
is_static() { [ -x /bin/busybox ] && case $(LC_ALL=C ldd /bin/busybox 2>&1 || true) in *"not a dynamic executable"*) true ;; *) false ;; esac; }
is_static || apt_install busybox-static
is_static || die "/bin/busybox is not static (busybox-static)"
# The verbs providers for rxe and siw (libibverbs loads them in the guest).
ls /usr/lib/*/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 && ls /usr/lib/*/libibverbs/libsiw-rdmav*.so >/dev/null 2>&1 \
    || apt_install ibverbs-providers
kernel_abi() {
    apt-cache depends linux-image-amd64 2>/dev/null \
        | awk '/Depends: linux-image-[0-9]/{sub("linux-image-","",$2); print $2; exit}'
}
kernel_version() { apt-cache show "linux-image-$1" 2>/dev/null | awk '/^Version:/{print $2; exit}'; }
KV=${LAB_KV:-$(kernel_abi || true)}
KVER=$([ -z "$KV" ] || kernel_version "$KV" || true)
if [ -z "$KVER" ] && [ "$(id -u)" = 0 ] && [ $UPDATED = 0 ]; then
    apt-get update -qq || die "apt-get update"
    UPDATED=1
    KV=${LAB_KV:-$(kernel_abi || true)}
    KVER=$([ -z "$KV" ] || kernel_version "$KV" || true)
fi
[ -n "$KV" ] || die "cannot find the kernel ABI linux-image-amd64 depends on (apt-get update, or set LAB_KV)"
KPKG=linux-image-$KV
SRCPKG=linux-source-$(echo "$KV" | cut -d. -f1,2) # the kernel source of the same series: linux-source-6.1
[ -n "$KVER" ] || die "apt does not know $KPKG"
[ -d "/usr/src/linux-headers-$KV" ] || apt_install "linux-headers-$KV"
timing T_PACKAGES
log "guest kernel $KPKG $KVER"

# ------------------------------------------------------------------ guest kernel (extracted, never installed)
KDIR=$WORK/kernel-$KV
MODDIR=$KDIR/lib/modules/$KV
if [ ! -f "$KDIR/.done" ]; then
    log "downloading and extracting $KPKG"
    mkdir -p "$WORK/debs"
    (cd "$WORK/debs" && { ls "${KPKG}_${KVER//:/%3a}_amd64.deb" >/dev/null 2>&1 || apt-get download "$KPKG=$KVER"; }) \
        || die "apt-get download $KPKG"
    rm -rf "$KDIR"
    dpkg-deb -x "$WORK/debs/${KPKG}_${KVER//:/%3a}_amd64.deb" "$KDIR" || die "dpkg-deb -x $KPKG"
    touch "$KDIR/.done"
fi
[ -f "$MODDIR/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" ] || die "$KPKG has no rdma_rxe.ko"

# ------------------------------------------------------------------ modules Debian does not build
# Debian builds its kernels with CONFIG_RDMA_SIW and CONFIG_NETDEVSIM unset: both are built
# out of tree from the kernel source of the same version, against its headers.
SRCDEB=$WORK/debs/${SRCPKG}_${KVER}_all.deb
build_module() { # NAME SOURCE-DIR CONFIG-SYMBOL
    local name=$1 dir=$2 config=$3 ts
    [ -f "$MODDIR/updates/$name.ko" ] && return 0
    ts=$(date +%s.%N)
    if [ ! -f "$SRCDEB" ]; then
        log "downloading $SRCPKG $KVER ($name is not built in Debian's kernel)"
        (cd "$WORK/debs" && apt-get download "$SRCPKG=$KVER") || die "apt-get download $SRCPKG=$KVER"
    fi
    rm -rf "$WORK/$name-src" && mkdir -p "$WORK/$name-src"
    dpkg-deb --fsys-tarfile "$SRCDEB" | tar -x -C "$WORK/$name-src" "./usr/src/$SRCPKG.tar.xz"
    tar -xJf "$WORK/$name-src/usr/src/$SRCPKG.tar.xz" -C "$WORK/$name-src" --wildcards "$SRCPKG/$dir/*"
    rm -f "$WORK/$name-src/usr/src/$SRCPKG.tar.xz"
    rm -rf "$WORK/$name-build" && cp -r "$WORK/$name-src/$SRCPKG/$dir" "$WORK/$name-build"
    make -s -C "/usr/src/linux-headers-$KV" M="$WORK/$name-build" "$config=m" modules 2>&1 \
        | grep -v 'Skipping BTF' >&2 || true
    [ -f "$WORK/$name-build/$name.ko" ] || die "building $name.ko failed"
    mkdir -p "$MODDIR/updates"
    strip --strip-debug -o "$MODDIR/updates/$name.ko" "$WORK/$name-build/$name.ko"
    echo "T_${name^^}_BUILD $(awk -v a="$ts" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')" >> "$OUT/host-timings.txt"
}
# siw: Soft-iWARP. netdevsim: a simulated NIC with devlink health reporters and FEC settings.
build_module siw drivers/infiniband/sw/siw CONFIG_RDMA_SIW
build_module netdevsim drivers/net/netdevsim CONFIG_NETDEVSIM
depmod -b "$KDIR" "$KV"

# ------------------------------------------------------------------ initramfs: static busybox + the virtio/9p modules
IR=$WORK/initramfs
rm -rf "$IR"
mkdir -p "$IR"/{bb,mods,proc,sys,dev,usr,etc,kernel,lab,out,tmp,run,root,var/tmp}
cp /bin/busybox "$IR/bb/busybox"
for l in bin:usr/bin sbin:usr/sbin lib:usr/lib lib64:usr/lib64; do ln -s "${l#*:}" "$IR/${l%%:*}"; done
ln -s ../run "$IR/var/run"
: >"$IR/mods/order"
for ko in $(modprobe -d "$KDIR" -S "$KV" --show-depends -a virtio_pci 9pnet_virtio 9p | awk '$1=="insmod"{print $2}'); do
    n=$(basename "$ko" .ko)
    grep -qx "$n" "$IR/mods/order" && continue
    cp "$ko" "$IR/mods/$n.ko"
    echo "$n" >>"$IR/mods/order"
done
install -m 755 "$HERE/guest/init" "$IR/init"
(cd "$IR" && { find . | cpio -o -H newc --quiet; } | gzip -1) >"$WORK/initramfs.cpio.gz"
timing T_IMAGE_READY

# ------------------------------------------------------------------ the shared directory the guest reads (/lab)
SHARE=$WORK/share
rm -rf "$SHARE" && mkdir -p "$SHARE"
cp -r "$HERE/guest" "$SHARE/guest"
ln "$RAILSCOPE_BIN" "$SHARE/railscope" 2>/dev/null || cp "$RAILSCOPE_BIN" "$SHARE/railscope"
{
    echo "kernel_package $KPKG $KVER"
    echo "kernel_release $KV"
    echo "siw_source $SRCPKG $KVER, built against linux-headers-$KV"
    echo "netdevsim_source $SRCPKG $KVER, built against linux-headers-$KV"
    for p in qemu-system-x86 ibverbs-providers ibverbs-utils perftest iproute2 libibverbs1; do
        echo "package $p $(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || echo none)"
    done
} >"$OUT/versions.txt"

# ------------------------------------------------------------------ the VM
QEMU_COMMON=(-m 2048 -smp 2 -nodefaults -no-user-config -nographic -nic none -no-reboot
    -kernel "$KDIR/boot/vmlinuz-$KV" -initrd "$WORK/initramfs.cpio.gz"
    -fsdev "local,id=f_usr,path=/usr,security_model=none,readonly=on" -device virtio-9p-pci,fsdev=f_usr,mount_tag=usr
    -fsdev "local,id=f_etc,path=/etc,security_model=none,readonly=on" -device virtio-9p-pci,fsdev=f_etc,mount_tag=etc
    -fsdev "local,id=f_krn,path=$KDIR,security_model=none,readonly=on" -device virtio-9p-pci,fsdev=f_krn,mount_tag=kernel
    -fsdev "local,id=f_lab,path=$SHARE,security_model=none,readonly=on" -device virtio-9p-pci,fsdev=f_lab,mount_tag=lab
    -fsdev "local,id=f_out,path=$OUT,security_model=none" -device virtio-9p-pci,fsdev=f_out,mount_tag=out)
APPEND="console=ttyS0 panic=-1 loglevel=5 rdinit=/init"

# KVM only when it can boot this kernel: on some hosts /dev/kvm exists but cannot run a stock
# kernel (a nested PVM hypervisor aborts QEMU or hangs in the decompressor). The probe boots
# to /init with lab.probe=1 (the guest powers off at once) and is cached per kernel.
probe_kvm() {
    [ -w /dev/kvm ] || { echo "no writable /dev/kvm"; return 1; }
    local cache=$WORK/kvm-probe-$KV-$(uname -r)
    if [ -f "$cache" ]; then cat "$cache"; [ "$(head -c2 "$cache")" = ok ]; return; fi
    local con=$WORK/kvm-probe-console.log res
    rm -f "$con"
    timeout 45 qemu-system-x86_64 -enable-kvm -cpu host "${QEMU_COMMON[@]}" -serial "file:$con" \
        -append "$APPEND lab.probe=1" >"$WORK/kvm-probe-qemu.log" 2>&1 || true
    if grep -aq LAB_PROBE_OK "$con" 2>/dev/null; then res="ok: KVM booted $KV to /init"
    else res="failed: KVM did not boot $KV to /init within 45 s ($(tail -c 200 "$WORK/kvm-probe-qemu.log" | tr '\n' ' '))"; fi
    echo "$res" | tee "$cache"
    [ "${res:0:2}" = ok ]
}
ACCEL=${LAB_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
    if probe_result=$(probe_kvm); then ACCEL=kvm; else ACCEL=tcg; fi
    echo "kvm_probe $probe_result" >>"$OUT/versions.txt"
fi
timing T_KVM_PROBED
case $ACCEL in
    kvm) ACC=(-enable-kvm -cpu host) ;;
    tcg) ACC=(-accel tcg -cpu max) ;;
    *) die "LAB_ACCEL must be auto, kvm or tcg" ;;
esac
echo "accel $ACCEL" >>"$OUT/versions.txt"
log "booting $KV under $ACCEL ($MODE lab)"
timing T_QEMU_START
timeout "${LAB_VM_TIMEOUT:-900}" qemu-system-x86_64 "${ACC[@]}" "${QEMU_COMMON[@]}" \
    -serial "file:$OUT/console.log" -append "$APPEND lab.mode=$MODE" >"$OUT/qemu.log" 2>&1 &
QPID=$!
BOOTED=0
while kill -0 $QPID 2>/dev/null; do
    if [ $BOOTED = 0 ] && grep -aq T_INITRAMFS_START "$OUT/console.log" 2>/dev/null; then
        BOOTED=1
        timing T_GUEST_INIT
    fi
    if [ $BOOTED = 0 ] && awk -v a="$T0" -v b="$(date +%s.%N)" -v l="${LAB_BOOT_TIMEOUT:-180}" \
        -v s="$(awk '$1=="T_QEMU_START"{print $2}' "$OUT/host-timings.txt")" 'BEGIN{exit !(b-a-s>=l)}'; then
        kill $QPID
        wait $QPID || true
        tail -c 2000 "$OUT/console.log" >&2 || true
        die "the VM did not reach /init within ${LAB_BOOT_TIMEOUT:-180} s"
    fi
    sleep 0.5
done
set +e
wait $QPID
QRC=$?
set -e
timing T_QEMU_EXIT
echo "qemu_rc $QRC" >>"$OUT/versions.txt"
[ $QRC = 0 ] || { tail -c 3000 "$OUT/console.log" >&2; die "QEMU exited with $QRC (124: the VM ran past LAB_VM_TIMEOUT)"; }
[ -f "$OUT/DONE" ] || { tail -c 3000 "$OUT/console.log" >&2; die "the guest did not finish the lab (no DONE)"; }
if [ -f "$OUT/capture.tar" ]; then
    tar -C "$OUT" -xf "$OUT/capture.tar" && rm "$OUT/capture.tar"
fi
log "done: $(cat "$OUT/DONE")"
