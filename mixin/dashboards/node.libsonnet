// The node dashboard: one node's workloads (who holds which device), RDMA ports, errors, RoCE congestion, GIDs, netdevs, PCIe,
// topology, GPUs, GPU activity and energy, NVLink, GPUDirect readiness and the railscope agent.
function(config)
  local lib = (import 'lib.libsonnet')(config);
  local sel = lib.sel, rate = lib.rate, t = lib.t;
  local railPort = lib.railPort, railDevice = lib.railDevice, railGpu = lib.railGpu, railPci = lib.railPci;
  local PORT = lib.PORT;
  local th = config.thresholds;
  local fecHighBins = (import '../lib/rules.libsonnet').binRegex(th.nvlinkFecHighBin, 15, 'nvlinkFecHighBin');

  local overview = [
    lib.row('Overview'),
    lib.stat('Ports ACTIVE', [
      t('sum(' + railPort(sel('railscope_ib_port_state') + ' == bool 4') + ')', 'active'),
      t('count(' + railPort(sel('railscope_ib_port_state')) + ')', 'ports'),
    ], desc='RDMA ports in state ACTIVE, and all RDMA ports of the node.'),
    lib.stat('GPUs up', [
      t('sum(' + sel('railscope_gpu_up') + ')', 'up'),
      t('count(' + sel('railscope_gpu_up') + ')', 'GPUs'),
    ], desc='GPUs that answered NVML in the last collection, and all GPUs.'),
    lib.stat('Collectors failing',
             [
               t('count(' + sel('railscope_collector_success') + ' == 0) or vector(0)', 'failing'),
             ],
             thresholds=lib.steps([[1, 'red']]),
             desc='Collectors that did not complete within the deadline in the last collection.'),
    lib.stat('GPUDirect RDMA module',
             [
               t(sel('railscope_host_gpudirect_rdma_module_loaded'), 'nvidia_peermem'),
             ],
             mappings=lib.UPDOWN,
             thresholds=lib.redBelow(1),
             desc='nvidia_peermem (or nv_peer_mem) loaded: without it NCCL stages every transfer through host memory.'),
    lib.stat('IOMMU mode',
             [t(sel('railscope_host_iommu_mode') + ' == 1', '{{mode}}')],
             mappings={ '1': { text: 'current' } },
             desc='translated puts a page walk on every peer-to-peer DMA.'),
    lib.stat('Firing railscope alerts', [
      t('count(' + lib.ALERTS + ') or vector(0)', 'alerts'),
    ], thresholds=lib.steps([[1, 'red']])),
  ];

  // Who holds which device (the `workload` source), narrowed by the pod and workload
  // variables. The kubelet names pods; the process scan names Slurm jobs, systemd units,
  // login sessions, and pods by UID (on nodes without a kubelet, or a pod that took a device
  // without the device plugin).
  local workloads = [
    lib.row('Workloads'),
    lib.table('Workloads: pods and their devices',
              [t(sel('railscope_workload_device_info', 'pod=~"$pod"'), instant=true)],
              w=14,
              h=8,
              hide=['Time', 'Value', 'instance'],
              order=[
                'namespace',
                'pod',
                'container',
                'resource',
                'gpu',
                'gpu_instance',
                'rdma_device',
                'device_id',
                'pci_address',
                'claim_namespace',
                'claim',
              ],
              desc="One row per device a container holds, from the kubelet's PodResources API: gpu and gpu_instance when "
                   + 'the device is a GPU or MIG device of this node, rdma_device and pci_address when it is an SR-IOV VF, '
                   + 'claim for a DRA claim. Empty on nodes without a kubelet, or where the agent may not ask it '
                   + '(SECURITY.md).'),
    lib.table('Workloads: jobs and units using devices',
              [t(sel('railscope_workload_process_device_info', 'workload=~"$workload"'), instant=true)],
              w=10,
              h=8,
              hide=['Time', 'Value', 'instance'],
              order=['kind', 'workload', 'gpu', 'gpu_instance', 'rdma_device'],
              desc='From the processes that have a GPU or an RDMA device open, by their cgroup (scanned every 30 s): '
                   + 'kind slurm (workload: the job id), kubernetes (the pod UID), systemd (the unit), session (the '
                   + 'login session), other (none).'),
  ];

  local portInfo =
    sel('railscope_ib_port_info')
    + ' * on (instance, device, port) group_left (rail, gpu, source) ' + sel('railscope_rail_info', lib.RAIL_EQ)
    + ' * on (instance, device) group_left (hca_type, fw_ver, board_id, pci_address, numa_node) ' + sel('railscope_ib_device_info')
    + ' or on (instance, device, port) (' + sel('railscope_ib_port_info')
    + ' unless on (instance, device, port) ' + sel('railscope_rail_info') + ')';

  // Each port's link as the neighbour collector sees it: its status, and the switch and switch
  // port where one is known (the link with a neighbour first, where a port has two: a RoCE
  // port's LLDP link and its SMP link, which is not_available).
  local portNeighbour =
    '0 * topk by (instance, device, port) (1, '
    + '(' + sel('railscope_neighbour_status', 'device!=""') + ' == 1)'
    + ' * on (instance, device, port, netdev, protocol) group_left (neighbour, neighbour_port) (' + sel('railscope_neighbour_info') + ' + 1)'
    + ' or on (instance, device, port, netdev, protocol) (' + sel('railscope_neighbour_status', 'device!=""') + ' == 1)'
    + ') + 1';
  local ports = [
    lib.row('RDMA ports'),
    lib.table('Ports: identity, state, rail and switch',
              [t('(' + portInfo + ') * on (instance, device, port) group_left (protocol, status, neighbour, neighbour_port) ('
                 + portNeighbour + ') or on (instance, device, port) (' + portInfo + ')', instant=true)],
              w=24,
              h=8,
              hide=['Time', 'Value', 'instance'],
              desc='railscope_ib_port_info joined with railscope_rail_info (rail, nearest GPU, how the rail was found), '
                   + 'railscope_ib_device_info, and the neighbour collector: the switch (neighbour) and switch port '
                   + '(neighbour_port) at the far end, how they were learned (protocol: smp, lldp, lldpd) and the status '
                   + '(ok, no_frames, not_available, refused, no_permission, timeout). Ports without a rail (front-end, '
                   + 'storage) are listed whatever rail is chosen.'),
    lib.ts('Far end: switch port rate vs host port', [
      t(railPort('8 * ' + sel('railscope_neighbour_rate_bytes_per_second', 'device!=""')), PORT + ' switch port'),
      t(railPort('8 * ' + sel('railscope_ib_port_rate_bytes_per_second') + ' and on (instance, device, port) '
                 + sel('railscope_neighbour_rate_bytes_per_second')), PORT + ' host'),
    ], 'bps', w=12, desc='The InfiniBand switch port\'s active rate (SMP PortInfo: width × per-lane speed, read every '
                         + '10 minutes) and the host port\'s. Both ends train together: a switch port below the host '
                         + 'raises RailscopeNeighbourPortSlower.'),
    lib.table('Neighbours: the switch at the far end of each link',
              [t(sel('railscope_neighbour_info'), instant=true)],
              w=12,
              h=8,
              hide=['Time', 'Value', 'instance'],
              order=['device', 'port', 'netdev', 'protocol', 'neighbour', 'neighbour_port', 'neighbour_id', 'neighbour_port_description'],
              desc='railscope_neighbour_info: LLDP System Name / IB NodeDescription (neighbour), LLDP Port ID / the switch '
                   + 'port number (neighbour_port), LLDP Chassis ID / NodeGUID (neighbour_id), LLDP Port Description.'),
    lib.timeline('Logical state',
                 [t(railPort(sel('railscope_ib_port_state')), PORT)],
                 lib.PORT_STATE,
                 desc='4 ACTIVE is healthy; a port flapping between DOWN and ACTIVE shows as stripes.'),
    lib.timeline('Physical state',
                 [t(railPort(sel('railscope_ib_port_phys_state')), PORT)],
                 lib.PHYS_STATE,
                 desc='5 LinkUp is healthy; Polling means no peer, LinkErrorRecovery a link retraining.'),
    lib.ts('Active rate',
           [t(railPort('8 * ' + sel('railscope_ib_port_rate_bytes_per_second')), PORT)],
           'bps',
           w=8,
           desc='Active rate of all lanes in bits per second, as ibstat prints it (Rate: 400). '
                + 'A port below its siblings trained down (400 Gb/s port at 200 Gb/s).'),
    lib.ts('Link width',
           [t(railPort(sel('railscope_ib_port_link_width_lanes')), PORT)],
           'short',
           w=8,
           desc='Active lanes: 2X instead of 4X is a lost lane (cable, connector).'),
    lib.ts('MTU: RDMA active vs netdev', [
      t(railPort(sel('railscope_ib_port_active_mtu_bytes')), PORT + ' RDMA active'),
      t(railPort(sel('railscope_ib_port_netdev_mtu_bytes')), PORT + ' netdev'),
    ], 'bytes', w=8, desc='A RoCE netdev at 1500 gives RDMA MTU 1024 while its peers run 4096. '
                        + 'InfiniBand ports have an active MTU only when libibverbs is installed.'),
    lib.ts('Port data rate', [
      t(railPort(rate('railscope_ib_port_data_bytes_total')), PORT + ' {{direction}}'),
    ], 'Bps', desc='PMA port_rcv_data / port_xmit_data.'),
    lib.ts('Port utilization', [
      t(railPort(rate('railscope_ib_port_data_bytes_total') + ' / on (instance, device, port) group_left () '
                 + sel('railscope_ib_port_rate_bytes_per_second')), PORT + ' {{direction}}'),
    ], 'percentunit', desc='Data rate over the active rate, per direction.'),
    lib.ts('Packet rate', [
      t(railPort(rate('railscope_ib_port_packets_total')), PORT + ' {{direction}}'),
    ], 'pps', w=8),
    lib.ts('Transmit wait',
           [
             t(railPort(rate('railscope_ib_port_transmit_wait_total')), PORT),
           ],
           'short',
           w=8,
           desc='port_xmit_wait ticks per second: time with data to send and no credits (congestion downstream).'),
    lib.table('LIDs', [
      t(railPort(sel('railscope_ib_port_lid')), instant=true),
      t(railPort(sel('railscope_ib_port_sm_lid')), instant=true),
    ], w=8, hide=['Time', 'instance'], desc='Value #A: base LID, Value #B: subnet manager LID (InfiniBand ports).'),
  ];

  local errors = [
    lib.row('Port error counters'),
    lib.ts('Symbol errors',
           [t(railPort(rate('railscope_ib_port_symbol_errors_total')), PORT)],
           'cps',
           w=8,
           desc='Above rate × 1e-12 per second the link exceeds the IBTA bit error rate limit.'),
    // Symbol errors per bit sent at the active rate: the link's bit error rate, against the
    // level where RailscopeSymbolErrorsAboveBER fires. Ports with no active rate are left out
    // (no division by zero).
    lib.ts('Bit error rate (symbol errors per bit)',
           [
             t(railPort(rate('railscope_ib_port_symbol_errors_total') + ' / on (instance, device, port) group_left () ('
                        + sel('railscope_ib_port_rate_bytes_per_second') + ' * 8 > 0)'), PORT),
           ],
           'sci',
           w=8,
           alertAt=th.symbolErrorBER,
           custom={ scaleDistribution: { type: 'log', log: 10 } },
           desc='Symbol errors per second over the active rate in bits per second. The dashed line is the '
                + 'IBTA limit, where RailscopeSymbolErrorsAboveBER fires (sustained over 15 minutes).'),
    lib.ts('Link error recovery and link downed', [
      t(railPort(rate('railscope_ib_port_link_error_recovery_total', fn='increase')), PORT + ' recovery'),
      t(railPort(rate('railscope_ib_port_link_downed_total', fn='increase')), PORT + ' downed'),
    ], 'short', w=8, desc='Increase per interval: every event retrains the link or drops it.'),
    lib.ts('Receive errors', [
      t(railPort(rate('railscope_ib_port_receive_errors_total')), PORT + ' rcv'),
      t(railPort(rate('railscope_ib_port_receive_remote_physical_errors_total')), PORT + ' remote physical'),
      t(railPort(rate('railscope_ib_port_receive_switch_relay_errors_total')), PORT + ' switch relay'),
    ], 'cps', w=8),
    lib.ts('Transmit discards and constraint errors', [
      t(railPort(rate('railscope_ib_port_transmit_discards_total')), PORT + ' xmit discards'),
      t(railPort(rate('railscope_ib_port_transmit_constraint_errors_total')), PORT + ' xmit constraint'),
      t(railPort(rate('railscope_ib_port_receive_constraint_errors_total')), PORT + ' rcv constraint'),
    ], 'cps', w=8),
    lib.ts('Integrity, buffer overrun, VL15', [
      t(railPort(rate('railscope_ib_port_local_link_integrity_errors_total')), PORT + ' link integrity'),
      t(railPort(rate('railscope_ib_port_excessive_buffer_overrun_errors_total')), PORT + ' buffer overrun'),
      t(railPort(rate('railscope_ib_port_vl15_dropped_total')), PORT + ' VL15 dropped'),
    ], 'cps', w=8),
    lib.table('Saturated PMA counters (worst first)',
              [
                t('topk(20, ' + railPort(sel('railscope_ib_port_pma_saturated')) + ')', instant=true),
              ],
              w=8,
              hide=['Time', 'instance'],
              thresholds=lib.steps([[1, 'red']]),
              sort=['Value', true],
              desc='1: the counter is stuck at its maximum and can no longer show new errors. Reset it (perfquery -x -R).'),
    lib.ts('Device read errors',
           [t(railDevice(sel('railscope_ib_device_read_errors')), '{{device}}')],
           'short',
           w=8,
           desc='Files of the device that failed in the last collection.'),
    lib.table('Other PMA counters (raw)', [
      t(railPort(sel('railscope_ib_port_pma_other_total')), instant=true),
    ], w=8, hide=['Time', 'instance'], desc="Any other counters/ file, raw (OFED's port_rcv_discards, say)."),
  ];

  local congestion = [
    lib.row('RoCE congestion'),
    lib.ts('PFC pause fraction',
           [
             t(rate('railscope_pfc_pause_duration_seconds_total'), '{{netdev}} prio {{priority}} {{direction}}'),
           ],
           'percentunit',
           desc='rate(railscope_pfc_pause_duration_seconds_total): the fraction of time a priority was paused. '
                + 'A pause storm eats the link while every drop counter reads zero. The dashed line is '
                + 'where RailscopePFCPauseStorm fires.',
           alertAt=th.pfcPauseFraction),
    lib.ts('PFC pause frames', [
      t(rate('railscope_pfc_pause_frames_total'), '{{netdev}} prio {{priority}} {{direction}}'),
    ], 'pps'),
    lib.ts('Pause storm events', [
      t(rate('railscope_pfc_pause_storm_events_total', fn='increase'), '{{netdev}} {{level}}'),
    ], 'short', w=8, desc='The NIC detected it was stuck pausing (tx_pause_storm_*_events).'),
    lib.ts('CNP and ECN',
           [
             t(railPort(rate('railscope_rdma_port_hw_stat_total', 'counter=~"' + lib.HW_CNP + '"')), PORT + ' {{counter}}'),
           ],
           'pps',
           w=8,
           desc='np_cnp_sent: CNPs this port sent as notification point (it received ECN-marked packets); '
                + 'rp_cnp_handled: CNPs it reacted to as reaction point; np_ecn_marked_roce_packets.'),
    lib.ts('RoCE retransmissions and timeouts',
           [
             t(railPort(rate('railscope_rdma_port_hw_stat_total', 'counter=~"' + lib.HW_RETRANS + '"')), PORT + ' {{counter}}'),
           ],
           'cps',
           w=8,
           desc='local_ack_timeout_err, out_of_sequence, packet_seq_err, implied_nak_seq_err and friends: '
                + 'drops in the fabric turn into retransmissions here.'),
    lib.ts('Out of buffer', [
      t(railPort(rate('railscope_rdma_port_hw_stat_total', 'counter="out_of_buffer"')), PORT),
    ], 'cps', w=8, desc='Packets dropped because no receive WQE was posted (slow consumer).'),
    lib.ts('Per-priority discards', [
      t(rate('railscope_netdev_priority_discards_total'), '{{netdev}} prio {{priority}} {{reason}}'),
    ], 'pps', w=8),
    lib.table('PFC enabled priorities (DCB)', [
      t(sel('railscope_dcb_pfc_enabled') + ' == 1', instant=true),
    ], w=8, hide=['Time', 'instance', 'Value'], desc='A RoCE priority without PFC drops instead of pausing.'),
    lib.table('Driver counters (raw, now)',
              [
                t(railPort(sel('railscope_rdma_port_hw_stat_total')), instant=true),
              ],
              w=24,
              h=8,
              hide=['Time', 'instance'],
              sort=['Value', true],
              desc='Every port driver counter as the driver names it.'),
  ];

  local gids = [
    lib.row('GIDs'),
    lib.table('GID entries by type',
              [
                t(railPort(sel('railscope_ib_port_gid_entries')), instant=true),
              ],
              w=8,
              hide=['Time', 'instance'],
              desc='A RoCE port with 0 RoCE v2 entries has no address NCCL can use (no IP on the netdev).'),
    lib.table('GID table',
              [t(railPort(sel('railscope_ib_port_gid_info')), instant=true)],
              w=16,
              hide=['Time', 'instance', 'Value']),
  ];

  local netdevs = [
    lib.row('Netdevs'),
    lib.table('Netdevs',
              [
                t(sel('railscope_netdev_info'), instant=true),
                t(sel('railscope_netdev_mtu_bytes'), instant=true),
                t(sel('railscope_netdev_up'), instant=true),
                t(sel('railscope_netdev_carrier'), instant=true),
              ],
              w=24,
              h=7,
              hide=['Time', 'instance', 'Value #A', 'Value'],
              desc='Value #B: MTU, Value #C: operstate up, Value #D: carrier.'),
    lib.ts('Netdev speed', [t(sel('railscope_netdev_speed_bytes_per_second'), '{{netdev}}')], 'Bps', w=8),
    lib.ts('Netdev traffic', [t(rate('railscope_netdev_bytes_total'), '{{netdev}} {{direction}}')], 'Bps', w=8),
    lib.ts('Netdev errors and drops', [
      t(rate('railscope_netdev_errors_total'), '{{netdev}} {{direction}} errors'),
      t(rate('railscope_netdev_drops_total'), '{{netdev}} {{direction}} drops'),
    ], 'pps', w=8),
    lib.ts('Carrier changes', [
      t(rate('railscope_netdev_carrier_changes_total', fn='increase'), '{{netdev}}'),
    ], 'short', w=8),
    lib.ts('PHY: FEC corrected bits and symbol errors', [
      t(rate('railscope_netdev_phy_fec_corrected_bit_errors_total'), '{{netdev}} FEC corrected bits'),
      t(rate('railscope_netdev_phy_symbol_errors_total'), '{{netdev}} symbol errors'),
    ], 'cps', w=8, desc='FEC corrections climbing are a link degrading before it drops packets.'),
    lib.ts('Out-of-buffer discards (netdev)', [
      t(rate('railscope_netdev_out_of_buffer_discards_total'), '{{netdev}}'),
    ], 'pps', w=8),
  ];

  // The physical layer: transceiver modules (powers in dBm, with the levels each module
  // advertises as dashed lines), FEC and pre-FEC BER, link downs and their reasons, and the
  // NIC's devlink health reporters. Netdevs of other rails than $rail are dropped (netdevs
  // without an RDMA port stay).
  local railNetdev(expr) =
    '(' + expr + ') unless on (instance, netdev) railscope:netdev_port:info{'
    + lib.matchers([lib.clusterMatcher, 'instance=~"$instance"', lib.RAIL_NE]) + '}';
  local dBm(expr) = '10 * log10(1000 * (' + expr + ' > 0))';
  // Level series drawn dashed, without fill.
  local levelLines(re) = [{
    matcher: { id: 'byRegexp', options: re },
    properties: [
      { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
      { id: 'custom.fillOpacity', value: 0 },
    ],
  }];
  local LEVELS = '.* (high_alarm|high_warning|low_warning|low_alarm)$';
  local optics(title, metric, thresholdMetric, levels, unit, asDbm, desc) =
    lib.ts(title, [
      t(railNetdev(if asDbm then dBm(sel(metric)) else sel(metric)), '{{netdev}} lane {{lane}}'),
      t(railNetdev(if asDbm then dBm(sel(thresholdMetric, 'level=~"' + levels + '"')) else sel(thresholdMetric, 'level=~"' + levels + '"') + ' > 0'),
        '{{netdev}} {{level}}'),
    ], unit, w=8, desc=desc, defaults={}) { panel+: { fieldConfig+: { overrides: levelLines(LEVELS) } } };
  local physical = [
    lib.row('Physical layer'),
    lib.table('Transceivers',
              [
                t(railNetdev(sel('railscope_transceiver_info')), instant=true),
                t(railNetdev(sel('railscope_transceiver_lanes')), instant=true),
                t(railNetdev(sel('railscope_transceiver_up')), instant=true),
              ],
              w=24,
              h=7,
              hide=['Time', 'instance', 'Value #A'],
              desc='Each netdev with a module: its spec (SFF-8472, SFF-8636, CMIS), type, vendor, part number, '
                   + 'serial, connector and media (railscope_transceiver_info). Value #B: lanes monitored, '
                   + 'Value #C: 1 when the last read of the module succeeded.'),
    optics('Optics: receive power', 'railscope_transceiver_rx_power_watts', 'railscope_transceiver_rx_power_threshold_watts',
           'low_warning|low_alarm', 'dBm', true,
           "Per lane, in dBm (0 dBm = 1 mW); dashed: the module's low warning and low alarm levels. One lane "
           + 'far below its siblings is that fibre or connector (RailscopeTransceiverLaneImbalance).'),
    optics('Optics: transmit power', 'railscope_transceiver_tx_power_watts', 'railscope_transceiver_tx_power_threshold_watts',
           'high_alarm|low_alarm', 'dBm', true,
           "Per lane, in dBm; dashed: the module's high and low alarm levels."),
    optics('Optics: laser bias current', 'railscope_transceiver_tx_bias_amperes', 'railscope_transceiver_tx_bias_threshold_amperes',
           'high_alarm|low_alarm', 'amp', false,
           "Per lane; dashed: the module's alarm levels. A bias climbing over weeks is a laser wearing out."),
    lib.ts('Transceiver temperature', [
      t(railNetdev(sel('railscope_transceiver_temperature_celsius')), '{{netdev}}'),
      t(railNetdev(sel('railscope_transceiver_temperature_threshold_celsius', 'level=~"high_warning|high_alarm"') + ' > 0'),
        '{{netdev}} {{level}}'),
    ], 'celsius', w=8, desc="The module's temperature; dashed: its high warning and high alarm levels.")
    { panel+: { fieldConfig+: { overrides: levelLines(LEVELS) } } },
    lib.table('Transceiver flags raised (last 10 minutes)',
              [
                t(railNetdev('max_over_time(' + sel('railscope_transceiver_lane_flag') + '[10m]) == 1'), instant=true),
                t(railNetdev('max_over_time(' + sel('railscope_transceiver_module_flag') + '[10m]) == 1'), instant=true),
              ],
              w=8,
              hide=['Time', 'instance', 'Value #A', 'Value #B'],
              desc='Flags the modules latched since their previous read, over the last 10 minutes: loss of signal '
                   + 'or lock, TX fault, and the alarm and warning flags of each reading.'),
    lib.ts('Supply voltage', [
      t(railNetdev(sel('railscope_transceiver_supply_voltage_volts')), '{{netdev}}'),
    ], 'volt', w=8),
    lib.ts('FEC blocks: corrected and uncorrectable', [
      t(railNetdev(rate('railscope_phy_fec_corrected_blocks_total')), '{{netdev}} corrected'),
      t(railNetdev(rate('railscope_phy_fec_uncorrectable_blocks_total')), '{{netdev}} uncorrectable'),
    ], 'cps', w=8, desc='PAM4 links correct blocks all the time; an uncorrectable block is a frame lost.',
       custom={ scaleDistribution: { type: 'log', log: 10 } }),
    lib.ts('Pre-FEC BER', [
      t(railNetdev('railscope:phy_pre_fec_ber:rate1h{' + lib.matchers([lib.clusterMatcher, 'instance=~"$instance"']) + '}'),
        '{{netdev}}'),
    ], 'sci', w=8, alertAt=th.preFecBerRsThreshold,
       desc='Bits corrected per bit of link rate over the last hour (railscope:phy_pre_fec_ber:rate1h). The line is '
            + 'the RS-FEC level of RailscopePreFECBERHigh; BASE-R (1e-8 by default), LLRS and links without FEC '
            + 'have lower levels.',
       custom={ scaleDistribution: { type: 'log', log: 10 } }),
    lib.ts('FEC corrected blocks per lane', [
      t(railNetdev(rate('railscope_phy_fec_lane_corrected_blocks_total')), '{{netdev}} lane {{lane}}'),
    ], 'cps', w=8, desc='Lanes as the kernel numbers them (from 0). One lane correcting far more than the others is its fibre or connector.',
       custom={ scaleDistribution: { type: 'log', log: 10 } }),
    lib.ts('FEC codewords by symbols corrected', [
      t(railNetdev('sum by (instance, netdev, symbol_errors) (' + rate('railscope_phy_fec_codewords_total') + ')'),
        '{{netdev}} {{symbol_errors}}'),
    ], 'cps', w=8,
       desc='The FEC histogram where the driver reports one: codewords per second by the number of symbol errors '
            + 'corrected in them. A healthy link fills the low bins; codewords in the high bins were corrected with '
            + 'little margin left.',
       custom={ scaleDistribution: { type: 'log', log: 10 } }),
    lib.ts('Link downs', [
      t(railNetdev(rate('railscope_phy_link_down_events_total', fn='increase')), '{{netdev}}'),
    ], 'short', w=8,
       desc="Link downs the PHY counted per interval (where the driver counts them); the netdevs' carrier changes "
            + 'are in the Netdevs row.'),
    lib.table('Link down reasons in the time range',
              [
                t(railNetdev('max by (instance, netdev, state, substate) (max_over_time('
                             + sel('railscope_phy_link_ext_state') + '[$__range]))'), instant=true),
              ],
              w=8,
              hide=['Time', 'instance', 'Value'],
              desc='The extended link states the kernel reported while a link was down (no_cable, '
                   + 'link_training_failure, bad_signal_integrity, ...), over the time range.'),
    lib.table('FEC mode',
              [t(railNetdev(sel('railscope_phy_fec_info')), instant=true)],
              w=8,
              hide=['Time', 'instance', 'Value'],
              desc='Active FEC mode and the configured modes of each netdev.'),
    lib.table('devlink health reporters',
              [t(sel('railscope_devlink_health_reporter_healthy'), instant=true)],
              w=12,
              hide=['Time', 'instance'],
              mappings={ '0': { text: 'error', color: 'red' }, '1': { text: 'healthy', color: 'green' } },
              thresholds=lib.redBelow(1),
              sort=['Value', false],
              desc="Each health reporter of the node's devlink devices (fw, fw_fatal, tx, rx, ...): healthy or in error."),
    lib.table('devlink errors and recoveries in the time range',
              [
                t('increase(' + sel('railscope_devlink_health_reporter_errors_total') + '[$__range]) > 0', instant=true),
                t('increase(' + sel('railscope_devlink_health_reporter_recoveries_total') + '[$__range]) > 0', instant=true),
              ],
              w=12,
              hide=['Time', 'instance'],
              desc='Value #A: errors each reporter counted in the time range, Value #B: recoveries. A fw_fatal error is a '
                   + 'firmware crash and a device reset.'),
  ];

  local pciJoin = ' * on (instance, pci_address) group_left (role, rdma_device, gpu) '
                  + sel('railscope_pci_device_info', lib.NIC_GPU);
  local pcie = [
    lib.row('PCIe'),
    lib.table('NIC and GPU links: width and speed vs max',
              [
                t(railPci(sel('railscope_pci_link_width_lanes') + pciJoin), instant=true),
                t(railPci(sel('railscope_pci_link_max_width_lanes') + pciJoin), instant=true),
                t(railPci(sel('railscope_pci_link_speed_transfers_per_second') + pciJoin), instant=true),
                t(railPci(sel('railscope_pci_link_max_speed_transfers_per_second') + pciJoin), instant=true),
              ],
              w=12,
              h=9,
              hide=['Time', 'instance'],
              desc='Value #A width, #B max width (lanes), #C speed, #D max speed (transfers/s per lane; 32e9 Gen5). '
                   + 'GPUs lower their speed at idle: compare width, or speed under load.'),
    lib.ts('Width and speed over max', [
      t(railPci(sel('railscope_pci_link_width_lanes') + ' / ' + sel('railscope_pci_link_max_width_lanes') + pciJoin),
        '{{role}} {{rdma_device}}{{gpu}} {{pci_address}} width'),
      t(railPci(sel('railscope_pci_link_speed_transfers_per_second') + ' / '
                + sel('railscope_pci_link_max_speed_transfers_per_second') + pciJoin),
        '{{role}} {{rdma_device}}{{gpu}} {{pci_address}} speed'),
    ], 'percentunit', w=12, h=9, desc='1 is the full link; below 1 trained down.'),
    lib.ts('AER errors', [
      t('sum by (instance, pci_address, severity) (' + rate('railscope_pci_aer_errors_total') + ')'
        + ' * on (instance, pci_address) group_left (role, rdma_device, gpu) ' + sel('railscope_pci_device_info'),
        '{{role}} {{rdma_device}}{{gpu}} {{pci_address}} {{severity}}'),
    ], 'cps', w=12, desc='Climbing correctable errors are a marginal link (riser, cable, slot) before it fails.'),
    lib.table('AER errors by type (totals, top 20)', [
      t('topk(20, ' + sel('railscope_pci_aer_errors_by_type_total') + ')', instant=true),
    ], w=12, hide=['Time', 'instance'], sort=['Value', true]),
    lib.table('ACS state of bridges',
              [t(sel('railscope_pci_acs_state') + ' == 1', instant=true)],
              w=12,
              hide=['Time', 'instance', 'Value'],
              desc='redirect sends GPU↔NIC peer-to-peer traffic up through the root complex.'),
    lib.table('PCI functions',
              [t(sel('railscope_pci_device_info'), instant=true)],
              w=12,
              hide=['Time', 'instance', 'Value']),
  ];

  local topology = [
    lib.row('Topology and rails'),
    lib.table('Rails',
              [t(sel('railscope_rail_info', 'rail=~"$rail"'), instant=true)],
              w=8,
              hide=['Time', 'instance', 'Value'],
              desc='The rail of every RDMA port: derived (matched with a GPU), pci_order, or configured.'),
    lib.table('NIC ↔ GPU distance',
              [
                t(railDevice(sel('railscope_topology_nic_gpu_distance')), instant=true),
              ],
              w=16,
              matrix=['device', 'gpu'],
              mappings=lib.DISTANCE,
              thresholds=lib.steps([[30, 'yellow'], [40, 'orange'], [50, 'red']]),
              desc='Rows: RDMA devices, columns: GPUs, as nvidia-smi topo -m classifies them from PCI paths.'),
    lib.table('Nearest GPU per NIC',
              [
                t(railDevice(sel('railscope_topology_nic_nearest_gpu_info')), instant=true),
              ],
              w=12,
              hide=['Time', 'instance', 'Value'],
              desc='A NIC whose nearest GPU is NODE or SYS sends GPUDirect traffic across the CPU.'),
    lib.table('GPUs in PCI order',
              [t(railGpu(sel('railscope_topology_gpu_info')), instant=true)],
              w=12,
              hide=['Time', 'instance', 'Value']),
  ];

  local gpus = [
    lib.row('GPUs'),
    lib.table('GPUs',
              [
                t(railGpu(sel('railscope_gpu_info')), instant=true),
                t(railGpu(sel('railscope_gpu_state') + ' == 1'), instant=true),
                t(railGpu(sel('railscope_gpu_platform_info')), instant=true),
              ],
              w=24,
              h=7,
              hide=['Time', 'instance', 'Value #A', 'Value #B', 'Value #C', 'ib_guid', 'peer_type', 'host_id'],
              desc='Identity, state (ok, lost: fallen off the bus, timeout: NVML hanging, error) and, on rack-scale systems (Blackwell and later), where the GPU sits: chassis serial, tray, slot and module id.'),
    lib.ts('Utilization',
           [t(railGpu(sel('railscope_gpu_utilization_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8),
    lib.ts('Memory activity',
           [t(railGpu(sel('railscope_gpu_memory_utilization_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8),
    lib.ts('Memory used', [
      t(railGpu(sel('railscope_gpu_memory_used_bytes') + ' / ' + sel('railscope_gpu_memory_total_bytes')),
        'GPU {{gpu}}'),
    ], 'percentunit', w=8),
    lib.ts('Temperature',
           [t(railGpu(sel('railscope_gpu_temperature_celsius')), 'GPU {{gpu}}')],
           'celsius',
           w=8,
           alertAt=th.gpuTemperatureCelsius,
           desc='The dashed line is the maximum operating temperature (thresholds.gpuTemperatureCelsius); '
                + 'thermal slowdown above it raises RailscopeGPUThrottling.'),
    lib.ts('Power vs limit', [
      t(railGpu(sel('railscope_gpu_power_watts')), 'GPU {{gpu}}'),
      t(railGpu(sel('railscope_gpu_power_limit_watts')), 'GPU {{gpu}} limit'),
    ], 'watt', w=8),
    lib.ts('Clocks over max', [
      t(railGpu(sel('railscope_gpu_clock_hertz') + ' / ' + sel('railscope_gpu_clock_max_hertz')),
        'GPU {{gpu}} {{clock}}'),
    ], 'percentunit', w=8),
    lib.ts('GPUs throttled, by reason', [
      t('sum by (instance, reason) (' + railGpu(sel('railscope_gpu_throttle_reason')) + ')', '{{reason}}'),
    ], 'short', w=8, desc='Sustained thermal or power throttling slows every rank of a job.'),
    lib.ts('ECC errors (volatile)', [
      t(railGpu(rate('railscope_gpu_ecc_errors_total', 'scope="volatile"', fn='increase')),
        'GPU {{gpu}} {{type}}'),
    ], 'short', w=8),
    lib.ts('XID errors', [
      t(railGpu(rate('railscope_gpu_xid_errors_total', fn='increase')), 'GPU {{gpu}} XID {{xid}}'),
    ], 'short', w=8, desc='48 double-bit ECC, 79 fallen off the bus, 13/31/43 usually the application.'),
    lib.table('Memory health',
              [
                t(railGpu(sel('railscope_gpu_ecc_errors_total', 'scope="aggregate"')), instant=true),
                t(railGpu(sel('railscope_gpu_remapped_rows')), instant=true),
                t(railGpu(sel('railscope_gpu_remapped_rows_pending')), instant=true),
                t(railGpu(sel('railscope_gpu_remapped_rows_failure')), instant=true),
              ],
              w=12,
              hide=['Time', 'instance'],
              merge=false,
              desc='Lifetime ECC counts, remapped rows, a remap waiting for a reset, a failed remap (service the GPU).'),
    lib.table('Fabric and retired pages',
              [
                t(railGpu(sel('railscope_gpu_fabric_state')), instant=true),
                t(railGpu(sel('railscope_gpu_fabric_status')), instant=true),
                t(railGpu(sel('railscope_gpu_retired_pages')), instant=true),
              ],
              w=12,
              hide=['Time', 'instance'],
              merge=false,
              desc='NVSwitch fabric registration (3 completed, status 0 success); retired pages on pre-Ampere GPUs.'),
    lib.table('GPU PCIe (NVML)', [
      t(railGpu(sel('railscope_gpu_pcie_link_generation')), instant=true),
      t(railGpu(sel('railscope_gpu_pcie_link_max_generation')), instant=true),
      t(railGpu(sel('railscope_gpu_pcie_link_width_lanes')), instant=true),
      t(railGpu(sel('railscope_gpu_pcie_link_max_width_lanes')), instant=true),
    ], w=8, hide=['Time', 'instance'], desc='#A generation, #B max generation, #C width, #D max width.'),
    lib.ts('GPU PCIe replays',
           [t(railGpu(rate('railscope_gpu_pcie_replays_total')), 'GPU {{gpu}}')],
           'cps',
           w=8),
    lib.ts('GPU PCIe throughput', [
      t(railGpu(sel('railscope_gpu_pcie_throughput_bytes_per_second')), 'GPU {{gpu}} {{direction}}'),
    ], 'Bps', w=8),
    lib.table('NVLink fabric health',
              [
                t(railGpu(sel('railscope_gpu_fabric_health') + ' == 1'), instant=true),
                t(railGpu(sel('railscope_gpu_fabric_health_state') + ' == 1'), instant=true),
              ],
              w=12,
              hide=['Time', 'instance', 'Value'],
              merge=false,
              desc='#A: the conditions the fabric health reports (degraded_bandwidth, route_recovery, route_unhealthy, '
                   + 'access_timeout_recovery, incorrect_configuration); none listed is healthy. #B: the health summary '
                   + '(healthy, unhealthy, limited_capacity). NVSwitch and multi-node NVLink systems whose driver reports it.'),
    lib.timeline('NVLink-C2C links',
                 [t(railGpu(sel('railscope_gpu_c2c_link_up')), 'GPU {{gpu}} C2C {{link}}')],
                 lib.UPDOWN,
                 w=12,
                 desc='Grace-Blackwell: each NVLink-C2C link between a GPU and its Grace CPU, up or down. Empty on GPUs without C2C.'),
  ];

  // GPU activity from GPM (Hopper and later): each value covers the window between two
  // scrapes (railscope_gpu_gpm_window_seconds), as DCGM's profiling fields do. Energy and the
  // time the clocks were held down, from the driver's counters.
  local clockEvent(reasons) =
    'max by (instance, gpu) (' + railGpu(rate('railscope_gpu_clock_event_seconds_total', 'reason=~"' + reasons + '"')) + ')';
  local migInfo = ' * on (instance, gpu, gpu_instance, compute_instance) group_left (profile, name, mig_uuid) '
                  + sel('railscope_gpu_mig_device_info');
  local activity = [
    lib.row('GPU activity'),
    lib.ts('SM active',
           [t(railGpu(sel('railscope_gpu_sm_active_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8,
           desc='Fraction of time an SM had at least one warp resident, over all SMs (GPM SM utilization; '
                + "dcgm-exporter's DCGM_FI_PROF_SM_ACTIVE). Hopper and later GPUs; none where railscope_gpu_gpm_supported is 0."),
    lib.ts('Tensor active',
           [t(railGpu(sel('railscope_gpu_tensor_active_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8,
           desc='Fraction of time any tensor core pipe was active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE). '
                + 'A training job well below its usual level waits on something else: data, the network, a slow rank.'),
    lib.ts('DRAM active',
           [t(railGpu(sel('railscope_gpu_dram_active_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8,
           desc='Fraction of cycles the device memory interface was busy (DCGM_FI_PROF_DRAM_ACTIVE).'),
    lib.ts('SM occupancy',
           [t(railGpu(sel('railscope_gpu_sm_occupancy_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8,
           desc='Resident warps over the maximum an SM can hold, averaged over all SMs (DCGM_FI_PROF_SM_OCCUPANCY).'),
    lib.ts('Graphics engine active',
           [t(railGpu(sel('railscope_gpu_graphics_active_ratio')), 'GPU {{gpu}}')],
           'percentunit',
           w=8,
           desc='Fraction of time the graphics or compute engine was busy (DCGM_FI_PROF_GR_ENGINE_ACTIVE); '
                + 'close to railscope_gpu_utilization_ratio, which counts any kernel running.'),
    lib.ts('Pipe activity',
           [t(railGpu(sel('railscope_gpu_pipe_active_ratio')), 'GPU {{gpu}} {{pipe}}')],
           'percentunit',
           w=8,
           desc='Fraction of time each pipe was active: fp64, fp32, fp16, integer and the tensor pipes by type '
                + '(DCGM_FI_PROF_PIPE_*_ACTIVE).'),
    lib.ts('Power from the energy counter',
           [t(railGpu(rate('railscope_gpu_energy_joules_total', rng='5m')), 'GPU {{gpu}}')],
           'watt',
           w=8,
           desc="Mean power over the interval from the GPU's energy counter (railscope_gpu_energy_joules_total). "
                + 'The agent reads the counter every 60 seconds (it costs milliseconds of CPU), so this is the mean over 5 minutes: spikes between scrapes count, unlike in a sampled gauge; '
                + 'railscope_gpu_power_watts is the instantaneous draw.'),
    lib.table('Energy used in the time range',
              [
                t(railGpu(rate('railscope_gpu_energy_joules_total', fn='increase', rng='$__range')), instant=true),
                t(railGpu(rate('railscope_gpu_energy_joules_total', fn='increase', rng='$__range') + ' / 3600000'),
                  instant=true),
              ],
              unit='joule',
              w=8,
              hide=['Time', 'instance'],
              desc='Energy each GPU used over the dashboard time range: #A in joules, #B in kWh.')
    + { panel+: { fieldConfig+: { overrides: [
      { matcher: { id: 'byName', options: 'Value #B' }, properties: [{ id: 'unit', value: 'kwatth' }] },
    ] } } },
    lib.ts('Clock event time, by reason',
           [
             t(railGpu(rate('railscope_gpu_clock_event_seconds_total')), 'GPU {{gpu}} {{reason}}'),
           ],
           'percentunit',
           w=8,
           desc="Fraction of time each reason held the GPU's clocks down, from the driver's clock event counters. "
                + 'sw_power_cap is routine under load; sustained thermal slowdown or power brake raise their alerts.'),
    lib.ts('Thermal slowdown time',
           [
             t(clockEvent('sw_thermal_slowdown|hw_thermal_slowdown'), 'GPU {{gpu}}'),
           ],
           'percentunit',
           w=12,
           alertAt=th.gpuThermalSlowdownFraction,
           desc='Fraction of time the clocks were held down for heat, the larger of software and hardware thermal '
                + 'slowdown. The dashed line is where RailscopeGPUThermalSlowdown fires (over 5 minutes, for 10 minutes).'),
    lib.ts('Power brake time',
           [
             t(clockEvent('hw_power_brake_slowdown'), 'GPU {{gpu}}'),
           ],
           'percentunit',
           w=12,
           alertAt=th.gpuPowerBrakeFraction,
           desc='Fraction of time the power supplies or the power shelf held the clocks down with the external power '
                + 'brake. The dashed line is where RailscopeGPUPowerBrake fires (over 5 minutes, for 10 minutes).'),
    lib.table('MIG devices',
              [
                t(railGpu(sel('railscope_gpu_mig_memory_used_bytes') + migInfo), instant=true),
                t(railGpu(sel('railscope_gpu_mig_memory_total_bytes') + migInfo), instant=true),
              ],
              unit='bytes',
              w=24,
              hide=['Time', 'instance'],
              desc='One row per MIG device: its GPU and compute instance, profile and UUID; #A memory used, #B memory total. '
                   + 'Empty where MIG is off or not supported.'),
  ];

  local nvlink = [
    lib.row('NVLink', collapsed=true),
    lib.ts('Active links per GPU', [
      t('sum by (instance, gpu) (' + railGpu(sel('railscope_nvlink_up')) + ')', 'GPU {{gpu}} active'),
      t('count by (instance, gpu) (' + railGpu(sel('railscope_nvlink_up')) + ')', 'GPU {{gpu}} links'),
    ], 'short', w=8, desc='An inactive link among active siblings is a fault.'),
    lib.table('Inactive links (worst first)', [
      t('bottomk(20, ' + railGpu(sel('railscope_nvlink_up')) + ')', instant=true),
    ], w=8, hide=['Time', 'instance'], thresholds=lib.redBelow(1), mappings=lib.UPDOWN, sort=['Value', false]),
    lib.ts('NVLink errors by GPU', [
      t('sum by (instance, gpu, type) (' + railGpu(rate('railscope_nvlink_errors_total')) + ')',
        'GPU {{gpu}} {{type}}'),
    ], 'cps', w=8, desc='replay, recovery, crc_flit, crc_data per second; on NVLink5 effective, symbol, malformed_packet, '
                      + 'buffer_overrun, rcv, rcv_remote, rcv_general, local_link_integrity, xmit_discards.'),
    lib.table('NVLink error rate per link (top 20)', [
      t('topk(20, ' + railGpu(rate('railscope_nvlink_errors_total')) + ')', instant=true),
    ], w=8, hide=['Time', 'instance'], unit='cps', sort=['Value', true]),
    lib.ts('NVLink data rate per GPU', [
      t('sum by (instance, gpu, direction) (' + railGpu(rate('railscope_nvlink_data_bytes_total')) + ')',
        'GPU {{gpu}} {{direction}}'),
    ], 'Bps', w=8),
    lib.ts('NVLink data rate per link', [
      t(railGpu(rate('railscope_nvlink_data_bytes_total')), 'GPU {{gpu}} link {{link}} {{direction}}'),
    ], 'Bps', w=8),
    lib.ts('NVLink5 link recoveries', [
      t(railGpu(rate('railscope_nvlink_link_recovery_events_total', fn='increase')), 'GPU {{gpu}} link {{link}} {{result}}'),
    ], 'short', w=12, desc='Increase per interval of NVLink5 link recoveries, by result: a failed one took the link down.'),
    lib.ts('NVLink5 bit error rates',
           [
             t(railGpu(sel('railscope_nvlink_effective_ber')), 'GPU {{gpu}} link {{link}} effective'),
             t(railGpu(sel('railscope_nvlink_symbol_ber')), 'GPU {{gpu}} link {{link}} symbol'),
           ],
           'sci',
           w=12,
           custom={ scaleDistribution: { type: 'log', log: 10 } },
           desc='The bit error rates the driver computes for each NVLink5 link (Blackwell): effective after forward error '
                + 'correction, symbol before it. A link whose symbol BER stands far above its siblings is losing margin.'),
    lib.ts('NVLink5 FEC high-bin codewords per link',
           [
             t('sum by (instance, gpu, link) (' + railGpu(rate('railscope_nvlink_fec_history_total', 'bin=~"' + fecHighBins + '"')) + ')',
               'GPU {{gpu}} link {{link}}'),
           ],
           'cps',
           w=12,
           alertAt=th.nvlinkFecHighBinPerSecond,
           desc='Codewords per second that NVLink5 forward error correction corrected with many symbols (FEC histogram bins '
                + th.nvlinkFecHighBin + ' to 15, thresholds.nvlinkFecHighBin): a link whose line climbs while its siblings stay '
                + 'flat is losing margin. The dashed line is the level RailscopeNVLinkFECHistoryRising fires at (over '
                + config.nvlinkFecWindow + ', for 15 minutes).'),
    lib.ts('NVLink5 FEC codewords by bin',
           [
             t('sum by (instance, gpu, bin) (' + railGpu(rate('railscope_nvlink_fec_history_total')) + ')', 'GPU {{gpu}} bin {{bin}}'),
           ],
           'cps',
           w=12,
           custom={ scaleDistribution: { type: 'log', log: 10 } },
           desc='The FEC codeword histogram of each GPU, all links together: bin n counts the codewords that needed about n '
                + 'symbol corrections. Healthy links fill bins 0-3; codewords moving into higher bins are margin going.'),
    lib.table('NVLink remote ends and versions', [
      t(railGpu(sel('railscope_nvlink_remote_info')), instant=true),
      t(railGpu(sel('railscope_nvlink_version')), instant=true),
    ], w=24, hide=['Time', 'instance', 'Value #A'], desc='#B: NVLink version.'),
  ];

  local host = [
    lib.row('Host: GPUDirect readiness', collapsed=true),
    lib.table('Kernel modules',
              [t(sel('railscope_host_kernel_module_loaded'), instant=true)],
              w=6,
              hide=['Time', 'instance'],
              mappings=lib.UPDOWN),
    lib.table('IOMMU',
              [
                t(sel('railscope_host_iommu_mode') + ' == 1', instant=true),
                t(sel('railscope_host_iommu_info'), instant=true),
                t(sel('railscope_host_iommu_units'), instant=true),
              ],
              w=10,
              hide=['Time', 'instance', 'Value #A', 'Value #B'],
              merge=false,
              desc="Mode, where it came from and the kernel's IOMMU parameters; #C IOMMU units."),
    lib.table('Memlock limits',
              [t(sel('railscope_host_memlock_limit_bytes'), instant=true)],
              w=8,
              unit='bytes',
              hide=['Time', 'instance'],
              desc='RDMA memory registration fails with ENOMEM past RLIMIT_MEMLOCK; +Inf is unlimited.'),
  ];

  local kernel = [
    lib.row('Kernel log', collapsed=true),
    lib.ts('Kernel-log events',
           [t('increase(' + sel('railscope_kmsg_events_total') + '[$__rate_interval])', '{{kind}} {{pci_address}} {{device}} {{code}} {{severity}}')],
           'short',
           w=12,
           desc='Events of the kmsg collector by kind (XIDs, NVSwitch SXIDs, ConnectX firmware timeouts, health and module errors, PCIe slot events, AER, RDMA link downs). Empty where the agent may not read /dev/kmsg (CAP_SYSLOG, see SECURITY.md).'),
    lib.table('Kernel-log events: count and last seen',
              [
                t(sel('railscope_kmsg_events_total'), instant=true),
                t('time() - ' + sel('railscope_kmsg_event_last_seen_seconds'), instant=true),
              ],
              w=12,
              hide=['Time', 'instance'],
              desc='#A: events since the agent started (the boot backlog included); #B: seconds since the last one.'),
  ];

  local agent = [
    lib.row('Agent', collapsed=true),
    lib.timeline('Collector success',
                 [t(sel('railscope_collector_success'), '{{collector}}')],
                 { '0': { text: 'failed', color: 'red' }, '1': { text: 'ok', color: 'green' } }),
    lib.ts('Collector duration', [t(sel('railscope_collector_duration_seconds'), '{{collector}}')], 's'),
    lib.ts('Collector errors', [
      t(rate('railscope_collector_errors_total'), '{{collector}} errors/s'),
      t(sel('railscope_collector_last_errors'), '{{collector}} in last collection'),
      t(sel('railscope_sysfs_refused_files'), 'files refused, backing off'),
    ], 'short', w=8),
    lib.ts('Scrapes vs collections', [
      t(rate('railscope_scrape_requests_total'), 'scrapes'),
      t(rate('railscope_collections_total'), 'collections'),
    ], 'reqps', w=8, desc='Scrapes arriving while a collection runs share it.'),
    lib.ts('Scrape duration and up', [
      t(sel('scrape_duration_seconds'), 'scrape duration'),
      t(sel('up'), 'up'),
    ], 's', w=8),
    lib.ts('Process memory', [t(sel('process_resident_memory_bytes'), 'resident')], 'bytes', w=8),
    lib.ts('Process CPU', [t(rate('process_cpu_seconds_total'), 'CPU')], 'percentunit', w=8),
    lib.table('Build', [t(sel('railscope_build_info'), instant=true)], w=8, hide=['Time', 'instance', 'Value']),
  ];

  lib.dashboard(
    config.dashboardUIDs.node,
    'railscope / node',
    "One node's workloads, RDMA ports, errors, RoCE congestion, GIDs, netdevs, the physical layer, PCIe, topology, "
    + 'GPUs, GPU activity and energy, NVLink, GPUDirect readiness, kernel-log events and the railscope agent.',
    overview + workloads + ports + errors + congestion + gids + netdevs + physical + pcie + topology + gpus + activity + nvlink + host + kernel + agent,
    fleet=false,
    runbooks=lib.runbooks.node,
  )
