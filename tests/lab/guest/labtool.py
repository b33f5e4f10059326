#!/usr/bin/env python3
"""Guest-side helpers of the railscope lab. One Python process does what would take hundreds
of `cat` calls (each exec costs about 0.1 s under TCG).

  labtool.py wait-ready PORT...     wait until every agent answers /-/ready (60 s)
  labtool.py step DIR PORT=NAME...  scrape each agent's /metrics into DIR/NAME.prom and write
                                    DIR/sysfs.json: what sysfs says right after the scrapes
  labtool.py gidx DEV               first GID index holding an IPv4 RoCE v2 GID
"""
import glob
import json
import os
import sys
import time
import urllib.request

IB = "/sys/class/infiniband"
NET = "/sys/class/net"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def read(path):
    """(text, None) or (None, errno name)."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii", "replace"), None
    except OSError as e:
        import errno

        return None, errno.errorcode.get(e.errno, str(e.errno))


def text(path):
    t, _ = read(path)
    return None if t is None else t.rstrip("\n")


def scrape(port, path="/metrics"):
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
        body = r.read().decode()
        return r.status, body, time.monotonic() - t0


def port_snapshot(dev, port):
    base = f"{IB}/{dev}/ports/{port}"
    p = {}
    for name in ("state", "phys_state", "rate", "link_layer", "cap_mask"):
        p[name] = text(f"{base}/{name}")
    gids = []
    errors = {}
    for g in sorted(glob.glob(base + "/gids/*"), key=lambda s: int(s.rsplit("/", 1)[1])):
        i = g.rsplit("/", 1)[1]
        gid = text(g)
        typ, terr = read(f"{base}/gid_attrs/types/{i}")
        ndev, nerr = read(f"{base}/gid_attrs/ndevs/{i}")
        for err in (terr, nerr):
            if err:
                errors[err] = errors.get(err, 0) + 1
        if gid != ZERO_GID:
            gids.append({
                "index": int(i),
                "gid": gid,
                "type": None if typ is None else typ.strip(),
                "type_error": terr,
                "ndev": None if ndev is None else ndev.strip(),
                "ndev_error": nerr,
            })
    p["gid_table_len"] = len(glob.glob(base + "/gids/*"))
    p["gids"] = gids
    p["gid_attr_read_errors"] = errors
    hw = {}
    for c in sorted(glob.glob(base + "/hw_counters/*")):
        hw[os.path.basename(c)] = text(c)
    p["hw_counters"] = hw
    p["has_counters_dir"] = os.path.isdir(base + "/counters")
    return p


def snapshot():
    devs = {}
    for d in sorted(os.listdir(IB)) if os.path.isdir(IB) else []:
        dd = f"{IB}/{d}"
        dev = {name: text(f"{dd}/{name}") for name in ("node_type", "node_guid", "node_desc", "fw_ver", "parent")}
        dev["device_hw_counters"] = os.path.isdir(dd + "/hw_counters")
        dev["ports"] = {p: port_snapshot(d, p) for p in sorted(os.listdir(dd + "/ports"))}
        devs[d] = dev
    nets = {}
    for n in sorted(os.listdir(NET)):
        nets[n] = {k: text(f"{NET}/{n}/{k}") for k in ("mtu", "operstate", "carrier")}
        for k in ("tx_packets", "rx_packets", "tx_bytes", "rx_bytes"):
            nets[n][k] = text(f"{NET}/{n}/statistics/{k}")
    return {"devices": devs, "netdevs": nets, "uptime": text("/proc/uptime")}


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "wait-ready":
        deadline = time.monotonic() + 60
        for port in args:
            while True:
                try:
                    if scrape(port, "/-/ready")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    print(f"agent on port {port} not ready after 60 s")
                    sys.exit(1)
                time.sleep(0.2)
    elif cmd == "step":
        out = args[0]
        os.makedirs(out, exist_ok=True)
        timings = {}
        for spec in args[1:]:
            port, name = spec.split("=", 1)
            try:
                status, body, took = scrape(port)
            except OSError as e:
                status, body, took = 0, f"# scrape failed: {e}\n", -1
            with open(f"{out}/{name}.prom", "w") as f:
                f.write(body)
            timings[name] = {"status": status, "seconds": took}
        snap = snapshot()
        snap["scrapes"] = timings
        with open(f"{out}/sysfs.json", "w") as f:
            json.dump(snap, f, indent=1, sort_keys=True)
        print("step %s: %s" % (os.path.basename(out), " ".join(
            "%s=%s/%.2fs" % (k, v["status"], v["seconds"]) for k, v in timings.items())))
    elif cmd == "gidx":
        base = f"{IB}/{args[0]}/ports/1"
        for g in sorted(glob.glob(base + "/gids/*"), key=lambda s: int(s.rsplit("/", 1)[1])):
            i = g.rsplit("/", 1)[1]
            if text(g).startswith("0000:0000:0000:0000:0000:ffff:") and text(f"{base}/gid_attrs/types/{i}") == "RoCE v2":
                print(i)
                return
        print("no IPv4 RoCE v2 GID on " + args[0])
        sys.exit(1)
    else:
        sys.exit("unknown command " + cmd)


main()
