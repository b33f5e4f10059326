#!/usr/bin/env python3
"""dump-sysfs.py DEST [NETDEV...]

Mirror the RDMA sysfs trees (and the given netdevs' directories) into DEST/tree and write
DEST/listing.txt.

DEST/tree holds regular files with the bytes read from sysfs (plus FILE.READ_ERROR
holding the error text for unreadable attributes) and symlinks recreated as
symlinks (never followed).  listing.txt has one line per entry:
    D <mode> <path>                           directory
    L <path> -> <target>                      symlink (not followed)
    F <mode> <path> = <content; newlines as \\n; cut at 400 chars>
    E <mode> <path> !! <errno name>: <strerror>
DEST/listing.json has the same as a list of objects.

/sys/class/<cls>/<name> are symlinks into /sys/devices/...: each is resolved
once and its device directory walked WITHOUT following the links inside it
(device, subsystem, ... lead back into /sys/class and would loop).
"""
import errno, json, os, signal, stat, sys

dest = sys.argv[1]
tree = os.path.join(dest, "tree")
os.makedirs(tree, exist_ok=True)
lines, recs = [], []
seen = set()


def record(kind, path, **kw):
    recs.append(dict(kind=kind, path=path, **kw))


def mirror(path):
    return os.path.join(tree, path.lstrip("/"))


class Stuck(Exception):
    pass


def _alarm(signum, frame):
    raise Stuck("timed out")


signal.signal(signal.SIGALRM, _alarm)


def read_attr(p):
    # sysfs attributes report st_size 4096; read until EOF (5 s watchdog per file)
    signal.alarm(5)
    try:
        fd = os.open(p, os.O_RDONLY)
        try:
            chunks = []
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks)
        finally:
            os.close(fd)
    finally:
        signal.alarm(0)


def write_file(path, data):
    # raw os.write loop: a 0-byte write (seen as a possible 9p hang) raises instead of spinning
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while data:
            n = os.write(fd, data)
            if n <= 0:
                raise OSError(errno.EIO, "short write")
            data = data[n:]
    finally:
        os.close(fd)


def walk(root):
    stack = [root]
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            st = os.lstat(p)
        except OSError as e:
            lines.append(f"E ? {p} !! {errno.errorcode.get(e.errno, e.errno)}: {e.strerror}")
            continue
        mode = stat.filemode(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            t = os.readlink(p)
            os.makedirs(os.path.dirname(mirror(p)), exist_ok=True)
            if not os.path.lexists(mirror(p)):
                os.symlink(t, mirror(p))
            lines.append(f"L {p} -> {t}")
            record("link", p, target=t)
        elif stat.S_ISDIR(st.st_mode):
            os.makedirs(mirror(p), exist_ok=True)
            lines.append(f"D {mode} {p}")
            record("dir", p, mode=mode)
            try:
                names = sorted(os.listdir(p), reverse=True)
            except OSError as e:
                lines.append(f"E {mode} {p} !! listdir {errno.errorcode.get(e.errno, e.errno)}: {e.strerror}")
                continue
            stack.extend(os.path.join(p, n) for n in names)
        else:
            try:
                data = read_attr(p)
            except (OSError, Stuck) as e:
                if isinstance(e, Stuck):
                    err = "TIMEOUT: read blocked > 5 s"
                else:
                    err = f"{errno.errorcode.get(e.errno, e.errno)}: {e.strerror}"
                write_file(mirror(p) + ".READ_ERROR", (err + "\n").encode())
                lines.append(f"E {mode} {p} !! {err}")
                record("error", p, mode=mode, error=err)
                continue
            write_file(mirror(p), data)
            txt = data.decode("utf-8", "replace").rstrip("\n")
            lines.append(f"F {mode} {p} = " + txt.replace("\n", "\\n")[:400])
            record("file", p, mode=mode, content=txt)


for cls in ("infiniband", "infiniband_verbs", "infiniband_mad", "infiniband_cm"):
    cdir = "/sys/class/" + cls
    if not os.path.isdir(cdir):
        lines.append(f"# {cdir} does not exist")
        continue
    lines.append(f"# ===== {cdir}")
    walk(cdir)
    for n in sorted(os.listdir(cdir)):
        l = os.path.join(cdir, n)
        if os.path.islink(l):
            real = os.path.realpath(l)
            lines.append(f"# ----- {l} => {real}")
            walk(real)
for n in sys.argv[2:]:
    l = "/sys/class/net/" + n
    lines.append(f"# ----- {l} => {os.path.realpath(l)}")
    os.makedirs(os.path.dirname(mirror(l)), exist_ok=True)
    if not os.path.lexists(mirror(l)):
        os.symlink(os.readlink(l), mirror(l))
    lines.append(f"L {l} -> {os.readlink(l)}")
    record("link", l, target=os.readlink(l))
    walk(os.path.realpath(l))
for m in ("rdma_rxe", "siw", "ib_core", "ib_uverbs", "rdma_cm", "ib_umad"):
    d = f"/sys/module/{m}/parameters"
    if os.path.isdir(d):
        lines.append(f"# ===== {d}")
        walk(d)

with open(os.path.join(dest, "listing.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
with open(os.path.join(dest, "listing.json"), "w") as f:
    json.dump(recs, f, indent=1)
nf = sum(1 for r in recs if r["kind"] == "file")
ne = sum(1 for r in recs if r["kind"] == "error")
nl = sum(1 for r in recs if r["kind"] == "link")
print(f"dump-sysfs: {nf} files read, {ne} unreadable, {nl} symlinks -> {dest}")
