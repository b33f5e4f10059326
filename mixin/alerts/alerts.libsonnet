// railscope's alerts. Every alert carries severity, a summary naming node (instance), device,
// port (or PCI address) and rail, and an absolute runbook link built from runbookURLPattern;
// alerts on a GPU, NVLink, RDMA port or PCIe device also a `workload` annotation naming the
// pods and jobs that hold it (`workload` below).
//
// Severities (override any with severityOverrides):
//   * critical: drain the node now. Every job placed on it fails or hangs (a rail port down, a
//     GPU lost or needing a reset, uncorrectable memory or PCIe errors), or the fault spreads
//     beyond the node (a PFC storm pauses its switch's other ports). These page.
//   * warning: jobs on the node run slower than they should, or it is set up wrong (a port or
//     PCIe link below its peers, an MTU mismatch, NVLink down, no GPUDirect RDMA). Fix in
//     working hours, drain at the next opportunity: a single node's degradation is no reason
//     to wake someone.
//   * info: context for the other alerts, never notified alone.
// `%(selector)s`, `%(cluster)s` and the thresholds come from config.libsonnet (see
// lib/rules.libsonnet).
local lib = import '../lib/rules.libsonnet';
{
  prometheusAlerts+:: {
    // `gpuIdentity`: the labels GPU alerts take from railscope:gpu_identity:info (rail and
    // identity, then `gpuPlace`: where the GPU sits in a rack-scale system and its multi-node
    // NVLink domain, each absent where unknown).
    local p = lib.params($._config) {
      gpuPlace: 'chassis_serial, slot, tray, module_id, cluster_uuid, clique_id',
      gpuIdentity: 'rail, pci_address, uuid, serial, ' + self.gpuPlace,
    },
    // An XID alert's expression for the codes `codes` (a regular expression): NVML's XID
    // counters for the GPU, or the same XID from the kernel log (railscope:kmsg_xid:recent15m)
    // for the GPU at its PCI address. One alert when both saw it; one when only the kernel log
    // did (an agent that started after the event, an event NVML did not deliver); and one by
    // address alone for a GPU NVML no longer lists (fallen off the bus).
    local xidExpr(codes) = |||
      (
        (
          increase(railscope_gpu_xid_errors_total{%(selector)s, xid=~"%(codes)s"}[15m]) > 0
          # A code's series appears with its first XID, which increase() cannot see.
          or (railscope_gpu_xid_errors_total{%(selector)s, xid=~"%(codes)s"} unless railscope_gpu_xid_errors_total{%(selector)s} offset 15m)
        )
        * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
      )
      or on (%(cluster)s, instance, pci_address, xid)
      (
        railscope:kmsg_xid:recent15m{xid=~"%(codes)s"}
        * on (%(cluster)s, instance, pci_address) group_left (gpu, rail, uuid, serial, %(gpuPlace)s) railscope:gpu_identity:info
      )
      or on (%(cluster)s, instance, pci_address, xid)
      label_replace(
        label_replace(railscope:kmsg_xid:recent15m{xid=~"%(codes)s"}, "gpu", "unknown", "", ""),
        "rail", "none", "", ""
      )
    ||| % (p { codes: codes }),
    // The NVLink error counters RailscopeNVLinkErrors counts against nvlinkErrorsPerSecond:
    // CRC and replay errors of NVLink 1-4 (Hopper and earlier), and on NVLink5 (Blackwell)
    // the errors FEC left uncorrected (effective) and the packets the link found broken or
    // dropped. A Blackwell GPU may report none of the older types, a Hopper GPU none of the
    // NVLink5 ones: the sum is over whichever the GPU has. NVLink5 `symbol` errors are left
    // out: they are counted before forward error correction (railscope_nvlink_symbol_ber is
    // the BER before it), which a healthy link may log steadily.
    local nvlinkErrorTypes = std.join('|', [
      'crc_flit',
      'crc_data',
      'replay',
      'effective',
      'malformed_packet',
      'buffer_overrun',
      'rcv',
      'rcv_remote',
      'rcv_general',
      'local_link_integrity',
      'xmit_discards',
    ]),
    // The `workload` annotation: which workloads hold the device an alert is about, so that
    // the notification says whose job it is (alerts/RUNBOOK.md, "Whose job is it?"). Pods by
    // namespace/pod from the kubelet (railscope_workload_device_info), then what the agent's
    // process scan found (railscope_workload_process_device_info): Slurm jobs ("Slurm job
    // 73512"), systemd units and login sessions by name, and pods by UID where the kubelet
    // names no pod on that device. Empty when nothing is known (no workload source, a device
    // nobody uses). `on` lists [alert label, series label] pairs, tried in order: the first
    // label the alert has set picks the device (`gpu` on GPU alerts, the port's `device` as
    // `rdma_device` on port alerts). It is evaluated with the alert's other templates and
    // changes nothing else: which alerts fire, their labels (routing, grouping, inhibition)
    // and their `for` stay as they are.
    local workload(on) =
      local one(alertLabel, seriesLabel) =
        local m = p.selector + ', ' + p.cluster + "='%[1]s', instance='%[2]s', " + seriesLabel + "='%[3]s'";
        // `or … ""`: a missing label is "" in Prometheus's templates but nil in vmalert's,
        // which printf would print as %!s(<nil>).
        local args = ' (or $labels.' + p.cluster + ' "") $labels.instance $labels.' + alertLabel;
        local pods = 'count by (namespace, pod) (railscope_workload_device_info{' + m + '})';
        local procs = 'count by (kind, workload) (railscope_workload_process_device_info{' + m + ', kind!~"kubernetes|other"}'
                      + ' or (railscope_workload_process_device_info{' + m + ', kind="kubernetes"}'
                      + ' unless on (instance, ' + seriesLabel + ') railscope_workload_device_info{' + m + '}))';
        '{{ if $labels.' + alertLabel + ' }}'
        + '{{ range printf `' + pods + '`' + args + ' | query | sortByLabel "pod" }}'
        + '{{ $sep }}{{ label "namespace" . }}/{{ label "pod" . }}{{ $sep = ", " }}{{ end }}'
        + '{{ range printf `' + procs + '`' + args + ' | query | sortByLabel "workload" }}'
        + '{{ $sep }}{{ if eq (label "kind" .) "slurm" }}Slurm job {{ else if eq (label "kind" .) "kubernetes" }}pod UID {{ end }}'
        + '{{ label "workload" . }}{{ $sep = ", " }}{{ end }}';
      {
        workload: '{{ $sep := "" }}'
                  + std.join('{{ else }}', [one(x[0], x[1]) for x in on])
                  + std.join('', ['{{ end }}' for x in on]),
      },
    local gpuWorkload = workload([['gpu', 'gpu']]),
    local portWorkload = workload([['device', 'rdma_device']]),
    local pciWorkload = workload([['gpu', 'gpu'], ['rdma_device', 'rdma_device']]),
    local nicWorkload = workload([['rdma_device', 'rdma_device']]),
    // A netdev alert's expression `x` with the RDMA port behind the netdev and its rail
    // (railscope:netdev_port:info), or with rail "none" for a netdev that has no RDMA port (a
    // plain Ethernet NIC).
    local indented(x, by) = std.strReplace(std.rstripChars(x, '\n'), '\n', '\n' + by),
    local netdevPort(x) = |||
      (
        %(x2)s
      )
      * on (%(cluster)s, instance, netdev) group_left (device, port, rail) railscope:netdev_port:info
      or on (%(cluster)s, instance, netdev)
      label_replace(
        (
          %(x4)s
        ),
        "rail", "none", "", ""
      )
    ||| % (p { x2: indented(x, '  '), x4: indented(x, '    ') }),
    // A netdev that is administratively down: not up, and no carrier reading (the kernel
    // answers EINVAL for the carrier of a netdev that is not IFF_UP). Its module may read dark
    // on purpose.
    local adminDown = |||
      (railscope_netdev_up{%(selector)s} == 0 unless on (%(cluster)s, instance, netdev) railscope_netdev_carrier{%(selector)s})
    ||| % p,
    // How a netdev alert names its port: the node, the netdev, its RDMA port if it has one,
    // and its rail.
    local nd = '{{ $labels.instance }} {{ $labels.netdev }} ({{ with $labels.device }}{{ . }} port {{ $labels.port }}, {{ end }}rail {{ $labels.rail }})',
    // The same for a devlink device (or its port), with the RDMA devices of its PCI function.
    local dl = '{{ $labels.instance }} {{ $labels.devlink }}{{ with $labels.port }} port {{ . }}{{ end }} ({{ with $labels.device }}{{ . }}, {{ end }}rail {{ $labels.rail }})',
    // A devlink reporter alert's expression `x` with the rail of its RDMA device (the first
    // port's), or rail "none" (no RDMA device, or several).
    local devlinkRail(x) = |||
      (
        %(x2)s
      )
      * on (%(cluster)s, instance, device) group_left (rail) topk by (%(cluster)s, instance, device) (1, railscope:port_rail:info)
      or on (%(cluster)s, instance, devlink, port, reporter)
      label_replace(
        (
          %(x4)s
        ),
        "rail", "none", "", ""
      )
    ||| % (p { x2: indented(x, '  '), x4: indented(x, '    ') }),
    // A threshold of a transceiver module, by level, where the module advertises one (0 W,
    // 0 A or 0 °C is "none").
    local thr(metric, level) = '(%s{%s, level="%s"} > 0)' % [metric, p.selector, level],
    // The last 10 minutes of latched flags: a flag the module raised since the previous read
    // shows for 10 minutes, however short the fault was.
    local flagged(metric, flags) = 'max_over_time(%s{%s, flag=~"%s"}[10m]) == 1' % [metric, p.selector, flags],
    // A PromQL query for a description: the value of `metric` with `level` for the alert's
    // netdev, in a template.
    local thrValue(metric, level, fmt) =
      "{{ with printf `%s{%s,%s='%%s',instance='%%s',netdev='%%s',level='%s'}` (or $labels.%s \"\") $labels.instance $labels.netdev | query }}{{ . | first | value | %s }}{{ else }}none{{ end }}" % [metric, p.selector, p.cluster, level, p.cluster, fmt],
    // The alerts on a port or netdev that name the switch port at its far end when it is
    // known: each gets the labels `neighbour` and `neighbour_port` from
    // railscope:port_neighbour:info (joined on the RDMA port, or for netdev alerts on the
    // netdev), and its summary ends with "→ <switch> port <port>". A port whose neighbour is
    // not known fires as before, without them: the alert never waits for the neighbour. The
    // labels let Alertmanager inhibit them beneath RailscopeSwitchSuspect (same `neighbour`).
    // A neighbour that appears or changes while the alert fires makes it a new alert.
    local neighbourOn = {
      [a]: 'device, port'
      for a in [
        'RailscopePortDown',
        'RailscopePortRateBelowExpected',
        'RailscopePortWidthBelowExpected',
        'RailscopeLinkFlapping',
        'RailscopeSymbolErrorsAboveBER',
        'RailscopeLinkErrorRecovery',
        'RailscopeReceiveErrors',
        'RailscopePmaCounterSaturated',
        'RailscopeRoCEMTUBelow4096',
        'RailscopeRoCEPortWithoutV2GID',
        'RailscopeGIDTableChanged',
        'RailscopeRoCERetransmissions',
        'RailscopeRDMAOutOfBuffer',
        'RailscopeCNPSurge',
        'RailscopeRailImbalance',
        'RailscopePortRateBelowPeers',
        'RailscopePortWidthBelowPeers',
        'RailscopeMTUMismatch',
      ]
    } + {
      [a]: 'netdev'
      for a in [
        'RailscopePFCPauseStorm',
        'RailscopePFCStormEvents',
        'RailscopeTransceiverRxPowerLowWarning',
        'RailscopeTransceiverRxPowerLowAlarm',
        'RailscopeTransceiverLaneImbalance',
        'RailscopeTransceiverTxOutOfRange',
        'RailscopeTransceiverLossOfSignal',
        'RailscopeTransceiverFault',
        'RailscopeTransceiverAlarmFlag',
        'RailscopeTransceiverTemperatureHigh',
        'RailscopeTransceiverUnreadable',
        'RailscopePreFECBERHigh',
        'RailscopeFECUncorrectableBlocks',
        'RailscopeNetdevLinkFlapping',
        'RailscopeNetdevLinkDownReason',
        'RailscopeNeighbourPFCMismatch',
      ]
    },
    local neighbourSuffix = '{{ with $labels.neighbour }} → {{ . }} port {{ $labels.neighbour_port }}{{ end }}',
    // (`topk`: one switch per port or netdev even if two links ever named one, so that the
    // join can never fail and take the alert with it.)
    local withNeighbour(x, on) =
      local info = 'railscope:port_neighbour:info{%s!=""}' % (if on == 'netdev' then 'netdev' else 'device');
      |||
        (
          %(x2)s
        )
        * on (%(cluster)s, instance, %(on)s) group_left (neighbour, neighbour_port) topk by (%(cluster)s, instance, %(on)s) (1, %(info)s)
        or
        (
          %(x2)s
        )
        unless on (%(cluster)s, instance, %(on)s) %(info)s
      ||| % (p { x2: indented(x, '  '), on: on, info: info }),
    local neighbourAlerts(groups) =
      local unknown = [a for a in std.objectFields(neighbourOn) if !std.member([r.alert for g in groups for r in g.rules], a)];
      assert std.length(unknown) == 0 : 'neighbourOn names no alert: ' + std.join(', ', unknown);
      [
        g {
          rules: [
            if std.objectHas(neighbourOn, r.alert) then r {
              expr: withNeighbour(r.expr, neighbourOn[r.alert]),
              annotations+: { summary: super.summary + neighbourSuffix },
            } else r
            for r in g.rules
          ],
        }
        for g in groups
      ],
    // How the neighbour alerts name a link: the node, the RDMA port and/or netdev, the rail.
    local link = '{{ $labels.instance }} {{ with $labels.netdev }}{{ . }} {{ end }}({{ with $labels.device }}{{ . }} port {{ $labels.port }}, {{ end }}rail {{ $labels.rail }})',
    // A neighbour series `x` (labels device, port, netdev, protocol) with the rail and the
    // switch's name and port from railscope:port_neighbour:info, or rail "none" where the
    // link has no neighbour known.
    local neighbourLink(x) = |||
      (
        %(x2)s
      )
      * on (%(cluster)s, instance, device, port, netdev) group_left (rail, neighbour, neighbour_port) railscope:port_neighbour:info
      or on (%(cluster)s, instance, device, port, netdev)
      label_replace(
        (
          %(x4)s
        ),
        "rail", "none", "", ""
      )
    ||| % (p { x2: indented(x, '  '), x4: indented(x, '    ') }),
    groups+: lib.finish($._config, neighbourAlerts([
      {
        name: 'railscope.fabric',
        rules: [
          {
            alert: 'RailscopePortDown',
            expr: |||
              (
                railscope_ib_port_state{%(selector)s} != 4
                # A driver that does not report a physical state prints "0: <unknown>" (iWARP
                # on older kernels): the port state alone says whether it is up.
                or (railscope_ib_port_phys_state{%(selector)s} != 5 and railscope_ib_port_phys_state{%(selector)s} != 0)
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) is not ACTIVE/LinkUp',
              description: "Logical state {{ with printf `railscope_ib_port_state{%(selector)s,%(cluster)s='%%s',instance='%%s',device='%%s',port='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.device $labels.port | query }}{{ . | first | value }}{{ end }} (4 is ACTIVE), physical state {{ with printf `railscope_ib_port_phys_state{%(selector)s,%(cluster)s='%%s',instance='%%s',device='%%s',port='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.device $labels.port | query }}{{ . | first | value }}{{ end }} (5 is LinkUp)." % p,
            } + portWorkload,
          },
          // A port the node had in the last goneLookback is gone while its agent is up and its
          // infiniband collector succeeded: the NIC fell off the bus, its firmware died, or the
          // driver removed it. Every other port alert needs the port's series, so none fires.
          // A node down is RailscopeAgentDown's (up is 0, so this stays silent); an agent
          // restart or a reboot brings the port back under the same name within minutes.
          {
            alert: 'RailscopePortGone',
            expr: |||
              (
                max by (%(cluster)s, instance, device, port, rail) (max_over_time(railscope:port_rail:info[%(goneLookback)s]))
                unless on (%(cluster)s, instance, device, port) railscope:port_rail:info
              )
              and on (%(cluster)s, instance) (up{%(selector)s} == 1)
              and on (%(cluster)s, instance) (railscope_collector_success{%(selector)s, collector="infiniband"} == 1)
            ||| % p,
            'for': '10m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) is gone',
              description: 'The node had this RDMA port in the last %(goneLookback)s and no longer lists it, while its agent is up: the NIC fell off the PCIe bus, its firmware stopped answering, or its driver removed it.' % p,
            },
          },
          // Needs the configured expectations of expectations.example.yml; silent without them.
          {
            alert: 'RailscopePortRateBelowExpected',
            expr: |||
              # In Gb/s, as ibstat and the switch print it.
              (
                railscope:ib_port_rate_bytes_per_second:by_model * 8 / 1e9
                < on (hca_type) group_left () (railscope:ib_port_rate_bytes_per_second:expected * 8 / 1e9)
              )
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) trained at {{ $value }} Gb/s, below the {{ with printf `railscope:ib_port_rate_bytes_per_second:expected{hca_type='%s'} * 8 / 1e9` $labels.hca_type | query }}{{ . | first | value }}{{ end }} Gb/s configured for {{ $labels.hca_type }}",
              description: 'The port is ACTIVE below the expected rate of its adapter model: a degraded cable, transceiver or speed setting, even if its peers share the fault.',
            } + portWorkload,
          },
          {
            alert: 'RailscopePortWidthBelowExpected',
            expr: |||
              (
                railscope:ib_port_link_width_lanes:by_model
                < on (hca_type) group_left () railscope:ib_port_link_width_lanes:expected
              )
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) runs {{ $value }} lanes, fewer than configured for {{ $labels.hca_type }}',
              description: "A link that trained at fewer lanes than its model's configured width has lost lanes to a bad cable or connector.",
            } + portWorkload,
          },
          {
            alert: 'RailscopeLinkFlapping',
            expr: |||
              (
                increase(railscope_ib_port_link_downed_total{%(selector)s}[1h]) > %(linkFlaps)s
                or on (%(cluster)s, instance, device, port) changes(railscope_ib_port_state{%(selector)s}[30m]) > %(linkFlaps)s
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) is flapping',
              description: 'The link went down and recovered repeatedly in the last hour. Each flap stalls every collective on the rail.',
            } + portWorkload,
          },
          // IBTA requires a bit error rate below 1e-12; symbol errors per second above
          // rate_bits_per_second * 1e-12 exceed it.
          {
            alert: 'RailscopeSymbolErrorsAboveBER',
            expr: |||
              (
                rate(railscope_ib_port_symbol_errors_total{%(selector)s}[15m])
                > on (%(cluster)s, instance, device, port) (railscope_ib_port_rate_bytes_per_second{%(selector)s} * 8 * %(symbolErrorBER)s)
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) has {{ $value | humanize }} symbol errors/s, above the %(symbolErrorBER)s BER limit' % p,
              description: 'Symbol errors at this rate mean a marginal cable or transceiver; link error recovery and retransmissions follow.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeLinkErrorRecovery',
            expr: |||
              (increase(railscope_ib_port_link_error_recovery_total{%(selector)s}[1h]) > 0)
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) went through link error recovery',
              description: 'Each recovery retrains the link and stalls traffic on it.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeReceiveErrors',
            expr: |||
              (
                rate(railscope_ib_port_receive_errors_total{%(selector)s}[10m]) > 0
                or on (%(cluster)s, instance, device, port) rate(railscope_ib_port_transmit_discards_total{%(selector)s}[10m]) > 0
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) is receiving errors or discarding packets',
              description: 'PortRcvErrors or PortXmitDiscards keep rising: damaged packets on the link, or congestion upstream.',
            } + portWorkload,
          },
          {
            alert: 'RailscopePmaCounterSaturated',
            expr: |||
              (railscope_ib_port_pma_saturated{%(selector)s} == 1)
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}): PMA counter {{ $labels.counter }} is saturated',
              description: 'PMA counters stick at their maximum instead of wrapping: {{ $labels.counter }} can no longer show new errors, so rate alerts on it are blind. Clear the counters (perfquery -R) after diagnosing.',
            },
          },
          {
            alert: 'RailscopeRoCEMTUBelow4096',
            expr: |||
              (
                railscope_ib_port_active_mtu_bytes{%(selector)s} < %(roceMTUBytes)s
                and on (%(cluster)s, instance, device, port) railscope_ib_port_info{%(selector)s, link_layer="Ethernet"}
                # iWARP (node type RNIC) has an Ethernet link layer but no RoCE MTU or GIDs.
                unless on (%(cluster)s, instance, device) railscope_ib_device_info{%(selector)s, node_type="RNIC"}
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
              unless on (%(cluster)s, instance, device, port) railscope:port_outside_rails:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) RoCE active MTU is {{ $value }}',
              description: 'The netdev MTU is below 4192 (mlx5) so RDMA runs at a smaller MTU; RoCE fabrics are normally set to 4096 with a netdev MTU of 4200 or 9000.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeRoCEPortWithoutV2GID',
            expr: |||
              (
                railscope_ib_port_gid_entries{%(selector)s, type="RoCE v2"} == 0
                and on (%(cluster)s, instance, device, port) railscope_ib_port_info{%(selector)s, link_layer="Ethernet", state="ACTIVE"}
                unless on (%(cluster)s, instance, device) railscope_ib_device_info{%(selector)s, node_type="RNIC"}
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
              unless on (%(cluster)s, instance, device, port) railscope:port_outside_rails:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) has no RoCE v2 GID',
              description: 'Without a RoCE v2 GID (an IP address on the netdev) NCCL cannot use RoCE v2 on this port.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeGIDTableChanged',
            // Entries added or removed change the count; an address swapped for another at
            // the same index does not, but it makes a GID series that was not there 30 minutes
            // ago, on a port that had GIDs then (a port or node that just appeared is no change).
            expr: |||
              (
                changes(railscope:ib_port_gid_entries:sum[30m]) > 0
                or on (%(cluster)s, instance, device, port)
                (
                  count by (%(cluster)s, instance, device, port) (
                    railscope_ib_port_gid_info{%(selector)s} unless railscope_ib_port_gid_info{%(selector)s} offset 30m
                  )
                  and on (%(cluster)s, instance, device, port)
                  count by (%(cluster)s, instance, device, port) (railscope_ib_port_gid_info{%(selector)s} offset 30m)
                )
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            labels: { severity: 'info' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}): GID table changed',
              description: 'Addresses on the netdev changed; jobs that cached a GID index (NCCL_IB_GID_INDEX) may now use the wrong one.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeRoCERetransmissions',
            expr: |||
              (
                sum by (%(cluster)s, instance, device, port) (
                  rate(railscope_rdma_port_hw_stat_total{%(selector)s, counter=~"local_ack_timeout_err|out_of_sequence|packet_seq_err|implied_nak_seq_err"}[5m])
                ) > %(roceRetransmissionsPerSecond)s
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) retransmits {{ $value | humanize }}/s',
              description: 'ACK timeouts, out-of-sequence packets and sequence-error NAKs mean packets are lost in the fabric: check PFC, ECN and buffer drops on the path.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeRDMAOutOfBuffer',
            expr: |||
              (rate(railscope_rdma_port_hw_stat_total{%(selector)s, counter="out_of_buffer"}[5m]) > 0)
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) drops {{ $value | humanize }} packets/s for lack of receive buffers',
              description: 'out_of_buffer counts packets dropped because a receive queue had no posted WQE: the application is not posting receives fast enough, and senders retransmit.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeCNPSurge',
            expr: |||
              (
                sum by (%(cluster)s, instance, device, port) (
                  rate(railscope_rdma_port_hw_stat_total{%(selector)s, counter=~"np_cnp_sent|rp_cnp_handled|np_ecn_marked_roce_packets"}[5m])
                ) > %(cnpPerSecond)s
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) sees {{ $value | humanize }} CNPs and ECN marks/s',
              description: 'Congestion notification packets at this rate mean sustained congestion on the path (ECN marking at a switch); DCQCN is throttling senders.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeRailImbalance',
            expr: |||
              (
                railscope:ib_port_data_bytes:rate5m
                * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info{rail!="none"}
                and on (%(cluster)s, instance, device, port) railscope:port_in_use:info
              )
              < on (%(cluster)s, instance) group_left () (%(railImbalanceRatio)s * railscope:ib_port_data_bytes:rate5m_rail_median)
              and on (%(cluster)s, instance) railscope:ib_port_data_bytes:rate5m_rail_median > %(railBusyBytesPerSecond)s
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} rail {{ $labels.rail }} ({{ $labels.device }} port {{ $labels.port }}) carries {{ $value | humanize }}B/s, under %(railImbalancePercent)s%% of the median of its sibling rails' % p,
              description: 'While the node is busy (median rail above %(railBusyGBps)s GB/s) every rail whose GPU is busy should carry about the same traffic; one that carries much less is degraded or not used by NCCL. Idle nodes, and rails whose GPU is idle (a job on fewer GPUs than rails), never fire.' % p,
            } + portWorkload,
          },
          // Fraction of time a priority is paused: rate() of the pause duration in seconds.
          {
            alert: 'RailscopePFCPauseStorm',
            expr: |||
              (
                max by (%(cluster)s, instance, netdev, priority, direction) (rate(railscope_pfc_pause_duration_seconds_total{%(selector)s}[5m])) > %(pfcPauseFraction)s
              )
              * on (%(cluster)s, instance, netdev) group_left (device, port, rail) railscope:netdev_port:info
              or on (%(cluster)s, instance, netdev, priority, direction)
              max by (%(cluster)s, instance, netdev, priority, direction) (rate(railscope_pfc_pause_duration_seconds_total{%(selector)s}[5m])) > %(pfcPauseFraction)s
            ||| % p,
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.netdev }}{{ if $labels.device }} ({{ $labels.device }} port {{ $labels.port }}, rail {{ $labels.rail }}){{ end }} is paused {{ $value | humanizePercentage }} of the time on priority {{ $labels.priority }} ({{ if eq $labels.direction "rx" }}pauses received: its transmit is held back{{ else }}pauses sent: it cannot drain{{ end }})',
              description: 'A PFC pause storm: the link spends this share of its time paused while drop counters read zero. Find the receiver that cannot drain (a slow host, a stuck NIC) and the switch port spreading the pauses.',
            } + portWorkload,
          },
          {
            alert: 'RailscopePFCStormEvents',
            expr: |||
              (increase(railscope_pfc_pause_storm_events_total{%(selector)s}[15m]) > 0)
              * on (%(cluster)s, instance, netdev) group_left (device, port, rail) railscope:netdev_port:info
              or on (%(cluster)s, instance, netdev, level)
              increase(railscope_pfc_pause_storm_events_total{%(selector)s}[15m]) > 0
            ||| % p,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.netdev }}{{ if $labels.device }} ({{ $labels.device }} port {{ $labels.port }}, rail {{ $labels.rail }}){{ end }} raised pause storm {{ $labels.level }} events',
              description: 'The NIC detected that it kept sending pause frames for too long (the pause storm prevention watermark); at error level it stops honouring PFC to protect the fabric.',
            } + portWorkload,
          },
        ],
      },
      {
        // Fleet-wide: a port compared with its peers across the cluster, a rail's errors across
        // its nodes. Over recording rules only (railscope.fleet.recording and the node-local
        // ones), for a global ruler; railscope.fleet.rules.yml holds them.
        name: 'railscope.fleet',
        rules: [
          {
            alert: 'RailscopePortRateBelowPeers',
            expr: |||
              # In Gb/s, as ibstat and the switch print it.
              (
                railscope:ib_port_rate_bytes_per_second:by_model * 8 / 1e9
                < on (%(cluster)s, hca_type, rail) group_left () (railscope:ib_port_rate_bytes_per_second:median_by_model * 8 / 1e9)
              )
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) trained at {{ $value }} Gb/s, below the {{ with printf `railscope:ib_port_rate_bytes_per_second:median_by_model{%(cluster)s='%%s',hca_type='%%s',rail='%%s'} * 8 / 1e9` (or $labels.%(cluster)s \"\") $labels.hca_type $labels.rail | query }}{{ . | first | value }}{{ end }} Gb/s of its {{ $labels.hca_type }} peers on the rail" % p,
              description: 'The port is ACTIVE at a lower rate than other {{ $labels.hca_type }} ports in the fleet: a degraded cable, transceiver or port speed setting. Training jobs on this rail run at its pace.',
            } + portWorkload,
          },
          {
            alert: 'RailscopePortWidthBelowPeers',
            expr: |||
              (
                railscope:ib_port_link_width_lanes:by_model
                < on (%(cluster)s, hca_type, rail) group_left () railscope:ib_port_link_width_lanes:median_by_model
              )
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) runs {{ $value }} lanes, fewer than the {{ with printf `railscope:ib_port_link_width_lanes:median_by_model{%(cluster)s='%%s',hca_type='%%s',rail='%%s'}` (or $labels.%(cluster)s \"\") $labels.hca_type $labels.rail | query }}{{ . | first | value }}{{ end }} of its {{ $labels.hca_type }} peers on the rail" % p,
              description: 'A link that trained at fewer lanes (2X instead of 4X) has lost lanes to a bad cable or connector.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeMTUMismatch',
            expr: |||
              (
                railscope:ib_port_active_mtu_bytes:by_link_layer
                < on (%(cluster)s, link_layer) group_left () railscope:ib_port_active_mtu_bytes:median_by_link_layer
              )
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "{{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} (rail {{ $labels.rail }}) has active MTU {{ $value }}, below the fleet's {{ $labels.link_layer }} ports",
              description: 'Queue pairs use the smaller MTU of both ends: every peer of this port sends smaller packets.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeRailErrorsAcrossFleet',
            expr: |||
              railscope:rail_link_errors:rate15m
              > on (%(cluster)s) group_left ()
              (%(railErrorsMedianFactor)s * quantile by (%(cluster)s) (0.5, railscope:rail_link_errors:rate15m))
              and railscope:rail_link_errors:rate15m > %(railErrorsPerSecond)s
              # A switch, not a cable: the errors come from several of the rail's nodes.
              and on (%(cluster)s, rail) railscope:rail_link_errors:nodes >= %(railErrorsMinNodes)s
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Rail {{ $labels.rail }} logs {{ $value | humanize }} link errors/s across the fleet, over %(railErrorsMedianFactor)sx the median rail' % p,
              description: "Errors concentrated on one rail across many nodes point at that rail's leaf switch or its cabling, not at the nodes.",
            },
          },
          // Errors or flaps on the ports of several nodes behind one switch (by its name, from
          // LLDP or the IB NodeDescription) at once: the switch, not the nodes' cables. One
          // alert per switch naming its faulty ports and nodes; it hides those ports' own
          // alerts (alerts/alertmanager.example.yml, equal `neighbour`). Its `for` is shorter
          // than that of the error alerts (10 and 15 minutes), so that it is there first; the
          // flap alerts have none and may come first, then are held back while it fires.
          {
            alert: 'RailscopeSwitchSuspect',
            expr: |||
              count by (%(cluster)s, neighbour) (
                max by (%(cluster)s, neighbour, instance) (railscope:neighbour_port_faults:info)
              ) >= %(switchSuspectNodes)s
            ||| % p,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              local m = "%(cluster)s='%%[1]s', neighbour='%%[2]s'" % p,
              local args = ' (or $labels.%(cluster)s "") $labels.neighbour' % p,
              local ports = '`max by (instance, device, port, netdev, neighbour_port, fault) (railscope:neighbour_port_faults:info{' + m + '})`',
              summary: 'Switch {{ $labels.neighbour }}: errors or flaps on ports of {{ $value }} nodes behind it ({{ $sep := "" }}{{ range printf `count by (instance) (railscope:neighbour_port_faults:info{' + m + '})`' + args + ' | query | sortByLabel "instance" }}{{ $sep }}{{ label "instance" . }}{{ $sep = ", " }}{{ end }})',
              description: '{{ $sep := "" }}Ports behind the switch with errors or flaps: '
                           + '{{ range printf ' + ports + args + ' | query | sortByLabel "instance" }}'
                           + '{{ $sep }}{{ label "instance" . }} {{ if label "device" . }}{{ label "device" . }} port {{ label "port" . }}{{ else }}{{ label "netdev" . }}{{ end }} (switch port {{ label "neighbour_port" . }}: {{ label "fault" . }}){{ $sep = ", " }}{{ end }}'
                           + '. Several nodes failing on one switch at once point at the switch (a line card, its power or cooling, a firmware fault), not at each cable: look at the switch first. The ports\' own alerts are held back beneath this one.',
            },
          },
          // A node whose rail port lands on another leaf group than the rail's majority group
          // (railscope:rail_neighbour_group:majority: more than railMiscabledMajority of the
          // rail's nodes, on a rail with at least railMiscabledMinNodes reporting a switch).
          // The group is the switch's name by default (neighbourGroupRegex): right where each
          // rail has one leaf; where a rail spans several leaves no leaf has a majority and it
          // stays silent until neighbourGroupRegex names the groups. A rail without a majority
          // group never fires.
          {
            alert: 'RailscopeRailMiscabled',
            expr: |||
              max by (%(cluster)s, instance, rail, neighbour, expected_neighbour) (
                (
                  railscope:rail_neighbour:info{neighbour_group!=""}
                  unless on (%(cluster)s, rail, neighbour_group) railscope:rail_neighbour_group:majority
                )
                * on (%(cluster)s, rail) group_left (expected_neighbour)
                (0 * label_replace(railscope:rail_neighbour_group:majority, "expected_neighbour", "$1", "neighbour_group", "(.*)") + 1)
              )
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} rail {{ $labels.rail }} is cabled to {{ $labels.neighbour }}, not to {{ $labels.expected_neighbour }} as most of its peers on the rail',
              description: "More than %(railMiscabledMajorityPercent)s%% of the rail's nodes reach leaf group {{ $labels.expected_neighbour }} on this rail (by neighbourGroupRegex on the switch name); this node's rail port reaches {{ $labels.neighbour }}. Traffic of the rail crosses the spine from this node, or the cable is in another rail's leaf: NCCL's rail-local paths break. Check the cabling plan." % p,
            },
          },
          // A multi-node NVLink domain (an NVL72 rack: 18 trays of 4 GPUs in one clique) with
          // fewer healthy GPUs than it is expected to have: a GPU down, unhealthy or degraded in
          // its fabric, or no longer reported. One alert per domain, however many trays are at
          // fault; the description names each. Critical: the domain spans nodes, and a job placed
          // across it fails or slows on every one of them. It hides the GPU alerts of the same
          // fault on the domain's nodes (alerts/alertmanager.example.yml); its `for` is shorter
          // than theirs, so that it is there first.
          {
            alert: 'RailscopeNVLinkDomainDegraded',
            expr: |||
              railscope:nvlink_domain_gpus:healthy
              < on (%(cluster)s, cluster_uuid, clique_id) railscope:nvlink_domain_gpus:expected
            ||| % p,
            'for': '1m',
            labels: { severity: 'critical' },
            annotations: {
              local m = "%(cluster)s='%%[1]s', cluster_uuid='%%[2]s', clique_id='%%[3]s'" % p,
              local args = ' (or $labels.%(cluster)s "") $labels.cluster_uuid $labels.clique_id' % p,
              local gpuAt = '{{ $sep }}{{ label "instance" . }}{{ with label "tray" . }} tray {{ . }}{{ end }}{{ with label "slot" . }} slot {{ . }}{{ end }} GPU {{ label "gpu" . }}',
              summary: 'NVLink domain {{ $labels.cluster_uuid }} clique {{ $labels.clique_id }} has {{ $value }} of {{ with printf `railscope:nvlink_domain_gpus:expected{' + m + '}`' + args + ' | query }}{{ . | first | value }}{{ end }} GPUs healthy',
              description: '{{ $sep := "" }}GPUs at fault: '
                           + '{{ range printf `max by (instance, tray, slot, gpu, fault) (railscope:nvlink_domain_gpu:info{' + m + ', fault!="none"})`' + args
                           + ' | query | sortByLabel "gpu" | sortByLabel "instance" }}' + gpuAt + ' ({{ label "fault" . }}){{ $sep = ", " }}{{ end }}'
                           + '{{ range printf `max by (instance, tray, slot, gpu) (max_over_time(railscope:nvlink_domain_gpu:info{' + m + '}[%(nvlinkDomainLookback)s])) unless on (instance, gpu) railscope:nvlink_domain_gpu:info{' % p + m + '}`' + args
                           + ' | query | sortByLabel "gpu" | sortByLabel "instance" }}' + gpuAt + ' (not reported){{ $sep = ", " }}{{ end }}'
                           + '{{ if not $sep }}none reported; the domain has fewer GPUs than thresholds.nvlinkDomainGPUs{{ end }}'
                           + '. Every job placed across the domain runs on its NVLink fabric: it fails, or runs at the pace of the worst GPU.',
            },
          },
        ],
      },
      {
        name: 'railscope.pcie',
        rules: [
          {
            alert: 'RailscopePCIeWidthDegraded',
            expr: |||
              (railscope_pci_link_width_lanes{%(selector)s} < railscope_pci_link_max_width_lanes{%(selector)s})
              * on (%(cluster)s, instance, pci_address) group_left (role, rdma_device, gpu) railscope_pci_device_info{%(selector)s, role=~"nic|gpu"}
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.role }} {{ $labels.rdma_device }}{{ $labels.gpu }} at {{ $labels.pci_address }} runs PCIe x{{ $value }}, below its maximum',
              description: 'A NIC on x8 instead of x16 has half its PCIe bandwidth: the RDMA port cannot be fed at line rate.',
            } + pciWorkload,
          },
          // GPUs drop their link speed when idle to save power, so only a GPU that stays below
          // its maximum while busy is a fault; NICs never downclock.
          {
            alert: 'RailscopePCIeSpeedDegraded',
            expr: |||
              (railscope_pci_link_speed_transfers_per_second{%(selector)s} < railscope_pci_link_max_speed_transfers_per_second{%(selector)s})
              * on (%(cluster)s, instance, pci_address) group_left (role, rdma_device, gpu) railscope_pci_device_info{%(selector)s, role="nic"}
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} NIC {{ $labels.rdma_device }} at {{ $labels.pci_address }} runs PCIe at {{ $value | humanize }}T/s per lane, below its maximum',
              description: 'The PCIe link trained at a lower generation: a riser, slot or BIOS setting.',
            } + pciWorkload,
          },
          {
            alert: 'RailscopePCIeAERCorrectable',
            expr: |||
              (rate(railscope_pci_aer_errors_total{%(selector)s, severity="correctable"}[15m]) > %(aerCorrectablePerSecond)s)
              * on (%(cluster)s, instance, pci_address) group_left (role, rdma_device, gpu) railscope_pci_device_info{%(selector)s}
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.role }} {{ $labels.rdma_device }}{{ $labels.gpu }} at {{ $labels.pci_address }} logs {{ $value | humanize }} correctable PCIe errors/s',
              description: 'Correctable AER errors climbing (RxErr, BadTLP, BadDLLP) are a marginal PCIe link: replays cost bandwidth and it may fail outright.',
            } + pciWorkload,
          },
          {
            alert: 'RailscopePCIeAERUncorrectable',
            expr: |||
              # The AER class moves to `aer_severity`: the alert's own `severity` label would
              # otherwise make a device's nonfatal and fatal series one and the same alert.
              label_replace(
                increase(railscope_pci_aer_errors_total{%(selector)s, severity=~"nonfatal|fatal"}[1h]) > 0,
                "aer_severity", "$1", "severity", "(.*)"
              )
              * on (%(cluster)s, instance, pci_address) group_left (role, rdma_device, gpu) railscope_pci_device_info{%(selector)s}
            ||| % p,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.role }} {{ $labels.rdma_device }}{{ $labels.gpu }} at {{ $labels.pci_address }} logged an uncorrectable ({{ $labels.aer_severity }}) PCIe error',
              description: 'Uncorrectable PCIe errors (completion timeouts, malformed TLPs) lose transactions; the device may need a reset.',
            } + pciWorkload,
          },
          {
            alert: 'RailscopeNICFarFromGPU',
            expr: |||
              (min by (%(cluster)s, instance, device) (railscope_topology_nic_gpu_distance{%(selector)s}) >= %(nicGPUDistance)s)
              # A NIC on a rail without a GPU (a front-end NIC on a GPU node) is not for GPUDirect.
              * on (%(cluster)s, instance, device) group_left (rail) max by (%(cluster)s, instance, device, rail) (railscope_rail_info{%(selector)s, gpu!=""})
            ||| % p,
            'for': '30m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} {{ $labels.device }} (rail {{ $labels.rail }}) has no GPU closer than the CPU (nearest distance {{ $value }})',
              description: 'GPUDirect RDMA from this NIC crosses host bridges (NODE) or sockets (SYS): bandwidth drops, and NCCL_NET_GDR_LEVEL may refuse GPUDirect entirely.',
            },
          },
          {
            alert: 'RailscopeACSRedirect',
            expr: 'railscope_pci_acs_state{%(selector)s, state="redirect"} == 1' % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} bridge {{ $labels.pci_address }} redirects peer-to-peer traffic (ACS)',
              description: 'ACS request/completion redirect on a switch port sends GPU↔NIC traffic up to the root complex: GPUDirect RDMA slows down or fails.',
            },
          },
          // A NIC sensor (the ASIC, or the transceiver module in its cage) within
          // nicTemperatureMarginCelsius of the critical threshold its driver reports. A
          // threshold of 0 is none (a module that reports no alarm levels). The rail comes from
          // the function's RDMA device; an Ethernet NIC without one, or a port on no rail, is
          // rail "none".
          {
            alert: 'RailscopeNICTemperatureNearCritical',
            expr: |||
              (
                railscope_nic_temperature_celsius{%(selector)s}
                >= railscope_nic_temperature_critical_celsius{%(selector)s} - %(nicTemperatureMarginCelsius)s
                and railscope_nic_temperature_critical_celsius{%(selector)s} > 0
              )
              * on (%(cluster)s, instance, device) group_left (rail) topk by (%(cluster)s, instance, device) (1, railscope:port_rail:info)
              or on (%(cluster)s, instance, pci_address, channel)
              label_replace(
                railscope_nic_temperature_celsius{%(selector)s}
                >= railscope_nic_temperature_critical_celsius{%(selector)s} - %(nicTemperatureMarginCelsius)s
                and railscope_nic_temperature_critical_celsius{%(selector)s} > 0,
                "rail", "none", "", ""
              )
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} NIC {{ $labels.pci_address }}{{ with $labels.device }} ({{ . }}){{ end }} (rail {{ $labels.rail }}) {{ $labels.sensor }} at {{ $value }} °C, within %(nicTemperatureMarginCelsius)s °C of its critical threshold' % p,
              description: "Critical threshold {{ with printf `railscope_nic_temperature_critical_celsius{%(selector)s,%(cluster)s='%%s',instance='%%s',pci_address='%%s',channel='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.pci_address $labels.channel | query }}{{ . | first | value }}{{ end }} °C. A transceiver past its threshold shuts its laser down and the link drops; an ASIC past it throttles or the firmware shuts the NIC down. Usually airflow: a failed fan, a blocked vent, a hot aisle." % p,
            } + portWorkload,
          },
        ],
      },
      {
        // Transceiver modules (the transceiver collector: module EEPROM read over ethtool
        // netlink), compared with the alarm and warning thresholds each module advertises. A
        // threshold of 0 is one the module does not advertise: nothing fires on it.
        name: 'railscope.transceiver',
        rules: [
          {
            alert: 'RailscopeTransceiverRxPowerLowWarning',
            expr: netdevPort(|||
              10 * log10(1000 * clamp_min(
                railscope_transceiver_rx_power_watts{%(selector)s}
                < on (%(cluster)s, instance, netdev) group_left () %(lowWarning)s,
                1e-7
              ))
              unless on (%(cluster)s, instance, netdev) %(adminDown)s
            ||| % (p { lowWarning: thr('railscope_transceiver_rx_power_threshold_watts', 'low_warning'), adminDown: std.rstripChars(adminDown, '\n') })),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' lane {{ $labels.lane }} receives {{ printf "%.1f" $value }} dBm, below the low warning level of its transceiver',
              description: 'The low warning level the module advertises is ' + std.strReplace(thrValue('10 * log10(1000 * railscope_transceiver_rx_power_threshold_watts', 'low_warning', 'printf "%.1f"'), "level='low_warning'}`", "level='low_warning'})`") + ' dBm. Less light than the module is specified for reaches the receiver: a dirty or damaged connector, a bent or long fibre, or a weak laser at the far end. Errors before FEC rise, then the link drops.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeTransceiverRxPowerLowAlarm',
            expr: netdevPort(|||
              10 * log10(1000 * clamp_min(
                railscope_transceiver_rx_power_watts{%(selector)s}
                < on (%(cluster)s, instance, netdev) group_left () %(lowAlarm)s,
                1e-7
              ))
              unless on (%(cluster)s, instance, netdev) %(adminDown)s
            ||| % (p { lowAlarm: thr('railscope_transceiver_rx_power_threshold_watts', 'low_alarm'), adminDown: std.rstripChars(adminDown, '\n') })),
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: nd + ' lane {{ $labels.lane }} receives {{ printf "%.1f" $value }} dBm, below the low alarm level of its transceiver',
              description: 'The low alarm level the module advertises is ' + std.strReplace(thrValue('10 * log10(1000 * railscope_transceiver_rx_power_threshold_watts', 'low_alarm', 'printf "%.1f"'), "level='low_alarm'}`", "level='low_alarm'})`") + ' dBm. Below it the receiver is outside its specification: the link corrects more errors than FEC can (frames lost, RDMA retransmits) or drops. Every collective on the rail runs at its pace.',
            } + portWorkload,
          },
          // One lane much darker than its module's others: one fibre of the cable, or one
          // spot of the connector, is dirty or damaged (the module and the far end's laser
          // are shared by all lanes). A module whose lanes are all dark is not compared.
          {
            alert: 'RailscopeTransceiverLaneImbalance',
            expr: netdevPort(|||
              (
                10 * log10(
                  max by (%(cluster)s, instance, netdev) (railscope_transceiver_rx_power_watts{%(selector)s})
                  / on (%(cluster)s, instance, netdev) group_right ()
                  clamp_min(railscope_transceiver_rx_power_watts{%(selector)s}, 1e-7)
                ) > %(transceiverLaneImbalanceDb)s
              )
              and on (%(cluster)s, instance, netdev) (max by (%(cluster)s, instance, netdev) (railscope_transceiver_rx_power_watts{%(selector)s}) > %(transceiverLaneLitWatts)s)
              unless on (%(cluster)s, instance, netdev) %(adminDown)s
            ||| % (p { adminDown: std.rstripChars(adminDown, '\n') })),
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' lane {{ $labels.lane }} receives {{ printf "%%.1f" $value }} dB less light than the brightest lane of its module' % p,
              description: 'More than %(transceiverLaneImbalanceDb)s dB under its sibling lanes for 15 minutes: a dirty or scratched connector end face, or a damaged fibre of the cable, on this lane. The lane corrects more errors and fails first.' % p,
            } + portWorkload,
          },
          {
            alert: 'RailscopeTransceiverTxOutOfRange',
            expr: netdevPort(|||
              (
                label_replace(label_replace(
                  railscope_transceiver_tx_bias_amperes{%(selector)s} > on (%(cluster)s, instance, netdev) group_left () %(biasHigh)s,
                  "measure", "tx_bias", "", ""), "limit", "high_alarm", "", "")
                or
                label_replace(label_replace(
                  railscope_transceiver_tx_bias_amperes{%(selector)s} < on (%(cluster)s, instance, netdev) group_left () %(biasLow)s,
                  "measure", "tx_bias", "", ""), "limit", "low_alarm", "", "")
                or
                label_replace(label_replace(
                  railscope_transceiver_tx_power_watts{%(selector)s} > on (%(cluster)s, instance, netdev) group_left () %(powerHigh)s,
                  "measure", "tx_power", "", ""), "limit", "high_alarm", "", "")
                or
                label_replace(label_replace(
                  railscope_transceiver_tx_power_watts{%(selector)s} < on (%(cluster)s, instance, netdev) group_left () %(powerLow)s,
                  "measure", "tx_power", "", ""), "limit", "low_alarm", "", "")
              )
              unless on (%(cluster)s, instance, netdev) %(adminDown)s
            ||| % (p {
                     biasHigh: thr('railscope_transceiver_tx_bias_threshold_amperes', 'high_alarm'),
                     biasLow: thr('railscope_transceiver_tx_bias_threshold_amperes', 'low_alarm'),
                     powerHigh: thr('railscope_transceiver_tx_power_threshold_watts', 'high_alarm'),
                     powerLow: thr('railscope_transceiver_tx_power_threshold_watts', 'low_alarm'),
                     adminDown: std.rstripChars(adminDown, '\n'),
                   })),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' lane {{ $labels.lane }} {{ if eq $labels.measure "tx_bias" }}laser bias current{{ else }}transmit power{{ end }} {{ $value | humanize }}{{ if eq $labels.measure "tx_bias" }}A{{ else }}W{{ end }} is beyond its {{ $labels.limit }} threshold',
              description: "The module's laser on this lane runs outside the range its vendor specifies: a laser wearing out draws more bias current for the same light, and one failing gives too little or too much light. The far end's receive power and errors follow; replace the module.",
            } + portWorkload,
          },
          // Loss of signal or of lock, latched by the module since the previous read, on a
          // link that is up now: the light or the clock went away and came back (a link down
          // is RailscopePortDown's and RailscopeNetdevLinkFlapping's, with its reason).
          {
            alert: 'RailscopeTransceiverLossOfSignal',
            expr: netdevPort(|||
              (%(flags)s)
              and on (%(cluster)s, instance, netdev) (railscope_netdev_up{%(selector)s} == 1)
            ||| % (p { flags: flagged('railscope_transceiver_lane_flag', 'rx_los|tx_los|rx_lol|tx_lol') })),
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' lane {{ $labels.lane }} transceiver reported {{ $labels.flag }} in the last 10 minutes',
              description: 'rx_los: no light reached the receiver; tx_los: no signal from the NIC reached the transmitter; rx_lol/tx_lol: the clock and data recovery lost lock. The link is up now, so the loss was brief: a loose connector, a fibre moved, or a marginal module, which takes the link down next.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeTransceiverFault',
            expr: netdevPort(|||
              (%(lane)s)
              or (%(module)s)
            ||| % (p { lane: flagged('railscope_transceiver_lane_flag', 'tx_fault'), module: flagged('railscope_transceiver_module_flag', 'module_fault') })),
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' transceiver reported {{ $labels.flag }}{{ with $labels.lane }} on lane {{ . }}{{ end }}',
              description: 'tx_fault: a laser of the module failed; module_fault: the module itself reports a fault. Its link is down or will be; replace the module.',
            } + portWorkload,
          },
          // The module's own alarm flags: latched, they catch excursions between two reads
          // that the values never show.
          {
            alert: 'RailscopeTransceiverAlarmFlag',
            expr: netdevPort(|||
              (
                (%(lane)s)
                or (%(module)s)
              )
              unless on (%(cluster)s, instance, netdev) %(adminDown)s
            ||| % (p {
                     lane: flagged('railscope_transceiver_lane_flag', '.*_alarm'),
                     module: flagged('railscope_transceiver_module_flag', '.*_alarm'),
                     adminDown: std.rstripChars(adminDown, '\n'),
                   })),
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' transceiver raised alarm {{ $labels.flag }}{{ with $labels.lane }} on lane {{ . }}{{ end }} in the last 10 minutes',
              description: "The module compared a reading with its alarm thresholds and raised the flag at least once since the previous read: the reading was out of range, perhaps only between two scrapes. See the panel of that reading.",
            } + portWorkload,
          },
          // The module's temperature against its own high warning level. The hwmon view of
          // the same module (RailscopeNICTemperatureNearCritical, sensor module0) is hidden
          // while this fires for the same RDMA device (alerts/alertmanager.example.yml).
          {
            alert: 'RailscopeTransceiverTemperatureHigh',
            expr: netdevPort(|||
              railscope_transceiver_temperature_celsius{%(selector)s}
              >= on (%(cluster)s, instance, netdev) group_left () (%(highWarning)s - %(transceiverTemperatureMarginCelsius)s)
            ||| % (p { highWarning: thr('railscope_transceiver_temperature_threshold_celsius', 'high_warning') })),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' transceiver at {{ $value }} °C, at its high warning level',
              description: 'Warning level ' + thrValue('railscope_transceiver_temperature_threshold_celsius', 'high_warning', 'printf "%.0f"') + ' °C, alarm ' + thrValue('railscope_transceiver_temperature_threshold_celsius', 'high_alarm', 'printf "%.0f"') + ' °C. Past its alarm level a module shuts its laser down and the link drops. Usually airflow, or a module of a higher power class than the cage cools.',
            } + portWorkload,
          },
          {
            alert: 'RailscopeTransceiverUnreadable',
            expr: netdevPort(|||
              railscope_transceiver_up{%(selector)s} == 0
            ||| % p),
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' transceiver module cannot be read',
              description: 'The NIC supports reading module EEPROM, and reading this one failed for 15 minutes: the module was removed or is not seated, or its management interface is stuck. Its readings and flags are missing, so no other transceiver alert sees it.',
            } + portWorkload,
          },
        ],
      },
      {
        // The PHY (the phy collector: FEC and link state over ethtool netlink; the ethtool
        // collector's mlx5 counters where the driver gives FEC statistics only there).
        name: 'railscope.phy',
        rules: [
          // Pre-FEC BER over an hour against the level of the FEC mode in use. PAM4 links
          // correct errors all the time: only a trend above the mode's level means lost
          // margin.
          {
            alert: 'RailscopePreFECBERHigh',
            expr: netdevPort(|||
              railscope:phy_pre_fec_ber:rate1h > on (%(cluster)s, instance, netdev) group_left (active) (0 * railscope_phy_fec_info{%(selector)s, active=~"rs"} + %(preFecBerRsThreshold)s)
              or railscope:phy_pre_fec_ber:rate1h > on (%(cluster)s, instance, netdev) group_left (active) (0 * railscope_phy_fec_info{%(selector)s, active=~"llrs"} + %(preFecBerLlrsThreshold)s)
              or railscope:phy_pre_fec_ber:rate1h > on (%(cluster)s, instance, netdev) group_left (active) (0 * railscope_phy_fec_info{%(selector)s, active=~"baser"} + %(preFecBerBaseRThreshold)s)
              or railscope:phy_pre_fec_ber:rate1h > on (%(cluster)s, instance, netdev) group_left (active) (0 * railscope_phy_fec_info{%(selector)s, active=~"off|none"} + %(preFecBerNoFecThreshold)s)
            ||| % p),
            'for': '1h',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' pre-FEC bit error rate is {{ printf "%%.2g" $value }} over the last hour, above the level for {{ $labels.active }} FEC' % p,
              description: 'Levels: RS %(preFecBerRsThreshold)s, LLRS %(preFecBerLlrsThreshold)s, BASE-R %(preFecBerBaseRThreshold)s, no FEC %(preFecBerNoFecThreshold)s (bits corrected per bit of link rate). The link still delivers its frames, but its margin before the FEC runs out is going: a connector, cable or module degrading. Uncorrectable blocks and link downs follow.' % p,
            } + portWorkload,
          },
          {
            alert: 'RailscopeFECUncorrectableBlocks',
            expr: netdevPort(|||
              increase(railscope_phy_fec_uncorrectable_blocks_total{%(selector)s}[15m]) > %(fecUncorrectableBlocks)s
            ||| % p),
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ' FEC could not correct {{ printf "%%.0f" $value }} blocks in 15 minutes' % p,
              description: 'Each uncorrectable block is a frame dropped at the receiver: RDMA retransmits it (RailscopeRoCERetransmissions) and the job stalls. Sustained for 15 minutes above %(fecUncorrectableBlocks)s per 15 minutes: the link is past what its FEC corrects.' % p,
            } + portWorkload,
          },
          {
            alert: 'RailscopeNetdevLinkFlapping',
            expr: netdevPort(|||
              increase(railscope_phy_link_down_events_total{%(selector)s}[15m]) > %(netdevLinkDownEvents)s
              or on (%(cluster)s, instance, netdev)
              increase(railscope_netdev_carrier_changes_total{%(selector)s}[15m]) / 2 > %(netdevLinkDownEvents)s
            ||| % p),
            labels: { severity: 'warning' },
            annotations: {
              local q = "max by (state, substate) (max_over_time(railscope_phy_link_ext_state{%(selector)s,%(cluster)s='%%s',instance='%%s',netdev='%%s'}[15m]))" % p,
              summary: nd + ' link went down {{ printf "%.0f" $value }} times in 15 minutes'
                       + '{{ with printf `' + q + '` (or $labels.' + p.cluster + ' "") $labels.instance $labels.netdev | query | sortByLabel "state" }}'
                       + ' (reason: {{ $sep := "" }}{{ range . }}{{ $sep }}{{ label "state" . }}{{ with label "substate" . }} {{ . }}{{ end }}{{ $sep = ", " }}{{ end }}){{ end }}',
              description: 'More than %(netdevLinkDownEvents)s link downs in 15 minutes (the PHY\'s link down count, or carrier changes where the driver has none); the reason is the extended link state the kernel reported while the link was down. Each flap stalls every collective on the rail.' % p,
            } + portWorkload,
          },
          // Context while a link is down: the kernel's extended link state says why. Info:
          // RailscopePortDown is the page; `no_cable` hides the transceiver alerts of the netdev.
          {
            alert: 'RailscopeNetdevLinkDownReason',
            expr: netdevPort(|||
              railscope_phy_link_ext_state{%(selector)s} == 1
              and on (%(cluster)s, instance, netdev) (railscope_phy_link_up{%(selector)s} == 0)
            ||| % p),
            'for': '2m',
            labels: { severity: 'info' },
            annotations: {
              summary: nd + ' link is down: {{ $labels.state }}{{ with $labels.substate }} ({{ . }}){{ end }}',
              description: 'The driver reports why the link is not up (the extended link state, which `ethtool <netdev>` prints after "Link detected: no"): no_cable, a module or cable issue, link training or autonegotiation failing, bad signal integrity. It says where to look first.',
            } + portWorkload,
          },
        ],
      },
      {
        // devlink health reporters (the devlink collector): the driver's own view of its
        // firmware and queues.
        name: 'railscope.devlink',
        rules: [
          {
            alert: 'RailscopeDevlinkFirmwareFatal',
            expr: devlinkRail(|||
              railscope_devlink_health_reporter_healthy{%(selector)s, reporter="fw_fatal"} == 0
              or on (%(cluster)s, instance, devlink, port, reporter)
              increase(railscope_devlink_health_reporter_errors_total{%(selector)s, reporter="fw_fatal"}[1h]) > 0
            ||| % p),
            labels: { severity: 'critical' },
            annotations: {
              summary: dl + ' firmware hit a fatal error',
              description: "The driver's fw_fatal health reporter saw the NIC's firmware crash within the last hour: the device was reset (auto-recover) or is down until recovered. Every queue pair on it failed; jobs using it died or hung. Its port alerts are hidden while this fires.",
            } + portWorkload,
          },
          {
            alert: 'RailscopeDevlinkHealthReporterErrors',
            expr: devlinkRail(|||
              railscope_devlink_health_reporter_healthy{%(selector)s, reporter!="fw_fatal"} == 0
              # A firmware syndrome is worth a look at its first; a queue that timed out and was
              # recovered only when it recurs.
              or on (%(cluster)s, instance, devlink, port, reporter)
              increase(railscope_devlink_health_reporter_errors_total{%(selector)s, reporter="fw"}[1h]) > 0
              or on (%(cluster)s, instance, devlink, port, reporter)
              increase(railscope_devlink_health_reporter_errors_total{%(selector)s, reporter!~"fw|fw_fatal"}[1h]) > %(devlinkReporterErrors)s
            ||| % p),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: dl + ' health reporter {{ $labels.reporter }} is in error or counting errors',
              description: 'The reporter is in error now, or counted errors in the last hour (fw: any; the others, such as tx and rx, more than %(devlinkReporterErrors)s). fw: the firmware reported a syndrome (an assert); tx/rx: a send or receive queue timed out or got an error completion and was recovered. Each recovery stalls the traffic of the queue it resets.' % p,
            } + portWorkload,
          },
        ],
      },
      {
        name: 'railscope.gpu',
        rules: [
          {
            alert: 'RailscopeGPULost',
            expr: |||
              (railscope_gpu_state{%(selector)s, state=~"lost|timeout"} == 1)
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) is {{ $labels.state }}',
              description: 'lost: the GPU fell off the bus (NVML GPU_IS_LOST, XID 79); timeout: NVML calls on it hang in the driver. Either way every job using it is stuck.',
            } + gpuWorkload,
          },
          // "No XIDs" and "cannot see XIDs" look the same in railscope_gpu_xid_errors_total.
          // A GPU that is lost or hung has its own alert.
          // A GPU (by UUID) the node had in the last goneLookback is gone while the agent's gpu
          // collector succeeds: it fell off the bus and the driver no longer enumerates it (after
          // a driver reload, or from the start of a new agent). Matched by UUID: NVML renumbers
          // the remaining GPUs.
          {
            alert: 'RailscopeGPUGone',
            expr: |||
              (
                max by (%(cluster)s, instance, gpu, %(gpuIdentity)s) (max_over_time(railscope:gpu_identity:info{uuid!=""}[%(goneLookback)s]))
                unless on (%(cluster)s, instance, uuid) railscope_gpu_info{%(selector)s}
              )
              and on (%(cluster)s, instance) (up{%(selector)s} == 1)
              and on (%(cluster)s, instance) (railscope_collector_success{%(selector)s, collector="gpu"} == 1)
            ||| % p,
            'for': '10m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ $labels.pci_address }}, {{ $labels.uuid }}, serial {{ $labels.serial }}) is gone',
              description: 'The node had this GPU in the last %(goneLookback)s and the driver no longer lists it, while the agent is up: it fell off the bus (XID 79 before a driver reload) or failed to initialise.' % p,
            },
          },
          {
            alert: 'RailscopeGPUXidEventsUnavailable',
            expr: |||
              (
                railscope_gpu_xid_events_registered{%(selector)s} == 0
                unless on (%(cluster)s, instance, gpu) (railscope_gpu_state{%(selector)s, state=~"lost|timeout"} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) cannot report XID errors',
              description: "railscope could not register for this GPU's XID events (the driver or the VM refuses it), so a hardware XID on it would raise no alert. railscope tries again every minute.",
            },
          },
          // NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
          // by its immediate action. The GPU must be reset or the node rebooted: the GPU, its memory
          // or its links failed. It keeps firing for a day after the XID so that the page stays
          // until someone acts on it (silence it once the GPU was reset or the node drained).
          {
            alert: 'RailscopeGPUXidHardware',
            expr: xidExpr(p.xidHardware),
            keep_firing_for: $._config.xidHardwareKeepFiringFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) reported hardware XID {{ $labels.xid }}: {{ if eq $labels.xid `46` }}GPU stopped processing{{ else if eq $labels.xid `48` }}double-bit ECC error{{ else if eq $labels.xid `64` }}GPU memory remapping failure{{ else if eq $labels.xid `74` }}NVLink error{{ else if eq $labels.xid `79` }}GPU has fallen off the bus{{ else if eq $labels.xid `95` }}uncontained memory error{{ else if eq $labels.xid `119` }}GSP RPC timeout{{ else if eq $labels.xid `120` }}GSP error{{ else if eq $labels.xid `136` }}link training failed{{ else if eq $labels.xid `140` }}unrecovered ECC error{{ else if eq $labels.xid `143` }}GPU initialization error{{ else if eq $labels.xid `155` }}NVLink software-defined error{{ else if eq $labels.xid `156` }}resource retirement event{{ else if eq $labels.xid `158` }}GPU fatal timeout{{ end }}',
              description: "NVIDIA's immediate action for this XID: {{ if eq $labels.xid `46` }}reset the GPU{{ else if eq $labels.xid `48` }}reset the GPU to activate the row remap (nvidia-smi -q -d ROW_REMAPPER: a remap failure means RMA){{ else if eq $labels.xid `64` }}reset the GPU, then open a support case{{ else if eq $labels.xid `74` }}check the NVLink error counters, then reset the GPU{{ else if eq $labels.xid `79` }}reboot the node{{ else if eq $labels.xid `95` }}reset the GPU{{ else if eq $labels.xid `119` }}reset the GPU{{ else if eq $labels.xid `120` }}reset the GPU{{ else if eq $labels.xid `136` }}reset the GPU{{ else if eq $labels.xid `140` }}reset the GPU{{ else if eq $labels.xid `143` }}reset the GPU{{ else if eq $labels.xid `155` }}reset the GPU{{ else if eq $labels.xid `156` }}reset the GPU{{ else if eq $labels.xid `158` }}reset the GPU{{ end }}. dmesg names it with the GPU's PCI address: dmesg -T | grep -i xid.",
            } + gpuWorkload,
          },
          // NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
          // by its immediate action. The GPU went on working, but asks for attention: a contained
          // memory error (restart the application that hit it), a high single-bit error rate, or
          // the driver changing the recovery action it wants (XID 154). XID 63 (a row remap
          // recorded) raises nothing here: RailscopeGPURowRemapPending says when to reset.
          {
            alert: 'RailscopeGPUXidWarning',
            expr: xidExpr(p.xidWarning),
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) reported warning XID {{ $labels.xid }}: {{ if eq $labels.xid `92` }}high single-bit ECC error rate{{ else if eq $labels.xid `94` }}contained memory error{{ else if eq $labels.xid `154` }}GPU recovery action changed{{ end }}',
              description: "NVIDIA's immediate action for this XID: {{ if eq $labels.xid `92` }}nothing at once; open a support case if it repeats{{ else if eq $labels.xid `94` }}restart the application that hit it; other applications are unaffected{{ else if eq $labels.xid `154` }}do what the driver now asks: dmesg names the new action (reset, reboot or drain){{ end }}. dmesg names it with the GPU's PCI address: dmesg -T | grep -i xid.",
            } + gpuWorkload,
          },
          // NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
          // by its immediate action. Usually caused by the application: restart it. Repeated on one
          // GPU only, suspect the GPU.
          {
            alert: 'RailscopeGPUXidApplication',
            expr: xidExpr(p.xidApplication),
            labels: { severity: 'info' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) reported application XID {{ $labels.xid }}: {{ if eq $labels.xid `13` }}graphics engine exception{{ else if eq $labels.xid `31` }}GPU memory page fault{{ else if eq $labels.xid `43` }}GPU stopped processing{{ else if eq $labels.xid `45` }}preemptive cleanup after an earlier error{{ end }}',
              description: "NVIDIA's immediate action for this XID: {{ if eq $labels.xid `13` }}restart the application{{ else if eq $labels.xid `31` }}restart the application{{ else if eq $labels.xid `43` }}none (the application's channel was stopped){{ else if eq $labels.xid `45` }}follow the XID that came before it{{ end }}. dmesg names it with the GPU's PCI address: dmesg -T | grep -i xid.",
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeGPUECCUncorrectable',
            expr: |||
              (increase(railscope_gpu_ecc_errors_total{%(selector)s, type="uncorrected", scope="volatile"}[1h]) > 0)
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) had uncorrectable ECC errors',
              description: 'Uncorrectable memory errors kill the process that touched the memory; the GPU needs a reset to remap the row.',
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeGPURowRemapFailure',
            expr: |||
              (railscope_gpu_remapped_rows_failure{%(selector)s} == 1)
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) failed to remap a memory row',
              description: 'The GPU has no spare rows left for a failing memory row: it needs service (RMA).',
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeGPURowRemapPending',
            expr: |||
              (railscope_gpu_remapped_rows_pending{%(selector)s} == 1)
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '30m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) has a row remap pending',
              description: 'A failing memory row is remapped at the next GPU reset; until then the row can fail again. Reset the GPU when it is idle.',
            } + gpuWorkload,
          },
          // The driver's own word after an error (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): it holds
          // until the action is done, so this fires until someone acts, whatever the XID was.
          {
            alert: 'RailscopeGPURecoveryActionRequired',
            expr: |||
              (railscope_gpu_recovery_action{%(selector)s, action!="none"} == 1)
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) needs {{ $labels.action }}, says its driver',
              description: "After an uncorrectable error the driver asks for a recovery action: gpu_reset (stop the GPU's processes, nvidia-smi -r), node_reboot, drain_p2p (stop peer-to-peer traffic, then look again) or drain_and_reset. It stays until the action is done.",
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeGPUThrottling',
            expr: |||
              (max by (%(cluster)s, instance, gpu) (railscope_gpu_throttle_reason{%(selector)s, reason=~"hw_slowdown|hw_thermal_slowdown|sw_thermal_slowdown|hw_power_brake_slowdown"}) == 1)
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) has been thermally or power throttled for 15 minutes',
              description: 'Hardware slowdown, thermal slowdown or power brake hold the clocks down; in a synchronous job every rank waits for this GPU. Check cooling and the power supply.',
            } + gpuWorkload,
          },
          // The share of time the clocks were held down, from the driver's clock event counters
          // (railscope_gpu_clock_event_seconds_total): unlike RailscopeGPUThrottling, which needs
          // the reason active at every evaluation for 15 minutes, it also catches a GPU that
          // throttles on and off. Thermal: software (the driver, above the maximum operating
          // temperature) or hardware (the GPU's own protection) slowdown.
          {
            alert: 'RailscopeGPUThermalSlowdown',
            expr: |||
              (
                # The larger of the two shares, not their sum: both are often active at once.
                max by (%(cluster)s, instance, gpu) (
                  rate(railscope_gpu_clock_event_seconds_total{%(selector)s, reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}[5m])
                ) > %(gpuThermalSlowdownFraction)s
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) spent {{ $value | humanizePercentage }} of the last 5 minutes in thermal slowdown',
              description: 'For 10 minutes the GPU has spent over %(gpuThermalSlowdownPercent)s%% of its time with its clocks held down for heat (sw_thermal_slowdown, hw_thermal_slowdown); in a synchronous job every rank waits for it. Check its cooling, and whether its siblings run hot too.' % p,
            } + gpuWorkload,
          },
          // The power brake is an external signal (HW_POWER_BRAKE_SLOWDOWN): the system's power
          // supplies or the rack's power shelf assert it when they cannot deliver the power the
          // node draws, and the GPU drops its clocks at once. It is never part of normal
          // operation, hence the low level; one-off events stay below it for 10 minutes.
          {
            alert: 'RailscopeGPUPowerBrake',
            expr: |||
              (
                rate(railscope_gpu_clock_event_seconds_total{%(selector)s, reason="hw_power_brake_slowdown"}[5m]) > %(gpuPowerBrakeFraction)s
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) spent {{ $value | humanizePercentage }} of the last 5 minutes held down by the power brake',
              description: 'For 10 minutes the power supplies or the power shelf have asserted the power brake over %(gpuPowerBrakePercent)s%% of the time: the node lost power capacity (a failed or unplugged PSU, a power shelf in protection) and its GPUs drop their clocks while it lasts. Check the power supplies; several nodes of one rack at once point at its power shelf.' % p,
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeGPUPCIeWidthDegraded',
            expr: |||
              (railscope_gpu_pcie_link_width_lanes{%(selector)s} < railscope_gpu_pcie_link_max_width_lanes{%(selector)s})
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) runs PCIe x{{ $value }}, below its maximum',
              description: "Fewer PCIe lanes halve the GPU's host and GPUDirect bandwidth (the generation also drops at idle, so only width is alerted).",
            } + gpuWorkload,
          },
          // Grace-Blackwell's NVLink-C2C, between the GPU and its Grace CPU: a link down, or, on a
          // GPU whose driver says C2C is enabled (railscope_gpu_c2c_enabled), links missing: no
          // link series at all, or fewer than the GPU's C2C link count (railscope_gpu_c2c_links).
          // A GPU with C2C disabled raises nothing, whatever its links read. A GPU without C2C
          // (Hopper on x86, PCIe cards) has none of these series and never fires; one whose
          // driver does not say whether C2C is enabled fires on a link down only.
          {
            alert: 'RailscopeGPUC2CLinkDown',
            expr: |||
              (
                (
                  railscope_gpu_c2c_link_up{%(selector)s} == 0
                  unless on (%(cluster)s, instance, gpu) (railscope_gpu_c2c_enabled{%(selector)s} == 0)
                  or
                  (
                    railscope_gpu_c2c_enabled{%(selector)s} == 1
                    unless on (%(cluster)s, instance, gpu) (
                      count by (%(cluster)s, instance, gpu) (railscope_gpu_c2c_link_up{%(selector)s})
                      unless on (%(cluster)s, instance, gpu)
                      (
                        count by (%(cluster)s, instance, gpu) (railscope_gpu_c2c_link_up{%(selector)s})
                        < on (%(cluster)s, instance, gpu) railscope_gpu_c2c_links{%(selector)s}
                      )
                    )
                  )
                )
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) {{ if $labels.link }}NVLink-C2C link {{ $labels.link }} to its Grace CPU is down{{ else }}has NVLink-C2C enabled but not all of its C2C links{{ end }}',
              description: "A GPU with a C2C link down or missing reaches its CPU's memory at reduced bandwidth, or not at all over C2C: host-device copies and unified memory slow down.",
            } + gpuWorkload,
          },
          // The GPU's NVLink fabric health (nvmlDeviceGetGpuFabricInfoV, NVSwitch and multi-node
          // NVLink systems): routes unhealthy, a configuration the fabric rejects, or the health
          // summary unhealthy. Recoveries in progress (route_recovery, access_timeout_recovery)
          // are transient and raise nothing. A GPU whose driver does not report fabric health
          // has no such series and never fires.
          {
            alert: 'RailscopeGPUFabricUnhealthy',
            expr: |||
              (
                (
                  railscope_gpu_fabric_health{%(selector)s, condition=~"route_unhealthy|incorrect_configuration"} == 1
                  or on (%(cluster)s, instance, gpu)
                  label_replace(
                    max by (%(cluster)s, instance, job, gpu) (railscope_gpu_fabric_health_state{%(selector)s, state="unhealthy"} == 1),
                    "condition", "unhealthy", "", ""
                  )
                )
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) NVLink fabric health is {{ if eq $labels.condition `unhealthy` }}unhealthy{{ else }}{{ $labels.condition }}{{ end }}',
              description: 'The GPU reports unhealthy fabric routes, a configuration the fabric rejects (system GUID, chassis serial, no partition, too few NVLinks, firmware, location), or an unhealthy fabric: jobs that use NVLink through the fabric (NVSwitch peers, multi-node NVLink) fail or cannot start on it.',
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeGPUFabricDegraded',
            expr: |||
              (
                (
                  railscope_gpu_fabric_health{%(selector)s, condition="degraded_bandwidth"} == 1
                  or on (%(cluster)s, instance, gpu)
                  label_replace(
                    max by (%(cluster)s, instance, job, gpu) (railscope_gpu_fabric_health_state{%(selector)s, state="limited_capacity"} == 1),
                    "condition", "limited_capacity", "", ""
                  )
                )
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) NVLink fabric runs {{ if eq $labels.condition `degraded_bandwidth` }}at degraded bandwidth{{ else }}at limited capacity{{ end }}',
              description: 'The GPU reports its NVLink fabric bandwidth degraded (links or NVSwitch trunks down) or its fabric health at limited capacity: NVLink traffic through the fabric runs slower, and every rank of a synchronous job waits for it.',
            } + gpuWorkload,
          },
        ],
      },
      // The per-link NVLink rules read 18 links per GPU (on a DGX H100 node 144 link series
      // and 576 error counters, half the node's series): at fleet scale they were most of the
      // rule evaluation time (scripts/scale-bench). Their `for` and windows are minutes, so
      // they are evaluated every nvlinkRulesInterval rather than every evaluation interval.
      {
        name: 'railscope.nvlink',
        interval: $._config.nvlinkRulesInterval,
        rules: [
          {
            alert: 'RailscopeNVLinkInactive',
            expr: |||
              (
                railscope_nvlink_up{%(selector)s} == 0
                and on (%(cluster)s, instance, gpu) (sum by (%(cluster)s, instance, gpu) (railscope_nvlink_up{%(selector)s}) > 0)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) NVLink {{ $labels.link }} is down while its sibling links are up',
              description: 'A GPU with a missing NVLink runs its peer traffic at reduced bandwidth, and on NVSwitch systems the fabric reports degraded bandwidth.',
            } + gpuWorkload,
          },
          {
            alert: 'RailscopeNVLinkErrors',
            expr: |||
              (
                sum by (%(cluster)s, instance, gpu, link) (rate(railscope_nvlink_errors_total{%(selector)s, type=~"%(nvlinkErrorTypes)s"}[10m])) > %(nvlinkErrorsPerSecond)s
                or on (%(cluster)s, instance, gpu, link)
                sum by (%(cluster)s, instance, gpu, link) (increase(railscope_nvlink_errors_total{%(selector)s, type="recovery"}[1h])) > 0
                # NVLink5 counts recoveries by their result: a failed one took the link down.
                or on (%(cluster)s, instance, gpu, link)
                sum by (%(cluster)s, instance, gpu, link) (increase(railscope_nvlink_link_recovery_events_total{%(selector)s, result="failed"}[1h])) > 0
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % (p { nvlinkErrorTypes: nvlinkErrorTypes }),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) NVLink {{ $labels.link }} is logging data-link errors or recoveries',
              description: 'Climbing NVLink data-link errors (CRC and replays; on NVLink5 errors FEC left uncorrected, broken or dropped packets, failed link recoveries) are a failing link or connector; replays cost bandwidth and recoveries stall traffic.',
            } + gpuWorkload,
          },
          // NVLink5's FEC codeword histogram (railscope_nvlink_fec_history_total, bin n: the
          // codewords that needed about n symbol corrections): a link whose codewords climb into
          // the high bins (thresholds.nvlinkFecHighBin and up) is losing margin before it logs a
          // single uncorrected error. Healthy links fill the low bins at line rate; those never
          // count.
          {
            alert: 'RailscopeNVLinkFECHistoryRising',
            expr: |||
              (
                sum by (%(cluster)s, instance, gpu, link) (
                  rate(railscope_nvlink_fec_history_total{%(selector)s, bin=~"%(nvlinkFecHighBins)s"}[%(nvlinkFecWindow)s])
                ) > %(nvlinkFecHighBinPerSecond)s
                and on (%(cluster)s, instance, gpu) (railscope_gpu_up{%(selector)s} == 1)
              )
              * on (%(cluster)s, instance, gpu) group_left (%(gpuIdentity)s) railscope:gpu_identity:info
            ||| % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} ({{ with $labels.tray }}tray {{ . }}{{ with $labels.slot }} slot {{ . }}{{ end }}, {{ end }}{{ with $labels.pci_address }}{{ . }}, {{ end }}{{ with $labels.serial }}serial {{ . }}, {{ end }}rail {{ $labels.rail }}) NVLink {{ $labels.link }} corrects {{ $value | humanize }} codewords/s in FEC bins %(nvlinkFecHighBin)s and above' % p,
              description: 'Over %(nvlinkFecWindow)s the link corrected codewords that needed %(nvlinkFecHighBin)s or more symbol corrections at more than %(nvlinkFecHighBinPerSecond)s per second: its signal margin is going (a connector, cable cartridge or the NVSwitch port at the far end), and uncorrected errors, replays and a link down follow.' % p,
            } + gpuWorkload,
          },
          // An NVLink the GPU had in the last goneLookback is no longer reported while the GPU is
          // (and is not lost or hung).
          {
            alert: 'RailscopeNVLinkGone',
            expr: |||
              (
                max by (%(cluster)s, instance, gpu, link) (max_over_time(railscope_nvlink_up{%(selector)s}[%(goneLookback)s]))
                unless on (%(cluster)s, instance, gpu, link) railscope_nvlink_up{%(selector)s}
              )
              and on (%(cluster)s, instance, gpu) railscope_gpu_info{%(selector)s}
              # A lost or hung GPU reports no links: RailscopeGPULost says so.
              unless on (%(cluster)s, instance, gpu) (railscope_gpu_state{%(selector)s, state=~"lost|timeout"} == 1)
              and on (%(cluster)s, instance) (up{%(selector)s} == 1)
              and on (%(cluster)s, instance) (railscope_collector_success{%(selector)s, collector="gpu"} == 1)
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} GPU {{ $labels.gpu }} NVLink {{ $labels.link }} is gone',
              description: 'The GPU reported this NVLink in the last %(goneLookback)s and no longer does: the driver no longer sees the link (a fabric or NVSwitch fault), which RailscopeNVLinkInactive cannot show.' % p,
            } + gpuWorkload,
          },
        ],
      },
      {
        name: 'railscope.host',
        rules: [
          {
            alert: 'RailscopePeermemMissing',
            expr: |||
              railscope_host_gpudirect_rdma_module_loaded{%(selector)s} == 0
              and on (%(cluster)s, instance) count by (%(cluster)s, instance) (railscope_topology_gpu_info{%(selector)s}) > 0
              and on (%(cluster)s, instance) count by (%(cluster)s, instance) (railscope_ib_device_info{%(selector)s}) > 0
              # The open NVIDIA module on a 5.12+ kernel registers GPU memory through dma-buf.
              unless on (%(cluster)s, instance) (railscope_host_gpudirect_rdma_dmabuf_capable{%(selector)s} == 1)
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} has GPUs and RDMA NICs but nvidia_peermem is not loaded, and cannot use dma-buf instead',
              description: 'Without nvidia_peermem, and without dma-buf (the open NVIDIA kernel module on a 5.12+ kernel), the NICs cannot register GPU memory: NCCL falls back to staging through host memory, silently.',
            },
          },
          {
            alert: 'RailscopeIOMMUTranslated',
            expr: |||
              railscope_host_iommu_mode{%(selector)s, mode="translated"} == 1
              and on (%(cluster)s, instance) count by (%(cluster)s, instance) (railscope_topology_gpu_info{%(selector)s}) > 0
            ||| % p,
            'for': '30m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} runs its IOMMU in translated mode on a GPU node',
              description: 'Translated DMA costs peer-to-peer bandwidth or breaks GPUDirect RDMA; GPU nodes normally boot with iommu=pt.',
            },
          },
          {
            alert: 'RailscopeMemlockLimitSmall',
            expr: 'railscope_host_memlock_limit_bytes{%(selector)s, process="init", limit="soft"} < %(memlockBytes)s' % p,
            'for': '30m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} RLIMIT_MEMLOCK inherited from PID 1 is {{ $value | humanize1024 }}B',
              description: "RDMA memory registration pins memory and fails with ENOMEM past this limit (Couldn't allocate MR). Jobs need unlimited or at least the size of their buffers.",
            },
          },
        ],
      },
      {
        // Events only the kernel log shows (the kmsg collector): NVSwitch SXIDs, a ConnectX
        // firmware that stops answering, cable and module errors, PCIe slots losing their link
        // or their power. Each fires for 15 minutes after the event (railscope:kmsg_event:recent15m),
        // and not again when an agent restart re-reads the log.
        name: 'railscope.kernel',
        rules: [
          {
            alert: 'RailscopeNVSwitchFatalSXid',
            expr: 'railscope:kmsg_event:recent15m{kind="sxid", severity="fatal"}',
            keep_firing_for: $._config.xidHardwareKeepFiringFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} NVSwitch {{ $labels.pci_address }} logged fatal SXID {{ $labels.code }}',
              description: 'A fatal NVSwitch error: the NVLink fabric of this node is degraded or down, and jobs using it fail or run without NVLink. It keeps firing for a day, until someone acts and silences it.',
            },
          },
          {
            alert: 'RailscopeNVSwitchSXid',
            expr: 'railscope:kmsg_event:recent15m{kind="sxid", severity="nonfatal"}',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} NVSwitch {{ $labels.pci_address }} logged non-fatal SXID {{ $labels.code }}',
              description: 'A non-fatal NVSwitch error: the fabric recovered, but repeated SXIDs on one switch or link precede fatal ones.',
            },
          },
          {
            alert: 'RailscopeNICFirmwareUnresponsive',
            expr: |||
              max by (%(cluster)s, instance, job, pci_address, kind) (railscope:kmsg_event:recent15m{kind=~"mlx5_cmd_timeout|mlx5_health"})
              * on (%(cluster)s, instance, pci_address) group_left (rdma_device) railscope_pci_device_info{%(selector)s}
              or on (%(cluster)s, instance, pci_address)
              max by (%(cluster)s, instance, job, pci_address, kind) (railscope:kmsg_event:recent15m{kind=~"mlx5_cmd_timeout|mlx5_health"})
            ||| % p,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} NIC {{ $labels.pci_address }}{{ with $labels.rdma_device }} ({{ . }}){{ end }}: {{ if eq $labels.kind `mlx5_health` }}firmware health compromised{{ else }}firmware command timed out{{ end }}',
              description: 'The ConnectX firmware stopped answering commands or reported a fatal health syndrome: its port will drop or already has, and the driver may reset the device.',
            },
          },
          {
            alert: 'RailscopeNICModuleError',
            expr: |||
              railscope:kmsg_event:recent15m{kind="mlx5_module"}
              * on (%(cluster)s, instance, pci_address) group_left (rdma_device) railscope_pci_device_info{%(selector)s}
              or on (%(cluster)s, instance, pci_address)
              railscope:kmsg_event:recent15m{kind="mlx5_module"}
            ||| % p,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} NIC {{ $labels.pci_address }}{{ with $labels.rdma_device }} ({{ . }}){{ end }} reported a cable or module error',
              description: 'The transceiver or cable of this port reported an error (high temperature, power budget exceeded, bus stuck, unsupported cable): the link is down or about to be.',
            } + nicWorkload,
          },
          {
            alert: 'RailscopePCIeSlotLinkDown',
            expr: 'railscope:kmsg_event:recent15m{kind="pcie_link_down"}',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} PCIe slot at {{ $labels.pci_address }} lost its link',
              description: 'The PCIe hotplug port reported Link Down or Card not present: the device behind it (a NIC, a GPU, an NVMe drive) dropped off the bus.',
            },
          },
          {
            alert: 'RailscopePCIeSlotPowerInsufficient',
            expr: |||
              railscope:kmsg_event:recent15m{kind="pcie_power"}
              * on (%(cluster)s, instance, pci_address) group_left (rdma_device) railscope_pci_device_info{%(selector)s}
              or on (%(cluster)s, instance, pci_address)
              railscope:kmsg_event:recent15m{kind="pcie_power"}
            ||| % p,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} NIC {{ $labels.pci_address }}{{ with $labels.rdma_device }} ({{ . }}){{ end }} has insufficient slot power',
              description: 'The NIC detected that its PCIe slot cannot supply the power it needs: it may throttle, drop its link, or fail under load.',
            },
          },
        ],
      },
      // The expected inventory (the agent's config file, `expected`): a device the node
      // must have and does not, whether it vanished or was never there.
      {
        name: 'railscope.inventory',
        rules: [
          {
            alert: 'RailscopeInventoryMissing',
            expr: |||
              railscope_inventory_present{%(selector)s, kind=~"gpu|rdma_port"}
              < on (%(cluster)s, instance, kind) group_left () railscope_inventory_expected{%(selector)s}
            ||| % p,
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.instance }} has {{ $value }} {{ if eq $labels.kind "gpu" }}GPUs{{ else }}RDMA ports{{ end }}, fewer than its expected inventory',
              description: "The node must have {{ with printf `railscope_inventory_expected{%(selector)s,%(cluster)s='%%s',instance='%%s',kind='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.kind | query }}{{ . | first | value }}{{ end }}: a device fell off the bus, its driver did not bind, or the node booted without it. Its own series are gone, so no other alert sees it." % p,
            },
          },
          {
            alert: 'RailscopeInventoryDegraded',
            expr: |||
              railscope_inventory_present{%(selector)s, kind=~"rdma_port_up|nvlink_up"}
              < on (%(cluster)s, instance, kind) group_left () railscope_inventory_expected{%(selector)s}
            ||| % p,
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }} has {{ $value }} {{ if eq $labels.kind "nvlink_up" }}NVLinks up{{ else }}RDMA ports up at the expected rate and width{{ end }}, fewer than its expected inventory',
              description: "The node must have {{ with printf `railscope_inventory_expected{%(selector)s,%(cluster)s='%%s',instance='%%s',kind='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.kind | query }}{{ . | first | value }}{{ end }}: ports or links are down, or below the expected rate or width, so jobs get fewer rails or less bandwidth." % p,
            },
          },
        ],
      },
      {
        name: 'railscope.agent',
        rules: [
          {
            alert: 'RailscopeCollectorFailing',
            expr: 'railscope_collector_success{%(selector)s} == 0' % p,
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }}: railscope collector {{ $labels.collector }} fails',
              description: "The collector missed its deadline or could not run: its series are missing. Check the agent's log.",
            },
          },
          {
            alert: 'RailscopeCollectorErrors',
            expr: 'rate(railscope_collector_errors_total{%(selector)s}[15m]) > 0' % p,
            'for': '30m',
            labels: { severity: 'info' },
            annotations: {
              summary: '{{ $labels.instance }}: railscope collector {{ $labels.collector }} keeps hitting read errors',
              description: 'Some files cannot be read or parsed; their series are missing. The agent logs each distinct path and errno once.',
            },
          },
          {
            alert: 'RailscopeSysfsReadBlocked',
            expr: 'railscope_sysfs_blocked_seconds{%(selector)s} > %(sysfsBlockedSeconds)s' % p,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }}: a sysfs read under {{ $labels.path }} has been blocked for {{ $value | humanizeDuration }}',
              description: 'The driver behind this device does not answer: its series are missing until the read returns. A wedged driver usually fails the jobs that use the device next.',
            },
          },
          // Assumes the scrape job name contains "railscope".
          {
            alert: 'RailscopeAgentDown',
            expr: 'up{%(selector)s} == 0' % p,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.instance }}: railscope agent is not answering scrapes',
              description: 'Nothing on this node is monitored while the agent is down: check the service (systemctl status railscope) or the DaemonSet pod.',
            },
          },
          {
            alert: 'RailscopeScrapeSlow',
            expr: 'scrape_duration_seconds{%(selector)s} > %(scrapeSeconds)s' % p,
            'for': '15m',
            labels: { severity: 'info' },
            annotations: {
              summary: '{{ $labels.instance }}: railscope scrapes take {{ $value | humanizeDuration }}',
              description: 'A slow collector (a driver answering sysfs or NVML slowly) is close to the scrape timeout; see railscope_collector_duration_seconds for which one.',
            },
          },
        ],
      },
      {
        // The switch at the far end of each link (the neighbour collector): its settings that
        // the host's must match, and a neighbour that changed.
        name: 'railscope.neighbour',
        rules: [
          // IB: the switch port's own PortInfo (SMP) says it runs slower or narrower than the
          // host's port. Both ends of a link train together, so a difference that lasts past
          // the next SMP query (every 10 minutes) is a switch port set or stuck at a lower
          // speed or width, or an SMP answered for another port than this cable's.
          {
            alert: 'RailscopeNeighbourPortSlower',
            expr: neighbourLink(|||
              railscope_neighbour_rate_bytes_per_second{%(selector)s}
              < on (%(cluster)s, instance, device, port) group_left () railscope_ib_port_rate_bytes_per_second{%(selector)s}
              or on (%(cluster)s, instance, device, port, netdev, protocol)
              railscope_neighbour_link_width_lanes{%(selector)s}
              < on (%(cluster)s, instance, device, port) group_left () railscope_ib_port_link_width_lanes{%(selector)s}
            ||| % p),
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              local q(m) = "%s{%s,%s='%%s',instance='%%s',device='%%s',port='%%s'}" % [m, p.selector, p.cluster],
              local v(m, fmt) = '{{ with printf `' + q(m) + '` (or $labels.' + p.cluster + ' "") $labels.instance $labels.device $labels.port | query }}{{ . | first | value | ' + fmt + ' }}{{ else }}?{{ end }}',
              summary: link + ': the switch port runs slower than the host port{{ with $labels.neighbour }} → {{ . }} port {{ $labels.neighbour_port }}{{ end }}',
              description: 'Switch port: ' + v('railscope_neighbour_rate_bytes_per_second', 'humanize') + 'B/s on ' + v('railscope_neighbour_link_width_lanes', 'printf "%.0f"') + ' lanes; host port: '
                           + v('railscope_ib_port_rate_bytes_per_second', 'humanize') + 'B/s on ' + v('railscope_ib_port_link_width_lanes', 'printf "%.0f"')
                           + ' lanes. Check the switch port (`ibportstate` or the switch CLI): its enabled speeds and widths, and whether the cable is in the port the switch reports.',
            } + portWorkload,
          },
          // LLDP: the switch port's Maximum Frame Size is smaller than the frames the netdev's
          // MTU allows (MTU + neighbourFrameOverheadBytes): the switch drops every full-sized
          // frame, silently for the host.
          {
            alert: 'RailscopeNeighbourFrameSizeBelowMTU',
            expr: neighbourLink(|||
              railscope_neighbour_max_frame_size_bytes{%(selector)s}
              < on (%(cluster)s, instance, netdev) group_left ()
              (railscope_netdev_mtu_bytes{%(selector)s} + %(neighbourFrameOverheadBytes)s)
            ||| % p),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: link + ': the switch port takes frames of {{ $value }} bytes at most, less than the netdev MTU allows{{ with $labels.neighbour }} → {{ . }} port {{ $labels.neighbour_port }}{{ end }}',
              description: "Netdev MTU {{ with printf `railscope_netdev_mtu_bytes{%(selector)s,%(cluster)s='%%s',instance='%%s',netdev='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.netdev | query }}{{ . | first | value }}{{ end }} plus %(neighbourFrameOverheadBytes)s bytes of Ethernet header and FCS is more than the switch port's Maximum Frame Size (its LLDP IEEE 802.3 TLV): frames above it are dropped at the switch, and RDMA or TCP traffic that uses the full MTU stalls or retransmits. Raise the switch port's MTU, or lower the host's." % p,
            } + portWorkload,
          },
          // LLDP: where the switch sent its PFC Configuration TLV, a priority PFC is enabled on
          // at one end of the link only: pauses are sent that the other end ignores (drops
          // under congestion), or never sent (the lossless class is lossy).
          {
            alert: 'RailscopeNeighbourPFCMismatch',
            expr: netdevPort(|||
              max by (%(cluster)s, instance, netdev, priority, enabled_on) (
                label_replace(
                  railscope_dcb_pfc_enabled{%(selector)s} == 1
                  unless on (%(cluster)s, instance, netdev, priority) (railscope_neighbour_pfc_enabled{%(selector)s} == 1),
                  "enabled_on", "host", "", ""
                )
                and on (%(cluster)s, instance, netdev) railscope_neighbour_pfc_willing{%(selector)s}
                or
                label_replace(
                  railscope_neighbour_pfc_enabled{%(selector)s} == 1
                  unless on (%(cluster)s, instance, netdev, priority) (railscope_dcb_pfc_enabled{%(selector)s} == 1),
                  "enabled_on", "switch", "", ""
                )
                and on (%(cluster)s, instance, netdev) railscope_dcb_pfc_enabled{%(selector)s}
              )
            ||| % p),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: nd + ': PFC on priority {{ $labels.priority }} is enabled on the {{ $labels.enabled_on }} only',
              description: "The host's DCB PFC configuration and the switch port's (its LLDP PFC Configuration TLV{{ with printf `railscope_neighbour_pfc_willing{%(selector)s,%(cluster)s='%%s',instance='%%s',netdev='%%s'}` (or $labels.%(cluster)s \"\") $labels.instance $labels.netdev | query }}{{ if eq (. | first | value) 1.0 }}, willing: it takes the host's configuration if DCBX runs{{ end }}{{ end }}) differ: enabled on the host only, its pauses are ignored and the switch drops under congestion; on the switch only, the host never pauses it and RoCE on that priority is lossy. Make both ends enable the same priorities (the RoCE one)." % p,
            } + portWorkload,
          },
          // The switch or switch port at the far end changed: a cable moved, or a switch
          // renamed or replaced. Context for the other alerts of the link.
          {
            alert: 'RailscopeNeighbourChanged',
            expr: neighbourLink(|||
              increase(railscope_neighbour_changes_total{%(selector)s}[1h]) > 0
            ||| % p),
            labels: { severity: 'info' },
            annotations: {
              summary: link + ': the switch at the far end changed{{ with $labels.neighbour }}, now {{ . }} port {{ $labels.neighbour_port }}{{ end }}',
              description: "The neighbour's identity (switch name, chassis id, port, port description) changed in the last hour: a cable moved to another switch port, or the switch was renamed or replaced. Check the cabling plan if it was not expected.",
            },
          },
          // LLDP listens on a rail netdev and hears nothing: NIC firmware that consumes LLDP
          // (Intel's firmware LLDP agent; mlx5 DCBX in firmware), or a switch port without LLDP.
          // The switch-side alerts cannot see this link.
          {
            alert: 'RailscopeNeighbourNoLLDP',
            expr: |||
              (railscope_neighbour_status{%(selector)s, protocol=~"lldp|lldpd", status="no_frames"} == 1)
              * on (%(cluster)s, instance, netdev) group_left (rail) railscope:netdev_port:info{rail!="none"}
            ||| % p,
            'for': '1h',
            labels: { severity: 'info' },
            annotations: {
              summary: link + ': no LLDP from the switch',
              description: 'No LLDPDU came on this rail netdev within the LLDP timeout for an hour: the NIC firmware may consume LLDP (docs/collectors/neighbour.md, "Firmware LLDP agents"), or the switch port does not send it. The switch-side checks (frame size, PFC, miscabling) cannot see this link.',
            },
          },
          // SMPs to the switch are refused (M_Key) or unanswered.
          {
            alert: 'RailscopeNeighbourUnreachable',
            expr: |||
              (railscope_neighbour_status{%(selector)s, protocol="smp", status=~"refused|timeout"} == 1)
              * on (%(cluster)s, instance, device, port) group_left (rail) railscope:port_rail:info
            ||| % p,
            'for': '30m',
            labels: { severity: 'info' },
            annotations: {
              summary: link + ': the switch does not answer SMPs ({{ $labels.status }})',
              description: '`refused`: the switch answered the directed-route SMP with an error status (M_Key protection set by the subnet manager); `timeout`: no answer in 2 s. The far end of this port (its name, width and rate) is unknown.',
            },
          },
        ],
      },
    ])),
  },
}
