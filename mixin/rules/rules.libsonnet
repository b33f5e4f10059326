// railscope's recording rules. Fleet-wide comparisons go through them so they stay cheap at
// 10,000 nodes: each node's series are joined with its model once, and the peer maxima are one
// small series per model. `%(selector)s`, `%(cluster)s` and the thresholds come from
// config.libsonnet (see lib/rules.libsonnet).
local lib = import '../lib/rules.libsonnet';
{
  // What makes a GPU of a multi-node NVLink domain not healthy, besides being down, in order
  // (the first that holds names the fault): [fault, condition on the GPU's series by (cluster,
  // instance, gpu)]. The same conditions as RailscopeGPUFabricUnhealthy and
  // RailscopeGPUFabricDegraded, then IMEX: the one IMEX state NVML reports, a GPU whose
  // driver asks for its IMEX domain to be recovered (recovery action 5,
  // RECOVER_IMEX_DOMAIN). Where the agent reports the node's IMEX daemon itself, its condition
  // goes here too, so that a node whose IMEX domain is down counts against its NVLink domain;
  // docs/alerts.md says what it adds. Mix in `nvlinkDomainFaults+:: [...]` to add one.
  nvlinkDomainFaults:: [
    [
      'unhealthy',
      |||
        railscope_gpu_fabric_health{%(selector)s, condition=~"route_unhealthy|incorrect_configuration"} == 1
        or on (%(cluster)s, instance, gpu) railscope_gpu_fabric_health_state{%(selector)s, state="unhealthy"} == 1
      |||,
    ],
    [
      'degraded',
      |||
        railscope_gpu_fabric_health{%(selector)s, condition="degraded_bandwidth"} == 1
        or on (%(cluster)s, instance, gpu) railscope_gpu_fabric_health_state{%(selector)s, state="limited_capacity"} == 1
      |||,
    ],
    [
      'imex',
      |||
        railscope_gpu_recovery_action{%(selector)s, action="recover_imex_domain"} == 1
      |||,
    ],
  ],
  prometheusRules+:: {
    assert $._config.thresholds.railMiscabledMajority >= 0.5 && $._config.thresholds.railMiscabledMajority < 1 :
           'thresholds.railMiscabledMajority: at least 0.5 (a strict majority) and below 1',
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
          // The multi-node NVLink domain of each GPU (railscope_gpu_fabric_info): its cluster UUID
          // and clique. The all-zero UUID is a node's own NVSwitch fabric (HGX, DGX H100), no
          // domain across nodes, and is left out. A GPU that is down (lost, timed out) keeps the
          // domain it last reported within goneLookback, so that its alert still names it.
          {
            record: 'railscope:gpu_fabric:info',
            expr: |||
              max by (%(cluster)s, instance, gpu, cluster_uuid, clique_id) (
                railscope_gpu_fabric_info{%(selector)s, cluster_uuid!~"(00000000-0000-0000-0000-000000000000)?"}
              )
              or on (%(cluster)s, instance, gpu)
              max by (%(cluster)s, instance, gpu, cluster_uuid, clique_id) (
                topk by (%(cluster)s, instance, gpu) (1,
                  last_over_time(railscope_gpu_fabric_info{%(selector)s, cluster_uuid!~"(00000000-0000-0000-0000-000000000000)?"}[%(goneLookback)s])
                )
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 0)
              )
            ||| % p,
          },
          // Each GPU's rail and what identifies it outside railscope: its PCI address (what
          // dmesg's `Xid (PCI:0000:2b:00)` names), UUID and serial (what an RMA asks for), from
          // railscope_gpu_info; where it is in a rack-scale system (railscope_gpu_platform_info,
          // Blackwell and later: chassis serial, tray, slot, module), and its NVLink domain
          // (railscope:gpu_fabric:info). Each part that is unknown (a lost GPU's identity not yet
          // read, a GPU before Blackwell, no multi-node domain) leaves its labels out, and the
          // GPU is still there with the others.
          {
            record: 'railscope:gpu_identity:info',
            expr: |||
              (
                railscope:gpu_rail:info
                * on (%(cluster)s, instance, gpu) group_left (pci_address, uuid, serial)
                max by (%(cluster)s, instance, gpu, pci_address, uuid, serial) (railscope_gpu_info{%(selector)s})
                or on (%(cluster)s, instance, gpu)
                railscope:gpu_rail:info
              )
              * on (%(cluster)s, instance, gpu) group_left (chassis_serial, slot, tray, module_id)
              (
                max by (%(cluster)s, instance, gpu, chassis_serial, slot, tray, module_id) (railscope_gpu_platform_info{%(selector)s})
                or on (%(cluster)s, instance, gpu)
                max by (%(cluster)s, instance, gpu) (railscope:gpu_rail:info)
              )
              * on (%(cluster)s, instance, gpu) group_left (cluster_uuid, clique_id)
              (
                railscope:gpu_fabric:info
                or on (%(cluster)s, instance, gpu)
                max by (%(cluster)s, instance, gpu) (railscope:gpu_rail:info)
              )
            ||| % p,
          },
          // One series per GPU of a multi-node NVLink domain, with where it is and what is wrong
          // with it in `fault`, for the domain rules of railscope.fleet.recording: the GPU's
          // state when it is down (lost, timeout, error), else the first of nvlinkDomainFaults
          // that holds, else "none". A GPU its node no longer reports is absent (the domain's
          // expected count still has it).
          {
            record: 'railscope:nvlink_domain_gpu:info',
            expr: (
              local member = 'railscope:gpu_identity:info{cluster_uuid!=""}';
              local labels = '%(cluster)s, instance, gpu, chassis_serial, tray, slot, cluster_uuid, clique_id' % p;
              local fault(name, cond) = |||
                or on (%(cluster)s, instance, gpu)
                label_replace(
                  %(member)s
                  and on (%(cluster)s, instance, gpu) (
                    %(cond)s
                  ),
                  "fault", "%(name)s", "", ""
                )
              ||| % (p { member: member, name: name, cond: std.strReplace(std.rstripChars(cond, '\n'), '\n', '\n    ') });
              |||
                max by (%(labels)s, fault) (
                  label_replace(
                    %(member)s
                    * on (%(cluster)s, instance, gpu) group_left (state)
                    max by (%(cluster)s, instance, gpu, state) (railscope_gpu_state{%(selector)s, state!="ok"} == 1),
                    "fault", "$1", "state", "(.*)"
                  )
                  %(faults)s
                  or on (%(cluster)s, instance, gpu)
                  label_replace(
                    %(member)s and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1),
                    "fault", "none", "", ""
                  )
                )
              ||| % (p {
                       labels: labels,
                       member: member,
                       faults: std.strReplace(
                         std.rstripChars(std.join('', [fault(f[0], f[1] % p) for f in $.nvlinkDomainFaults]), '\n'),
                         '\n',
                         '\n  '
                       ),
                     })
            ),
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
          // Pre-FEC bit error rate of each netdev over an hour: the bits its FEC corrected (the
          // phy collector's total, or where it has none the ethtool collector's mlx5
          // rx_corrected_bits_phy) per bit the PHY received where the driver counts them (mlx5
          // rx_bits_phy, railscope_netdev_phy_received_bits_total: `basis="received_bits"`),
          // else per bit of link rate (`basis="link_rate"`). A PHY receives at its line rate
          // whatever the traffic (idles are coded and corrected too), so the link rate is the
          // bits it decoded; the coded line rate is a little higher (FEC overhead), which makes
          // the link-rate basis a slight overestimate. Each netdev has one basis at a time.
          {
            record: 'railscope:phy_pre_fec_ber:rate1h',
            expr: |||
              label_replace(
                (
                  sum by (%(cluster)s, instance, job, netdev) (rate(railscope_phy_fec_corrected_bits_total{%(selector)s}[1h]))
                  or on (%(cluster)s, instance, netdev)
                  sum by (%(cluster)s, instance, job, netdev) (rate(railscope_netdev_phy_fec_corrected_bit_errors_total{%(selector)s}[1h]))
                )
                / on (%(cluster)s, instance, netdev) group_left ()
                (sum by (%(cluster)s, instance, job, netdev) (rate(railscope_netdev_phy_received_bits_total{%(selector)s}[1h])) > 0),
                "basis", "received_bits", "", ""
              )
              or on (%(cluster)s, instance, netdev)
              label_replace(
                (
                  sum by (%(cluster)s, instance, job, netdev) (rate(railscope_phy_fec_corrected_bits_total{%(selector)s}[1h]))
                  or on (%(cluster)s, instance, netdev)
                  sum by (%(cluster)s, instance, job, netdev) (rate(railscope_netdev_phy_fec_corrected_bit_errors_total{%(selector)s}[1h]))
                )
                / on (%(cluster)s, instance, netdev) group_left ()
                (railscope_netdev_speed_bytes_per_second{%(selector)s} * 8 > 0),
                "basis", "link_rate", "", ""
              )
            ||| % p,
          },
          // The switch and switch port at the far end of each link (the neighbour collector:
          // LLDP System Name and Port ID, or the IB switch's NodeDescription and port number),
          // with the RDMA port and netdev of the link and its rail ("none" for a netdev without
          // an RDMA port or an RDMA port on no rail). For alerts to join:
          // `* on (instance, device, port) group_left (neighbour, neighbour_port)
          // railscope:port_neighbour:info{device!=""}`, or on `netdev` for netdev alerts.
          {
            record: 'railscope:port_neighbour:info',
            expr: |||
              max by (%(cluster)s, instance, job, device, port, netdev, neighbour, neighbour_port) (railscope_neighbour_info{%(selector)s})
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
              or on (%(cluster)s, instance, device, port, netdev)
              label_replace(
                max by (%(cluster)s, instance, job, device, port, netdev, neighbour, neighbour_port) (railscope_neighbour_info{%(selector)s}),
                "rail", "none", "", ""
              )
            ||| % p,
          },
          // Ports behind a named switch with an error or flap signal now, one series per fault:
          // the conditions of the ports' own alerts (RailscopeSymbolErrorsAboveBER,
          // RailscopeReceiveErrors, RailscopeLinkFlapping, RailscopeNetdevLinkFlapping,
          // RailscopeFECUncorrectableBlocks, RailscopeRoCERetransmissions), without their `for`.
          // RailscopeSwitchSuspect counts the nodes behind each switch here (fleet-wide).
          {
            record: 'railscope:neighbour_port_faults:info',
            expr: (
              local byPort(fault, cond) = |||
                label_replace(
                  railscope:port_neighbour:info{device!="", neighbour!=""}
                  and on (%(cluster)s, instance, device, port) (
                    %(cond)s
                  ),
                  "fault", "%(fault)s", "", ""
                )
              ||| % (p { fault: fault, cond: std.strReplace(std.rstripChars(cond % p, '\n'), '\n', '\n    ') });
              local byNetdev(fault, cond) = |||
                label_replace(
                  railscope:port_neighbour:info{netdev!="", neighbour!=""}
                  and on (%(cluster)s, instance, netdev) (
                    %(cond)s
                  ),
                  "fault", "%(fault)s", "", ""
                )
              ||| % (p { fault: fault, cond: std.strReplace(std.rstripChars(cond % p, '\n'), '\n', '\n    ') });
              std.join('or\n', [
                byPort('symbol_errors', |||
                  rate(railscope_ib_port_symbol_errors_total{%(selector)s}[15m])
                  > on (%(cluster)s, instance, device, port) (railscope_ib_port_rate_bytes_per_second{%(selector)s} * 8 * %(symbolErrorBER)s)
                |||),
                byPort('receive_errors', |||
                  rate(railscope_ib_port_receive_errors_total{%(selector)s}[10m]) > 0
                |||),
                byPort('link_flaps', |||
                  increase(railscope_ib_port_link_downed_total{%(selector)s}[1h]) > %(linkFlaps)s
                  or on (%(cluster)s, instance, device, port) changes(railscope_ib_port_state{%(selector)s}[30m]) > %(linkFlaps)s
                |||),
                byPort('roce_retransmissions', |||
                  sum by (%(cluster)s, instance, device, port) (
                    rate(railscope_rdma_port_hw_stat_total{%(selector)s, counter=~"local_ack_timeout_err|out_of_sequence|packet_seq_err|implied_nak_seq_err"}[5m])
                  ) > %(roceRetransmissionsPerSecond)s
                |||),
                byNetdev('link_flaps', |||
                  increase(railscope_phy_link_down_events_total{%(selector)s}[15m]) > %(netdevLinkDownEvents)s
                  or on (%(cluster)s, instance, netdev)
                  increase(railscope_netdev_carrier_changes_total{%(selector)s}[15m]) / 2 > %(netdevLinkDownEvents)s
                |||),
                byNetdev('fec_uncorrectable', |||
                  increase(railscope_phy_fec_uncorrectable_blocks_total{%(selector)s}[15m]) > %(fecUncorrectableBlocks)s
                |||),
              ])
            ),
          },
          // Each node's switch on each rail, and its leaf group: the first group of
          // neighbourGroupRegex on the switch's name (by default the name itself). For
          // RailscopeRailMiscabled, over the rail's nodes.
          {
            record: 'railscope:rail_neighbour:info',
            expr: |||
              label_replace(
                max by (%(cluster)s, instance, job, rail, neighbour) (railscope:port_neighbour:info{rail!="none", neighbour!=""}),
                "neighbour_group", "$1", "neighbour", "%(neighbourGroupRegex)s"
              )
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
          // Multi-node NVLink domains (GB200/GB300 NVL72 racks), by cluster UUID and clique, over
          // railscope:nvlink_domain_gpu:info: the GPUs their nodes report (a lost one too), the
          // healthy ones (fault "none"), those whose fabric health is unhealthy or degraded, and
          // the GPUs expected: the most reported within nvlinkDomainLookback, or
          // thresholds.nvlinkDomainGPUs where that is more. A domain that loses a tray keeps its
          // expected count, so the missing GPUs count as not healthy.
          {
            record: 'railscope:nvlink_domain_gpus:reporting',
            expr: 'count by (%(cluster)s, cluster_uuid, clique_id) (railscope:nvlink_domain_gpu:info)' % p,
          },
          {
            record: 'railscope:nvlink_domain_gpus:healthy',
            expr: |||
              count by (%(cluster)s, cluster_uuid, clique_id) (railscope:nvlink_domain_gpu:info{fault="none"})
              or on (%(cluster)s, cluster_uuid, clique_id)
              0 * railscope:nvlink_domain_gpus:reporting
            ||| % p,
          },
          {
            record: 'railscope:nvlink_domain_gpus:fabric_degraded',
            expr: |||
              count by (%(cluster)s, cluster_uuid, clique_id) (railscope:nvlink_domain_gpu:info{fault=~"unhealthy|degraded"})
              or on (%(cluster)s, cluster_uuid, clique_id)
              0 * railscope:nvlink_domain_gpus:reporting
            ||| % p,
          },
          {
            record: 'railscope:nvlink_domain_gpus:expected',
            expr: |||
              max by (%(cluster)s, cluster_uuid, clique_id) (
                clamp_min(
                  max_over_time(railscope:nvlink_domain_gpus:reporting[%(nvlinkDomainLookback)s]),
                  %(nvlinkDomainGPUs)s
                )
              )
            ||| % p,
          },
          // Nodes per rail that report a switch on it, and per rail and leaf group; the group
          // that holds more than railMiscabledMajority of them, on a rail with at least
          // railMiscabledMinNodes, is the rail's majority group (at most one).
          {
            record: 'railscope:rail_neighbour:nodes',
            expr: |||
              count by (%(cluster)s, rail) (max by (%(cluster)s, instance, rail) (railscope:rail_neighbour:info))
            ||| % p,
          },
          {
            record: 'railscope:rail_neighbour_group:nodes',
            expr: |||
              count by (%(cluster)s, rail, neighbour_group) (
                max by (%(cluster)s, instance, rail, neighbour_group) (railscope:rail_neighbour:info{neighbour_group!=""})
              )
            ||| % p,
          },
          {
            record: 'railscope:rail_neighbour_group:majority',
            expr: |||
              railscope:rail_neighbour_group:nodes
              > on (%(cluster)s, rail) group_left ()
              (railscope:rail_neighbour:nodes * %(railMiscabledMajority)s)
              and on (%(cluster)s, rail) (railscope:rail_neighbour:nodes >= %(railMiscabledMinNodes)s)
            ||| % p,
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
