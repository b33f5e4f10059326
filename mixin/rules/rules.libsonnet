// railscope's recording rules. Fleet-wide comparisons go through them so they stay cheap at
// 10,000 nodes: each node's series are joined with its model once, and the peer maxima are one
// small series per model. `%(selector)s`, `%(cluster)s` and the thresholds come from
// config.libsonnet (see lib/rules.libsonnet).
local lib = import '../lib/rules.libsonnet';
{
  prometheusRules+:: {
    local p = lib.params($._config),
    groups+: [
      {
        name: 'railscope.recording',
        interval: '1m',
        rules: [
          // One series per RDMA port carrying its rail ("none" where no rail is known), for alerts
          // to join: `* on(instance, device, port) group_left(rail) railscope:port_rail:info`.
          {
            record: 'railscope:port_rail:info',
            expr: |||
              max by (%(cluster)s, instance, device, port, rail) (railscope_rail_info{%(selector)s})
              or on (%(cluster)s, instance, device, port)
              label_replace(max by (%(cluster)s, instance, device, port) (railscope_ib_port_info{%(selector)s}), "rail", "none", "", "")
            ||| % p,
          },
          // Ports a node keeps outside its rails on purpose: it has rails, and this port is not
          // on one (`--collector.topology.rail-exclude`, or left out of `--collector.topology.rails`):
          // a front-end or storage NIC, which may rightly run another MTU. A node without any rail
          // information has no such ports: all of its ports are checked.
          {
            record: 'railscope:port_outside_rails:info',
            expr: |||
              railscope:port_rail:info{rail="none"} and on (%(cluster)s, instance) railscope_rail_info{%(selector)s}
            ||| % p,
          },
          // One series per GPU carrying the rail it feeds ("none" where no rail is known).
          {
            record: 'railscope:gpu_rail:info',
            expr: |||
              max by (%(cluster)s, instance, gpu, rail) (railscope_rail_info{%(selector)s, gpu!=""})
              or on (%(cluster)s, instance, gpu)
              label_replace(max by (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s}), "rail", "none", "", "")
            ||| % p,
          },
          // Each GPU's rail and what identifies it outside railscope: its PCI address (what
          // dmesg's `Xid (PCI:0000:2b:00)` names), UUID and serial (what an RMA asks for), from
          // railscope_gpu_info; without it (a lost GPU's identity not yet read), the rail alone.
          {
            record: 'railscope:gpu_identity:info',
            expr: |||
              railscope:gpu_rail:info
              * on (%(cluster)s, instance, gpu) group_left (pci_address, uuid, serial)
              max by (%(cluster)s, instance, gpu, pci_address, uuid, serial) (railscope_gpu_info{%(selector)s})
              or on (%(cluster)s, instance, gpu)
              railscope:gpu_rail:info
            ||| % p,
          },
          // Kernel-log events of the last 15 minutes, by node, kind and identifiers: the
          // event's last-seen time changed, or its series appeared, within the window (an agent
          // restart re-reads the boot's log and sets the same times again: no change), and the
          // event itself is that recent (a new agent on a node up for days sees old ones once,
          // and must not alert on them).
          {
            record: 'railscope:kmsg_event:recent15m',
            expr: |||
              max by (%(cluster)s, instance, job, kind, pci_address, device, port, code, severity) (
                (
                  changes(railscope_kmsg_event_last_seen_seconds{%(selector)s}[15m]) > 0
                  or (
                    railscope_kmsg_event_last_seen_seconds{%(selector)s}
                    unless railscope_kmsg_event_last_seen_seconds{%(selector)s} offset 15m
                  )
                )
                and (railscope_kmsg_event_last_seen_seconds{%(selector)s} > time() - 900)
              )
            ||| % p,
          },
          // The XIDs among them, labelled like NVML's (`xid`, and `job` kept), for the XID alerts:
          // an alert switching from NVML's series to these keeps the same labels, so it stays one.
          {
            record: 'railscope:kmsg_xid:recent15m',
            expr: |||
              max by (%(cluster)s, instance, job, pci_address, xid) (
                label_replace(railscope:kmsg_event:recent15m{kind="xid"}, "xid", "$1", "code", "(.*)")
              )
            ||| % p,
          },
          // Port rate and width of ACTIVE ports with the adapter model; what the ports of each
          // model on each rail run at is their median (railscope.fleet.recording), not their best, so that one node alone at a higher rate
          // (another cable, a port set to a faster speed) does not make all its peers "below
          // peers"; a port below its peers' median is still caught. Peers are the ports of the
          // same adapter model on the same rail across the cluster.
          {
            record: 'railscope:ib_port_rate_bytes_per_second:by_model',
            expr: |||
              railscope_ib_port_rate_bytes_per_second{%(selector)s}
              * on (%(cluster)s, instance, device) group_left (hca_type) railscope_ib_device_info{%(selector)s}
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
              and on (%(cluster)s, instance, device, port) (railscope_ib_port_state{%(selector)s} == 4)
            ||| % p,
          },
          {
            record: 'railscope:ib_port_link_width_lanes:by_model',
            expr: |||
              railscope_ib_port_link_width_lanes{%(selector)s}
              * on (%(cluster)s, instance, device) group_left (hca_type) railscope_ib_device_info{%(selector)s}
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
              and on (%(cluster)s, instance, device, port) (railscope_ib_port_state{%(selector)s} == 4)
            ||| % p,
          },
          // Active MTU by link layer, and the cluster's usual value per link layer (the median, so
          // that one node alone at a larger MTU does not put every other port in "mismatch"): a
          // port below it is what a mismatch looks like.
          {
            record: 'railscope:ib_port_active_mtu_bytes:by_link_layer',
            expr: |||
              railscope_ib_port_active_mtu_bytes{%(selector)s}
              * on (%(cluster)s, instance, device, port) group_left (link_layer) max by (%(cluster)s, instance, device, port, link_layer) (railscope_ib_port_info{%(selector)s})
              unless on (%(cluster)s, instance, device, port) railscope:port_outside_rails:info
            ||| % p,
          },
          // Data rate per port and the mean over a node's rails, for rail imbalance.
          {
            record: 'railscope:ib_port_data_bytes:rate5m',
            expr: 'sum without (direction) (rate(railscope_ib_port_data_bytes_total{%(selector)s}[5m]))' % p,
          },
          // Rail ports that carry a job: the rail's GPU was busy (over 20 % utilization) for the
          // last 5 minutes. On a node whose GPUs are not watched (no gpu collector or no NVML)
          // every rail port counts. A 4-GPU job on an 8-rail node leaves four rails idle, and
          // idle rails are not degraded ones.
          {
            record: 'railscope:port_in_use:info',
            expr: |||
              max by (%(cluster)s, instance, device, port) (
                railscope_rail_info{%(selector)s}
                and on (%(cluster)s, instance, gpu) (avg_over_time(railscope_gpu_utilization_ratio{%(selector)s}[5m]) > %(gpuBusyUtilization)s)
              )
              or on (%(cluster)s, instance, device, port)
              max by (%(cluster)s, instance, device, port) (
                railscope_rail_info{%(selector)s} unless on (%(cluster)s, instance) railscope_gpu_utilization_ratio{%(selector)s}
              )
            ||| % p,
          },
          {
            record: 'railscope:ib_port_data_bytes:rate5m_rail_median',
            expr: |||
              quantile by (%(cluster)s, instance) (0.5,
                railscope:ib_port_data_bytes:rate5m
                and on (%(cluster)s, instance, device, port) railscope:port_in_use:info
              )
            ||| % p,
          },
          // Link errors per rail port, summed per rail over the cluster, and how many nodes they
          // come from: one rail far above the others, with errors on several of its nodes, is the
          // signature of a bad leaf switch; one node's bad cable is not.
          {
            record: 'railscope:port_link_errors:rate15m',
            expr: |||
              (
                rate(railscope_ib_port_symbol_errors_total{%(selector)s}[15m])
                + on (%(cluster)s, instance, device, port) rate(railscope_ib_port_receive_errors_total{%(selector)s}[15m])
                + on (%(cluster)s, instance, device, port) rate(railscope_ib_port_link_downed_total{%(selector)s}[15m])
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info{rail!="none"}
            ||| % p,
          },
          // The RDMA port (and rail) behind each RoCE netdev, for netdev alerts.
          {
            record: 'railscope:netdev_port:info',
            expr: |||
              max by (%(cluster)s, instance, netdev, device, port) (railscope_ib_port_info{%(selector)s, netdev!=""})
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
          },
          // Non-empty GID entries per port, to spot a GID table that changed.
          {
            record: 'railscope:ib_port_gid_entries:sum',
            expr: 'sum by (%(cluster)s, instance, device, port) (railscope_ib_port_gid_entries{%(selector)s})' % p,
          },
        ],
      },
      // Fleet-wide: these aggregate across nodes, over the node-local recording rules above
      // (never over raw per-port series), so a global ruler (Thanos, Mimir, vmalert) can
      // evaluate them over what the shards computed; railscope.fleet.rules.yml holds them.
      {
        name: 'railscope.fleet.recording',
        interval: '1m',
        rules: [
          {
            record: 'railscope:ib_port_rate_bytes_per_second:median_by_model',
            expr: 'quantile by (%(cluster)s, hca_type, rail) (0.5, railscope:ib_port_rate_bytes_per_second:by_model)' % p,
          },
          {
            record: 'railscope:ib_port_link_width_lanes:median_by_model',
            expr: 'quantile by (%(cluster)s, hca_type, rail) (0.5, railscope:ib_port_link_width_lanes:by_model)' % p,
          },
          {
            record: 'railscope:ib_port_active_mtu_bytes:median_by_link_layer',
            expr: 'quantile by (%(cluster)s, link_layer) (0.5, railscope:ib_port_active_mtu_bytes:by_link_layer)' % p,
          },
          {
            record: 'railscope:rail_link_errors:rate15m',
            expr: 'sum by (%(cluster)s, rail) (railscope:port_link_errors:rate15m)' % p,
          },
          {
            record: 'railscope:rail_link_errors:nodes',
            expr: |||
              count by (%(cluster)s, rail) (
                max by (%(cluster)s, instance, rail) (railscope:port_link_errors:rate15m) > 0
              )
            ||| % p,
          },
        ],
      },
    ],
  },
}
