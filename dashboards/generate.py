#!/usr/bin/env python3
"""Writes railscope's Grafana dashboards: railscope-node.json and railscope-fleet.json.

The JSON files are generated: edit this script, then run

    python3 dashboards/generate.py          # rewrite both files
    python3 dashboards/generate.py --check  # fail when a file differs from what it would write

Queries follow three rules (tests/tests/dashboards.rs checks them):
  * every selector of an exported series carries job=~"$job" and instance=~"$instance";
  * port, GPU and NIC series are narrowed to the chosen rails with
    `unless on (instance, device, port) railscope_rail_info{..., rail!~"$rail"}`, which keeps
    ports that have no rail at all (front-end and storage NICs) and drops those of other rails;
  * only fleet-wide peer values (the recording rules `*:max_by_*`) are not narrowed by node.
"""

import json
import sys
from pathlib import Path

DS = {"type": "prometheus", "uid": "${datasource}"}
S = 'job=~"$job", instance=~"$instance"'

# Alert levels drawn on the panels, the values of alerts/railscope.rules.yml (a test checks
# them against the rules).
PFC_STORM_FRACTION = 0.2  # RailscopePFCPauseStorm
RAIL_NE = 'rail!~"$rail"'
RAIL_EQ = 'rail=~"$rail"'
GPU_RAIL_NE = 'gpu!="", rail!~"$rail"'
NIC_GPU = 'role=~"nic|gpu"'
LOST = 'state="lost"'
NOT_OK = 'state!="ok"'


def sel(metric, extra=""):
    """A selector of an exported series, narrowed by job and instance."""
    return f"{metric}{{{S}{', ' + extra if extra else ''}}}"


def rate(metric, extra="", fn="rate", rng="$__rate_interval"):
    return f"{fn}({sel(metric, extra)}[{rng}])"


def rail_port(expr):
    """Drops ports of rails other than $rail (ports without a rail stay)."""
    return f"({expr}) unless on (instance, device, port) {sel('railscope_rail_info', RAIL_NE)}"


def rail_device(expr):
    return f"({expr}) unless on (instance, device) {sel('railscope_rail_info', RAIL_NE)}"


def rail_gpu(expr):
    return f"({expr}) unless on (instance, gpu) {sel('railscope_rail_info', GPU_RAIL_NE)}"


def rail_pci(expr):
    """NIC PCI functions of other rails dropped (GPUs and bridges stay)."""
    return f"({expr}) unless on (instance, pci_address) {sel('railscope_rail_info', RAIL_NE)}"


def with_rail(expr):
    """Adds the rail label to a port series (ports without a rail are dropped)."""
    return f"{expr} * on (instance, device, port) group_left (rail) {sel('railscope_rail_info', RAIL_EQ)}"


def t(expr, legend="", instant=False, fmt=None):
    target = {"datasource": DS, "expr": " ".join(expr.split()), "legendFormat": legend}
    if instant:
        target.update({"instant": True, "range": False, "format": fmt or "table"})
    else:
        target.update({"instant": False, "range": True, "format": fmt or "time_series"})
    return target


class Dash:
    def __init__(self):
        self.panels = []
        self.next_id = 1
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.row = None

    def _place(self, w, h):
        if self.x + w > 24:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def new_row(self, title, collapsed=False):
        if self.x:
            self.y += self.row_h
        self.x = 0
        self.row_h = 0
        row = {
            "id": self.next_id,
            "type": "row",
            "title": title,
            "collapsed": collapsed,
            "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1},
            "panels": [],
        }
        self.next_id += 1
        self.y += 1
        self.panels.append(row)
        self.row = row

    def add(self, ptype, title, targets, w=12, h=8, unit=None, desc="", options=None,
            defaults=None, overrides=None, transformations=None, refs=True):
        for i, target in enumerate(targets):
            target["refId"] = chr(ord("A") + i)
        fd = {"unit": unit} if unit else {}
        fd.update(defaults or {})
        panel = {
            "id": self.next_id,
            "type": ptype,
            "title": title,
            "description": desc,
            "datasource": DS,
            "gridPos": self._place(w, h),
            "fieldConfig": {"defaults": fd, "overrides": overrides or []},
            "options": options or {},
            "targets": targets,
        }
        if transformations:
            panel["transformations"] = transformations
        self.next_id += 1
        if self.row is not None and self.row["collapsed"]:
            self.row["panels"].append(panel)
        else:
            self.panels.append(panel)
        return panel

    def ts(self, title, targets, unit=None, w=12, h=8, desc="", stack=False, defaults=None,
           alert_at=None):
        """A time series panel; `alert_at` draws a dashed red line where an alert fires."""
        d = {"custom": {"fillOpacity": 10, "showPoints": "never", "lineWidth": 1}}
        if stack:
            d["custom"]["stacking"] = {"mode": "normal", "group": "A"}
        if alert_at is not None:
            d["custom"]["thresholdsStyle"] = {"mode": "dashed"}
            d["thresholds"] = {"mode": "absolute", "steps": [
                {"color": "transparent", "value": None}, {"color": "red", "value": alert_at}]}
        d.update(defaults or {})
        opts = {
            "legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"],
                       "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
        return self.add("timeseries", title, targets, w, h, unit, desc, opts, d)

    def timeline(self, title, targets, mappings, w=12, h=8, desc=""):
        d = {"mappings": [{"type": "value", "options": mappings}], "color": {"mode": "thresholds"},
             "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]}}
        opts = {"showValue": "auto", "mergeValues": True, "rowHeight": 0.9,
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False}}
        return self.add("state-timeline", title, targets, w, h, None, desc, opts, d)

    def stat(self, title, targets, unit=None, w=4, h=4, desc="", thresholds=None, mappings=None):
        d = {"color": {"mode": "thresholds"},
             "thresholds": {"mode": "absolute",
                            "steps": thresholds or [{"color": "green", "value": None}]}}
        if mappings:
            d["mappings"] = [{"type": "value", "options": mappings}]
        opts = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "background", "graphMode": "none", "textMode": "value_and_name",
                "justifyMode": "auto", "orientation": "auto"}
        return self.add("stat", title, targets, w, h, unit, desc, opts, d)

    def table(self, title, targets, unit=None, w=12, h=8, desc="", hide=("Time",), merge=None,
              matrix=None, thresholds=None, mappings=None, links=None, sort=None):
        tr = []
        if merge if merge is not None else len(targets) > 1:
            tr.append({"id": "merge", "options": {}})
        if matrix:
            tr.append({"id": "groupingToMatrix",
                       "options": {"rowField": matrix[0], "columnField": matrix[1],
                                   "valueField": "Value"}})
        excl = {name: True for name in hide + ("__name__", "job")}
        if not matrix:
            tr.append({"id": "organize", "options": {"excludeByName": excl, "renameByName": {}}})
        d = {"custom": {"align": "auto", "cellOptions": {"type": "auto"}}}
        if thresholds:
            d["color"] = {"mode": "thresholds"}
            d["thresholds"] = {"mode": "absolute", "steps": thresholds}
            d["custom"]["cellOptions"] = {"type": "color-background"}
        if mappings:
            d["mappings"] = [{"type": "value", "options": mappings}]
        if links:
            d["links"] = links
        opts = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
        if sort:
            opts["sortBy"] = [{"displayName": sort[0], "desc": sort[1]}]
        return self.add("table", title, targets, w, h, unit, desc, opts, d, transformations=tr)


GREEN = {"color": "green", "value": None}


def steps(*pairs):
    return [GREEN] + [{"color": c, "value": v} for v, c in pairs]


def red_below(v):
    return [{"color": "red", "value": None}, {"color": "green", "value": v}]


PORT_STATE = {"1": {"text": "DOWN", "color": "red"}, "2": {"text": "INIT", "color": "orange"},
              "3": {"text": "ARMED", "color": "yellow"}, "4": {"text": "ACTIVE", "color": "green"},
              "5": {"text": "ACTIVE_DEFER", "color": "yellow"}}
PHYS_STATE = {"1": {"text": "Sleep", "color": "red"}, "2": {"text": "Polling", "color": "red"},
              "3": {"text": "Disabled", "color": "red"},
              "4": {"text": "PortConfigurationTraining", "color": "orange"},
              "5": {"text": "LinkUp", "color": "green"},
              "6": {"text": "LinkErrorRecovery", "color": "orange"},
              "7": {"text": "Phy Test", "color": "purple"}}
DISTANCE = {"10": {"text": "PIX", "color": "green"}, "20": {"text": "PXB", "color": "green"},
            "30": {"text": "PHB", "color": "yellow"}, "40": {"text": "NODE", "color": "orange"},
            "50": {"text": "SYS", "color": "red"}}
UPDOWN = {"0": {"text": "no", "color": "red"}, "1": {"text": "yes", "color": "green"}}

PORT = "{{device}}/{{port}}"
NODE_PORT = "{{instance}} {{device}}/{{port}}"
HW_CNP = "np_cnp_sent|rp_cnp_handled|np_ecn_marked_roce_packets"
HW_RETRANS = ("local_ack_timeout_err|out_of_sequence|packet_seq_err|implied_nak_seq_err"
              "|rnr_nak_retry_err|duplicate_request|roce_adp_retrans|roce_adp_retrans_to"
              "|roce_slow_restart")


def variables(fleet):
    def query_var(name, label, query, multi, include_all, sort=1):
        return {
            "name": name,
            "label": label,
            "type": "query",
            "datasource": DS,
            "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery",
                      "qryType": 1},
            "refresh": 2,
            "multi": multi,
            "includeAll": include_all,
            "allValue": ".*" if include_all else None,
            "current": {},
            "options": [],
            "sort": sort,
            "regex": "",
            "hide": 0,
        }

    return {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [],
         "refresh": 1, "regex": ""},
        query_var("job", "Job", "label_values(railscope_collector_success, job)", True, False),
        query_var("instance", "Node", 'label_values(railscope_collector_success{job=~"$job"}, instance)',
                  fleet, fleet),
        query_var("rail", "Rail", 'label_values(railscope_rail_info{job=~"$job", instance=~"$instance"}, rail)',
                  True, True, sort=3),
    ]}


def dashboard(uid, title, desc, dash, fleet):
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["railscope", "gpu", "rdma"],
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {"list": [
            {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
             "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
             "name": "Annotations & Alerts", "type": "dashboard"},
            {"name": "railscope alerts", "datasource": DS, "enable": True, "hide": False,
             "iconColor": "red",
             "expr": 'ALERTS{alertname=~"Railscope.*", alertstate="firing", instance=~"$instance"}',
             "titleFormat": "{{alertname}}", "textFormat": "{{instance}} {{device}} {{port}} {{gpu}}",
             "step": "1m", "useValueForTime": False},
        ]},
        "links": [{"title": "railscope", "type": "dashboards", "tags": ["railscope"],
                   "asDropdown": False, "includeVars": True, "keepTime": True,
                   "targetBlank": False, "icon": "external link", "tooltip": "", "url": ""}],
        "templating": variables(fleet),
        "panels": dash.panels,
    }


# ---------------------------------------------------------------------------------------------
# Node dashboard


def node():
    d = Dash()
    d.new_row("Overview")
    d.stat("Ports ACTIVE", [
        t(f"sum({rail_port(sel('railscope_ib_port_state') + ' == bool 4')})", "active"),
        t(f"count({rail_port(sel('railscope_ib_port_state'))})", "ports"),
    ], desc="RDMA ports in state ACTIVE, and all RDMA ports of the node.")
    d.stat("GPUs up", [
        t(f"sum({sel('railscope_gpu_up')})", "up"),
        t(f"count({sel('railscope_gpu_up')})", "GPUs"),
    ], desc="GPUs that answered NVML in the last collection, and all GPUs.")
    d.stat("Collectors failing", [
        t(f"count({sel('railscope_collector_success')} == 0) or vector(0)", "failing")],
        thresholds=steps((1, "red")),
        desc="Collectors that did not complete within the deadline in the last collection.")
    d.stat("GPUDirect RDMA module", [
        t(sel("railscope_host_gpudirect_rdma_module_loaded"), "nvidia_peermem")],
        mappings=UPDOWN, thresholds=red_below(1),
        desc="nvidia_peermem (or nv_peer_mem) loaded: without it NCCL stages every transfer through host memory.")
    d.stat("IOMMU mode", [t(f"{sel('railscope_host_iommu_mode')} == 1", "{{mode}}")],
           mappings={"1": {"text": "current"}},
           desc="translated puts a page walk on every peer-to-peer DMA.")
    d.stat("Firing railscope alerts", [
        t('count(ALERTS{alertname=~"Railscope.*", alertstate="firing", '
          'job=~"$job", instance=~"$instance"}) or vector(0)', "alerts")],
        thresholds=steps((1, "red")))

    # RDMA ports
    d.new_row("RDMA ports")
    port_info = (
        f"{sel('railscope_ib_port_info')}"
        f" * on (instance, device, port) group_left (rail, gpu, source) {sel('railscope_rail_info', RAIL_EQ)}"
        f" * on (instance, device) group_left (hca_type, fw_ver, board_id, pci_address, numa_node) {sel('railscope_ib_device_info')}"
        f" or on (instance, device, port) ({sel('railscope_ib_port_info')}"
        f" unless on (instance, device, port) {sel('railscope_rail_info')})"
    )
    d.table("Ports: identity, state and rail", [t(port_info, instant=True)], w=24, h=8,
            hide=("Time", "Value", "instance"),
            desc="railscope_ib_port_info joined with railscope_rail_info (rail, nearest GPU, how the rail was found) "
                 "and railscope_ib_device_info. Ports without a rail (front-end, storage) are listed whatever rail is chosen.")
    d.timeline("Logical state", [t(rail_port(sel("railscope_ib_port_state")), PORT)], PORT_STATE,
               desc="4 ACTIVE is healthy; a port flapping between DOWN and ACTIVE shows as stripes.")
    d.timeline("Physical state", [t(rail_port(sel("railscope_ib_port_phys_state")), PORT)], PHYS_STATE,
               desc="5 LinkUp is healthy; Polling means no peer, LinkErrorRecovery a link retraining.")
    d.ts("Active rate", [t(rail_port("8 * " + sel("railscope_ib_port_rate_bytes_per_second")), PORT)], "bps", w=8,
         desc="Active rate of all lanes in bits per second, as ibstat prints it (Rate: 400). "
              "A port below its siblings trained down (400 Gb/s port at 200 Gb/s).")
    d.ts("Link width", [t(rail_port(sel("railscope_ib_port_link_width_lanes")), PORT)], "short", w=8,
         desc="Active lanes: 2X instead of 4X is a lost lane (cable, connector).")
    d.ts("MTU: RDMA active vs netdev", [
        t(rail_port(sel("railscope_ib_port_active_mtu_bytes")), PORT + " RDMA active"),
        t(rail_port(sel("railscope_ib_port_netdev_mtu_bytes")), PORT + " netdev"),
    ], "bytes", w=8, desc="A RoCE netdev at 1500 gives RDMA MTU 1024 while its peers run 4096. "
                           "InfiniBand ports have an active MTU only when libibverbs is installed.")
    d.ts("Port data rate", [
        t(rail_port(rate("railscope_ib_port_data_bytes_total")), PORT + " {{direction}}")], "Bps",
        desc="PMA port_rcv_data / port_xmit_data.")
    d.ts("Port utilization", [
        t(rail_port(f"{rate('railscope_ib_port_data_bytes_total')} / on (instance, device, port) group_left () "
                    f"{sel('railscope_ib_port_rate_bytes_per_second')}"), PORT + " {{direction}}")],
        "percentunit", desc="Data rate over the active rate, per direction.")
    d.ts("Packet rate", [
        t(rail_port(rate("railscope_ib_port_packets_total")), PORT + " {{direction}}")], "pps", w=8)
    d.ts("Transmit wait", [
        t(rail_port(rate("railscope_ib_port_transmit_wait_total")), PORT)], "short", w=8,
        desc="port_xmit_wait ticks per second: time with data to send and no credits (congestion downstream).")
    d.table("LIDs", [
        t(rail_port(sel("railscope_ib_port_lid")), instant=True),
        t(rail_port(sel("railscope_ib_port_sm_lid")), instant=True),
    ], w=8, hide=("Time", "instance"), desc="Value #A: base LID, Value #B: subnet manager LID (InfiniBand ports).")

    # Errors
    d.new_row("Port error counters")
    d.ts("Symbol errors", [t(rail_port(rate("railscope_ib_port_symbol_errors_total")), PORT)], "cps", w=8,
         desc="Above rate × 1e-12 per second the link exceeds the IBTA bit error rate limit.")
    d.ts("Link error recovery and link downed", [
        t(rail_port(rate("railscope_ib_port_link_error_recovery_total", fn="increase")), PORT + " recovery"),
        t(rail_port(rate("railscope_ib_port_link_downed_total", fn="increase")), PORT + " downed"),
    ], "short", w=8, desc="Increase per interval: every event retrains the link or drops it.")
    d.ts("Receive errors", [
        t(rail_port(rate("railscope_ib_port_receive_errors_total")), PORT + " rcv"),
        t(rail_port(rate("railscope_ib_port_receive_remote_physical_errors_total")), PORT + " remote physical"),
        t(rail_port(rate("railscope_ib_port_receive_switch_relay_errors_total")), PORT + " switch relay"),
    ], "cps", w=8)
    d.ts("Transmit discards and constraint errors", [
        t(rail_port(rate("railscope_ib_port_transmit_discards_total")), PORT + " xmit discards"),
        t(rail_port(rate("railscope_ib_port_transmit_constraint_errors_total")), PORT + " xmit constraint"),
        t(rail_port(rate("railscope_ib_port_receive_constraint_errors_total")), PORT + " rcv constraint"),
    ], "cps", w=8)
    d.ts("Integrity, buffer overrun, VL15", [
        t(rail_port(rate("railscope_ib_port_local_link_integrity_errors_total")), PORT + " link integrity"),
        t(rail_port(rate("railscope_ib_port_excessive_buffer_overrun_errors_total")), PORT + " buffer overrun"),
        t(rail_port(rate("railscope_ib_port_vl15_dropped_total")), PORT + " VL15 dropped"),
    ], "cps", w=8)
    d.table("Saturated PMA counters (worst first)", [
        t(f"topk(20, {rail_port(sel('railscope_ib_port_pma_saturated'))})", instant=True)],
        w=8, hide=("Time", "instance"), thresholds=steps((1, "red")), sort=("Value", True),
        desc="1: the counter is stuck at its maximum and can no longer show new errors. Reset it (perfquery -x -R).")
    d.ts("Device read errors", [t(rail_device(sel("railscope_ib_device_read_errors")), "{{device}}")],
         "short", w=12, desc="Files of the device that failed in the last collection.")
    d.table("Other PMA counters (raw)", [
        t(rail_port(sel("railscope_ib_port_pma_other_total")), instant=True)],
        w=12, hide=("Time", "instance"), desc="Any other counters/ file, raw (OFED's port_rcv_discards, say).")

    # RoCE congestion
    d.new_row("RoCE congestion")
    d.ts("PFC pause fraction", [
        t(rate("railscope_pfc_pause_duration_seconds_total"), "{{netdev}} prio {{priority}} {{direction}}")],
        "percentunit", desc="rate(railscope_pfc_pause_duration_seconds_total): the fraction of time a priority was paused. "
                            "A pause storm eats the link while every drop counter reads zero. The dashed line is "
                            "where RailscopePFCPauseStorm fires.", alert_at=PFC_STORM_FRACTION)
    d.ts("PFC pause frames", [
        t(rate("railscope_pfc_pause_frames_total"), "{{netdev}} prio {{priority}} {{direction}}")], "pps")
    d.ts("Pause storm events", [
        t(rate("railscope_pfc_pause_storm_events_total", fn="increase"), "{{netdev}} {{level}}")], "short", w=8,
        desc="The NIC detected it was stuck pausing (tx_pause_storm_*_events).")
    d.ts("CNP and ECN", [
        t(rail_port(rate("railscope_rdma_port_hw_stat_total", f'counter=~"{HW_CNP}"')), PORT + " {{counter}}")],
        "pps", w=8, desc="np_cnp_sent: CNPs this port sent as notification point (it received ECN-marked packets); "
                         "rp_cnp_handled: CNPs it reacted to as reaction point; np_ecn_marked_roce_packets.")
    d.ts("RoCE retransmissions and timeouts", [
        t(rail_port(rate("railscope_rdma_port_hw_stat_total", f'counter=~"{HW_RETRANS}"')), PORT + " {{counter}}")],
        "cps", w=8, desc="local_ack_timeout_err, out_of_sequence, packet_seq_err, implied_nak_seq_err and friends: "
                         "drops in the fabric turn into retransmissions here.")
    d.ts("Out of buffer", [
        t(rail_port(rate("railscope_rdma_port_hw_stat_total", 'counter="out_of_buffer"')), PORT)], "cps", w=8,
        desc="Packets dropped because no receive WQE was posted (slow consumer).")
    d.ts("Per-priority discards", [
        t(rate("railscope_netdev_priority_discards_total"), "{{netdev}} prio {{priority}} {{reason}}")], "pps", w=8)
    d.table("PFC enabled priorities (DCB)", [
        t(f"{sel('railscope_dcb_pfc_enabled')} == 1", instant=True)], w=8, hide=("Time", "instance", "Value"),
        desc="A RoCE priority without PFC drops instead of pausing.")
    d.table("Driver counters (raw, now)", [
        t(rail_port(sel("railscope_rdma_port_hw_stat_total")), instant=True)], w=24, h=8,
        hide=("Time", "instance"), sort=("Value", True),
        desc="Every port driver counter as the driver names it.")

    # GIDs
    d.new_row("GIDs")
    d.table("GID entries by type", [
        t(rail_port(sel("railscope_ib_port_gid_entries")), instant=True)], w=8,
        hide=("Time", "instance"),
        desc="A RoCE port with 0 RoCE v2 entries has no address NCCL can use (no IP on the netdev).")
    d.table("GID table", [t(rail_port(sel("railscope_ib_port_gid_info")), instant=True)], w=16,
            hide=("Time", "instance", "Value"))

    # Netdev
    d.new_row("Netdevs")
    d.table("Netdevs", [
        t(sel("railscope_netdev_info"), instant=True),
        t(sel("railscope_netdev_mtu_bytes"), instant=True),
        t(sel("railscope_netdev_up"), instant=True),
        t(sel("railscope_netdev_carrier"), instant=True),
    ], w=24, h=7, hide=("Time", "instance", "Value #A", "Value"),
        desc="Value #B: MTU, Value #C: operstate up, Value #D: carrier.")
    d.ts("Netdev speed", [t(sel("railscope_netdev_speed_bytes_per_second"), "{{netdev}}")], "Bps", w=8)
    d.ts("Netdev traffic", [t(rate("railscope_netdev_bytes_total"), "{{netdev}} {{direction}}")], "Bps", w=8)
    d.ts("Netdev errors and drops", [
        t(rate("railscope_netdev_errors_total"), "{{netdev}} {{direction}} errors"),
        t(rate("railscope_netdev_drops_total"), "{{netdev}} {{direction}} drops"),
    ], "pps", w=8)
    d.ts("Carrier changes", [
        t(rate("railscope_netdev_carrier_changes_total", fn="increase"), "{{netdev}}")], "short", w=8)
    d.ts("PHY: FEC corrected bits and symbol errors", [
        t(rate("railscope_netdev_phy_fec_corrected_bit_errors_total"), "{{netdev}} FEC corrected bits"),
        t(rate("railscope_netdev_phy_symbol_errors_total"), "{{netdev}} symbol errors"),
    ], "cps", w=8, desc="FEC corrections climbing are a link degrading before it drops packets.")
    d.ts("Out-of-buffer discards (netdev)", [
        t(rate("railscope_netdev_out_of_buffer_discards_total"), "{{netdev}}")], "pps", w=8)

    # PCIe
    d.new_row("PCIe")
    pci_join = (f" * on (instance, pci_address) group_left (role, rdma_device, gpu) "
                f"{sel('railscope_pci_device_info', NIC_GPU)}")
    d.table("NIC and GPU links: width and speed vs max", [
        t(rail_pci(sel("railscope_pci_link_width_lanes") + pci_join), instant=True),
        t(rail_pci(sel("railscope_pci_link_max_width_lanes") + pci_join), instant=True),
        t(rail_pci(sel("railscope_pci_link_speed_transfers_per_second") + pci_join), instant=True),
        t(rail_pci(sel("railscope_pci_link_max_speed_transfers_per_second") + pci_join), instant=True),
    ], w=12, h=9, hide=("Time", "instance"),
        desc="Value #A width, #B max width (lanes), #C speed, #D max speed (transfers/s per lane; 32e9 Gen5). "
             "GPUs lower their speed at idle: compare width, or speed under load.")
    d.ts("Width and speed over max", [
        t(rail_pci(f"{sel('railscope_pci_link_width_lanes')} / {sel('railscope_pci_link_max_width_lanes')}"
                   + pci_join), "{{role}} {{rdma_device}}{{gpu}} {{pci_address}} width"),
        t(rail_pci(f"{sel('railscope_pci_link_speed_transfers_per_second')} / "
                   f"{sel('railscope_pci_link_max_speed_transfers_per_second')}" + pci_join),
          "{{role}} {{rdma_device}}{{gpu}} {{pci_address}} speed"),
    ], "percentunit", w=12, h=9, desc="1 is the full link; below 1 trained down.")
    d.ts("AER errors", [
        t(f"sum by (instance, pci_address, severity) ({rate('railscope_pci_aer_errors_total')})"
          f" * on (instance, pci_address) group_left (role, rdma_device, gpu) {sel('railscope_pci_device_info')}",
          "{{role}} {{rdma_device}}{{gpu}} {{pci_address}} {{severity}}")], "cps", w=12,
        desc="Climbing correctable errors are a marginal link (riser, cable, slot) before it fails.")
    d.table("AER errors by type (totals, top 20)", [
        t(f"topk(20, {sel('railscope_pci_aer_errors_by_type_total')})", instant=True)], w=12,
        hide=("Time", "instance"), sort=("Value", True))
    d.table("ACS state of bridges", [t(f"{sel('railscope_pci_acs_state')} == 1", instant=True)], w=12,
            hide=("Time", "instance", "Value"),
            desc="redirect sends GPU↔NIC peer-to-peer traffic up through the root complex.")
    d.table("PCI functions", [t(sel("railscope_pci_device_info"), instant=True)], w=12,
            hide=("Time", "instance", "Value"))

    # Topology
    d.new_row("Topology and rails")
    d.table("Rails", [t(sel("railscope_rail_info", 'rail=~"$rail"'), instant=True)], w=8,
            hide=("Time", "instance", "Value"),
            desc="The rail of every RDMA port: derived (matched with a GPU), pci_order, or configured.")
    d.table("NIC ↔ GPU distance", [
        t(rail_device(sel("railscope_topology_nic_gpu_distance")), instant=True)], w=16,
        matrix=("device", "gpu"), mappings=DISTANCE,
        thresholds=steps((30, "yellow"), (40, "orange"), (50, "red")),
        desc="Rows: RDMA devices, columns: GPUs, as nvidia-smi topo -m classifies them from PCI paths.")
    d.table("Nearest GPU per NIC", [
        t(rail_device(sel("railscope_topology_nic_nearest_gpu_info")), instant=True)], w=12,
        hide=("Time", "instance", "Value"),
        desc="A NIC whose nearest GPU is NODE or SYS sends GPUDirect traffic across the CPU.")
    d.table("GPUs in PCI order", [t(rail_gpu(sel("railscope_topology_gpu_info")), instant=True)], w=12,
            hide=("Time", "instance", "Value"))

    # GPUs
    d.new_row("GPUs")
    d.table("GPUs", [
        t(rail_gpu(sel("railscope_gpu_info")), instant=True),
        t(rail_gpu(f"{sel('railscope_gpu_state')} == 1"), instant=True),
    ], w=24, h=7, hide=("Time", "instance", "Value #A", "Value #B"),
        desc="Identity and state (ok, lost: fallen off the bus, timeout: NVML hanging, error).")
    d.ts("Utilization", [t(rail_gpu(sel("railscope_gpu_utilization_ratio")), "GPU {{gpu}}")],
         "percentunit", w=8)
    d.ts("Memory activity", [t(rail_gpu(sel("railscope_gpu_memory_utilization_ratio")), "GPU {{gpu}}")],
         "percentunit", w=8)
    d.ts("Memory used", [
        t(rail_gpu(f"{sel('railscope_gpu_memory_used_bytes')} / {sel('railscope_gpu_memory_total_bytes')}"),
          "GPU {{gpu}}")], "percentunit", w=8)
    d.ts("Temperature", [t(rail_gpu(sel("railscope_gpu_temperature_celsius")), "GPU {{gpu}}")], "celsius", w=8)
    d.ts("Power vs limit", [
        t(rail_gpu(sel("railscope_gpu_power_watts")), "GPU {{gpu}}"),
        t(rail_gpu(sel("railscope_gpu_power_limit_watts")), "GPU {{gpu}} limit"),
    ], "watt", w=8)
    d.ts("Clocks over max", [
        t(rail_gpu(f"{sel('railscope_gpu_clock_hertz')} / {sel('railscope_gpu_clock_max_hertz')}"),
          "GPU {{gpu}} {{clock}}")], "percentunit", w=8)
    d.ts("GPUs throttled, by reason", [
        t(f"sum by (instance, reason) ({rail_gpu(sel('railscope_gpu_throttle_reason'))})", "{{reason}}")],
        "short", w=8, desc="Sustained thermal or power throttling slows every rank of a job.")
    d.ts("ECC errors (volatile)", [
        t(rail_gpu(rate("railscope_gpu_ecc_errors_total", 'scope="volatile"', fn="increase")),
          "GPU {{gpu}} {{type}}")], "short", w=8)
    d.ts("XID errors", [
        t(rail_gpu(rate("railscope_gpu_xid_errors_total", fn="increase")), "GPU {{gpu}} XID {{xid}}")],
        "short", w=8, desc="48 double-bit ECC, 79 fallen off the bus, 13/31/43 usually the application.")
    d.table("Memory health", [
        t(rail_gpu(sel("railscope_gpu_ecc_errors_total", 'scope="aggregate"')), instant=True),
        t(rail_gpu(sel("railscope_gpu_remapped_rows")), instant=True),
        t(rail_gpu(sel("railscope_gpu_remapped_rows_pending")), instant=True),
        t(rail_gpu(sel("railscope_gpu_remapped_rows_failure")), instant=True),
    ], w=12, hide=("Time", "instance"), merge=False,
        desc="Lifetime ECC counts, remapped rows, a remap waiting for a reset, a failed remap (service the GPU).")
    d.table("Fabric and retired pages", [
        t(rail_gpu(sel("railscope_gpu_fabric_state")), instant=True),
        t(rail_gpu(sel("railscope_gpu_fabric_status")), instant=True),
        t(rail_gpu(sel("railscope_gpu_retired_pages")), instant=True),
    ], w=12, hide=("Time", "instance"), merge=False,
        desc="NVSwitch fabric registration (3 completed, status 0 success); retired pages on pre-Ampere GPUs.")
    d.table("GPU PCIe (NVML)", [
        t(rail_gpu(sel("railscope_gpu_pcie_link_generation")), instant=True),
        t(rail_gpu(sel("railscope_gpu_pcie_link_max_generation")), instant=True),
        t(rail_gpu(sel("railscope_gpu_pcie_link_width_lanes")), instant=True),
        t(rail_gpu(sel("railscope_gpu_pcie_link_max_width_lanes")), instant=True),
    ], w=8, hide=("Time", "instance"), desc="#A generation, #B max generation, #C width, #D max width.")
    d.ts("GPU PCIe replays", [t(rail_gpu(rate("railscope_gpu_pcie_replays_total")), "GPU {{gpu}}")],
         "cps", w=8)
    d.ts("GPU PCIe throughput", [
        t(rail_gpu(sel("railscope_gpu_pcie_throughput_bytes_per_second")), "GPU {{gpu}} {{direction}}")],
        "Bps", w=8)

    # NVLink
    d.new_row("NVLink", collapsed=True)
    d.ts("Active links per GPU", [
        t(f"sum by (instance, gpu) ({rail_gpu(sel('railscope_nvlink_up'))})", "GPU {{gpu}} active"),
        t(f"count by (instance, gpu) ({rail_gpu(sel('railscope_nvlink_up'))})", "GPU {{gpu}} links"),
    ], "short", w=8, desc="An inactive link among active siblings is a fault.")
    d.table("Inactive links (worst first)", [
        t(f"bottomk(20, {rail_gpu(sel('railscope_nvlink_up'))})", instant=True)], w=8,
        hide=("Time", "instance"), thresholds=red_below(1), mappings=UPDOWN, sort=("Value", False))
    d.ts("NVLink errors by GPU", [
        t(f"sum by (instance, gpu, type) ({rail_gpu(rate('railscope_nvlink_errors_total'))})",
          "GPU {{gpu}} {{type}}")], "cps", w=8, desc="replay, recovery, crc_flit, crc_data per second.")
    d.table("NVLink error rate per link (top 20)", [
        t(f"topk(20, {rail_gpu(rate('railscope_nvlink_errors_total'))})", instant=True)], w=8,
        hide=("Time", "instance"), unit="cps", sort=("Value", True))
    d.ts("NVLink data rate per GPU", [
        t(f"sum by (instance, gpu, direction) ({rail_gpu(rate('railscope_nvlink_data_bytes_total'))})",
          "GPU {{gpu}} {{direction}}")], "Bps", w=8)
    d.ts("NVLink data rate per link", [
        t(rail_gpu(rate("railscope_nvlink_data_bytes_total")), "GPU {{gpu}} link {{link}} {{direction}}")],
        "Bps", w=8)
    d.table("NVLink remote ends and versions", [
        t(rail_gpu(sel("railscope_nvlink_remote_info")), instant=True),
        t(rail_gpu(sel("railscope_nvlink_version")), instant=True),
    ], w=24, hide=("Time", "instance", "Value #A"), desc="#B: NVLink version.")

    # Host
    d.new_row("Host: GPUDirect readiness", collapsed=True)
    d.table("Kernel modules", [t(sel("railscope_host_kernel_module_loaded"), instant=True)], w=6,
            hide=("Time", "instance"), mappings=UPDOWN)
    d.table("IOMMU", [
        t(f"{sel('railscope_host_iommu_mode')} == 1", instant=True),
        t(sel("railscope_host_iommu_info"), instant=True),
        t(sel("railscope_host_iommu_units"), instant=True),
    ], w=10, hide=("Time", "instance", "Value #A", "Value #B"), merge=False,
        desc="Mode, where it came from and the kernel's IOMMU parameters; #C IOMMU units.")
    d.table("Memlock limits", [t(sel("railscope_host_memlock_limit_bytes"), instant=True)], w=8,
            unit="bytes", hide=("Time", "instance"),
            desc="RDMA memory registration fails with ENOMEM past RLIMIT_MEMLOCK; +Inf is unlimited.")

    # Agent
    d.new_row("Agent", collapsed=True)
    d.timeline("Collector success", [t(sel("railscope_collector_success"), "{{collector}}")],
               {"0": {"text": "failed", "color": "red"}, "1": {"text": "ok", "color": "green"}})
    d.ts("Collector duration", [t(sel("railscope_collector_duration_seconds"), "{{collector}}")], "s")
    d.ts("Collector errors", [
        t(rate("railscope_collector_errors_total"), "{{collector}} errors/s"),
        t(sel("railscope_collector_last_errors"), "{{collector}} in last collection"),
    ], "short", w=8)
    d.ts("Scrapes vs collections", [
        t(rate("railscope_scrape_requests_total"), "scrapes"),
        t(rate("railscope_collections_total"), "collections"),
    ], "reqps", w=8, desc="Scrapes arriving while a collection runs share it.")
    d.ts("Scrape duration and up", [
        t(sel("scrape_duration_seconds"), "scrape duration"),
        t(sel("up"), "up"),
    ], "s", w=8)
    d.ts("Process memory", [
        t(sel("process_resident_memory_bytes"), "resident"),
    ], "bytes", w=8)
    d.ts("Process CPU", [t(rate("process_cpu_seconds_total"), "CPU")], "percentunit", w=8)
    d.table("Build", [t(sel("railscope_build_info"), instant=True)], w=8, hide=("Time", "instance", "Value"))

    return dashboard("railscope-node", "railscope / node",
                     "One node's RDMA ports, errors, RoCE congestion, GIDs, netdevs, PCIe, topology, "
                     "GPUs, NVLink, GPUDirect readiness and the railscope agent.", d, fleet=False)


# ---------------------------------------------------------------------------------------------
# Fleet dashboard

NODE_LINK = [{"title": "Open the node dashboard",
              "url": "/d/railscope-node/railscope-node?${__url_time_range}&${datasource:queryparam}"
                     "&${job:queryparam}&var-instance=${__data.fields.instance}"}]


def per_rail(expr):
    """Sums a port expression per rail across the chosen nodes."""
    return f"sum by (rail) ({with_rail(expr)})"


def fleet():
    d = Dash()
    d.new_row("Overview")
    d.stat("Nodes up", [t(f"sum({sel('up')})", "up"), t(f"count({sel('up')})", "nodes")])
    d.stat("Firing railscope alerts", [
        t('count(ALERTS{alertname=~"Railscope.*", alertstate="firing", job=~"$job", instance=~"$instance"})'
          " or vector(0)", "alerts")], thresholds=steps((1, "red")))
    d.stat("Ports not ACTIVE", [
        t(f"count({rail_port(sel('railscope_ib_port_state') + ' != 4')}) or vector(0)", "ports")],
        thresholds=steps((1, "red")))
    d.stat("GPUs lost", [t(f"sum({sel('railscope_gpu_state', LOST)})", "lost")],
           thresholds=steps((1, "red")))
    d.stat("NVLinks inactive", [t(f"count({sel('railscope_nvlink_up')} == 0) or vector(0)", "inactive")],
           thresholds=steps((1, "red")))
    d.stat("Nodes without nvidia_peermem", [
        t(f"count({sel('railscope_host_gpudirect_rdma_module_loaded')} == 0) or vector(0)", "nodes")],
        thresholds=steps((1, "red")))
    d.table("Firing railscope alerts", [
        t('ALERTS{alertname=~"Railscope.*", alertstate="firing", job=~"$job", instance=~"$instance"}',
          instant=True)], w=24, h=8, hide=("Time", "Value", "alertstate"), links=NODE_LINK,
        desc="Returns rows only while an alert fires. Needs alerts/railscope.rules.yml loaded.")

    # Throughput
    d.new_row("Rails: throughput")
    port_bw = f"sum without (direction) ({rate('railscope_ib_port_data_bytes_total')})"
    d.ts("Throughput per rail", [t(per_rail(port_bw), "rail {{rail}}")], "Bps", w=12, h=9,
         desc="Receive + transmit of every port of the rail, summed over the chosen nodes. "
              "A rail carrying less than its siblings is a dead leaf, a bad cable or a skewed NCCL ring.")
    d.ts("Mean throughput per port, by rail", [
        t(f"avg by (rail) ({with_rail(port_bw)})", "rail {{rail}}")], "Bps", w=12, h=9)
    d.table("Throughput by node and rail (now)", [
        t(f"sum by (instance, rail) ({with_rail(port_bw)})", instant=True)], unit="Bps", w=24, h=9,
        matrix=("instance", "rail"),
        desc="Rows: nodes, columns: rails. A node whose rail is 0 while its siblings carry traffic has lost that rail.")

    # Errors
    d.new_row("Rails: errors")
    for title, metric in [("Symbol errors per rail", "railscope_ib_port_symbol_errors_total"),
                          ("Receive errors per rail", "railscope_ib_port_receive_errors_total"),
                          ("Link error recovery per rail", "railscope_ib_port_link_error_recovery_total"),
                          ("Link downed per rail", "railscope_ib_port_link_downed_total"),
                          ("Transmit discards per rail", "railscope_ib_port_transmit_discards_total")]:
        d.ts(title, [t(per_rail(rate(metric)), "rail {{rail}}")], "cps", w=8,
             desc="Summed over the chosen nodes: one rail with more errors than the others is the "
                  "signature of a bad leaf switch.")
    d.ts("RoCE retransmissions per rail", [
        t(per_rail(rate("railscope_rdma_port_hw_stat_total", f'counter=~"{HW_RETRANS}"')), "rail {{rail}} {{counter}}")],
        "cps", w=8)
    d.ts("CNP and ECN per rail", [
        t(per_rail(rate("railscope_rdma_port_hw_stat_total", f'counter=~"{HW_CNP}"')), "rail {{rail}} {{counter}}")],
        "pps", w=12)
    d.ts("Out of buffer per rail", [
        t(per_rail(rate("railscope_rdma_port_hw_stat_total", 'counter="out_of_buffer"')), "rail {{rail}}")],
        "cps", w=12)
    errors = " + ".join(rate(m, fn="increase", rng="$__range") for m in [
        "railscope_ib_port_symbol_errors_total", "railscope_ib_port_receive_errors_total",
        "railscope_ib_port_link_error_recovery_total", "railscope_ib_port_link_downed_total",
        "railscope_ib_port_transmit_discards_total"])
    d.table("Error counts in the time range by node and rail", [
        t(f"sum by (instance, rail) ({with_rail('(' + errors + ')')})", instant=True)], w=24, h=9,
        matrix=("instance", "rail"), thresholds=steps((1, "orange"), (100, "red")),
        desc="Symbol errors + receive errors + link error recovery + link downed + transmit discards. "
             "A column lit across many nodes is a leaf switch; a single cell is a cable or port.")

    d.table("Priorities paused the most (top 20)", [
        t("topk(20, max by (instance, netdev, priority, direction) ("
          + rate("railscope_pfc_pause_duration_seconds_total", rng="5m") + "))", instant=True)],
        unit="percentunit", w=12, hide=("Time",), links=NODE_LINK, sort=("Value", True),
        thresholds=steps((PFC_STORM_FRACTION / 2, "orange"), (PFC_STORM_FRACTION, "red")),
        desc="Fraction of time each priority was paused over 5 minutes, across the chosen nodes: "
             "red is where RailscopePFCPauseStorm fires. direction rx: pauses received (this NIC's "
             "transmit is held back); tx: pauses sent (this NIC cannot drain).")
    d.table("Ports with the most link errors in the time range (top 20)", [
        t(f"topk(20, sum by (instance, device, port) ({rail_port(errors)}))", instant=True)],
        w=12, hide=("Time",), links=NODE_LINK, sort=("Value", True),
        thresholds=steps((1, "orange"), (100, "red")),
        desc="The noisiest ports of the chosen nodes and rails (ports without a rail stay): symbol "
             "errors + receive errors + link error recovery + link downed + transmit discards. Scales "
             "to any number of nodes, unlike the node × rail table.")

    # Peers
    d.new_row("Off their peers")
    rail_of = ' * on (instance, device, port) group_left (rail) railscope:port_rail:info{instance=~"$instance", rail=~"$rail"}'
    d.table("Ports below their peers' rate (worst 20)", [
        t("bottomk(20, railscope:ib_port_rate_bytes_per_second:by_model{" + S + "}"
          " / ignoring (job, instance, device, port) group_left () railscope:ib_port_rate_bytes_per_second:max_by_model)" + rail_of,
          instant=True)], unit="percentunit", w=12, hide=("Time",), links=NODE_LINK,
        thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}], sort=("Value", False),
        desc="Active rate over the best rate of its peers in the fleet, as the recording rules define them (the same adapter model, hca_type, and rail). Below 100%: trained down. "
             "Needs the recording rules of alerts/railscope.rules.yml.")
    d.table("Ports below their peers' width (worst 20)", [
        t("bottomk(20, railscope:ib_port_link_width_lanes:by_model{" + S + "}"
          " / ignoring (job, instance, device, port) group_left () railscope:ib_port_link_width_lanes:max_by_model)" + rail_of,
          instant=True)], unit="percentunit", w=12, hide=("Time",), links=NODE_LINK,
        thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}], sort=("Value", False))
    d.table("MTU mismatches (worst 20)", [
        t("bottomk(20, railscope:ib_port_active_mtu_bytes:by_link_layer{" + S + "}"
          " / ignoring (job, instance, device, port) group_left () railscope:ib_port_active_mtu_bytes:max_by_link_layer)" + rail_of,
          instant=True)], unit="percentunit", w=12, hide=("Time",), links=NODE_LINK,
        thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}], sort=("Value", False),
        desc="Active RDMA MTU over the largest of the same link layer in the fleet.")
    d.table("Active MTU by node and rail", [
        t(f"max by (instance, rail) ({with_rail(sel('railscope_ib_port_active_mtu_bytes'))})", instant=True)],
        unit="bytes", w=12, matrix=("instance", "rail"),
        thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 4096}])
    pci_roles = (" * on (instance, pci_address) group_left (role, rdma_device, gpu) "
                 + sel("railscope_pci_device_info", 'role=~"nic|gpu"'))
    d.table("PCIe width below max (worst 20)", [
        t(f"bottomk(20, {rail_pci(sel('railscope_pci_link_width_lanes') + ' / ' + sel('railscope_pci_link_max_width_lanes') + pci_roles)})",
          instant=True)], unit="percentunit", w=12, hide=("Time",), links=NODE_LINK,
        thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}], sort=("Value", False),
        desc="NICs and GPUs: current over maximum link width.")
    d.table("PCIe speed below max (worst 20)", [
        t(f"bottomk(20, {rail_pci(sel('railscope_pci_link_speed_transfers_per_second') + ' / ' + sel('railscope_pci_link_max_speed_transfers_per_second') + pci_roles)})",
          instant=True)], unit="percentunit", w=12, hide=("Time",), links=NODE_LINK,
        thresholds=[{"color": "orange", "value": None}, {"color": "green", "value": 1}], sort=("Value", False),
        desc="GPUs lower their speed at idle: a GPU below max here matters only under load.")
    d.table("AER errors in the time range by node (top 20)", [
        t(f"topk(20, sum by (instance, severity) ({rate('railscope_pci_aer_errors_total', fn='increase', rng='$__range')}))",
          instant=True)], w=12, hide=("Time",), links=NODE_LINK,
        thresholds=steps((1, "orange"), (100, "red")), sort=("Value", True))
    d.table("GPUs not ok (top 20)", [
        t(f"topk(20, sum by (instance, state) ({rail_gpu(sel('railscope_gpu_state', NOT_OK))}))",
          instant=True)], w=12, hide=("Time",), links=NODE_LINK,
        thresholds=steps((1, "red")), sort=("Value", True),
        desc="GPUs per node in state lost (fallen off the bus), timeout (NVML hanging) or error.")
    d.table("Inactive NVLinks by node and GPU (top 20)", [
        t(f"topk(20, sum by (instance, gpu) (1 - {rail_gpu(sel('railscope_nvlink_up'))}))", instant=True)],
        w=12, hide=("Time",), links=NODE_LINK, thresholds=steps((1, "red")), sort=("Value", True))
    d.table("Collectors failing (worst 20)", [
        t(f"bottomk(20, {sel('railscope_collector_success')})", instant=True)],
        w=12, hide=("Time",), links=NODE_LINK, mappings=UPDOWN, thresholds=red_below(1), sort=("Value", False))

    return dashboard("railscope-fleet", "railscope / fleet and rails",
                     "Per-rail throughput and errors across nodes, and the nodes whose ports, PCIe links, "
                     "GPUs or NVLinks are off their peers.", d, fleet=True)


def main():
    here = Path(__file__).resolve().parent
    out = {"railscope-node.json": node(), "railscope-fleet.json": fleet()}
    check = "--check" in sys.argv[1:]
    stale = []
    for name, dash in out.items():
        text = json.dumps(dash, indent=2, ensure_ascii=False) + "\n"
        path = here / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        sys.exit(f"out of date, run python3 dashboards/generate.py: {', '.join(stale)}")


if __name__ == "__main__":
    main()
