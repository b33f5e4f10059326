// The fleet dashboard: per-rail throughput and errors across nodes, and the nodes whose ports,
// PCIe links, GPUs or NVLinks are off their peers, and where workloads (pods, Slurm jobs) run.
function(config)
  local lib = (import 'lib.libsonnet')(config);
  local sel = lib.sel, rate = lib.rate, t = lib.t;
  local railPort = lib.railPort, railGpu = lib.railGpu, railPci = lib.railPci;
  local withRail = lib.withRail, perRail = lib.perRail;
  local NODE_LINK = lib.NODE_LINK;
  local th = config.thresholds;

  local overview = [
    lib.row('Overview'),
    lib.stat('Nodes up', [t('sum(' + sel('up') + ')', 'up'), t('count(' + sel('up') + ')', 'nodes')]),
    lib.stat('Firing railscope alerts', [
      t('count(' + lib.ALERTS + ') or vector(0)', 'alerts'),
    ], thresholds=lib.steps([[1, 'red']])),
    lib.stat('Ports not ACTIVE', [
      t('count(' + railPort(sel('railscope_ib_port_state') + ' != 4') + ') or vector(0)', 'ports'),
    ], thresholds=lib.steps([[1, 'red']])),
    lib.stat('GPUs lost',
             [t('sum(' + sel('railscope_gpu_state', lib.LOST) + ')', 'lost')],
             thresholds=lib.steps([[1, 'red']])),
    lib.stat('NVLinks inactive', [
      t('count(' + sel('railscope_nvlink_up') + ' == 0) or vector(0)', 'inactive'),
    ], thresholds=lib.steps([[1, 'red']])),
    lib.stat('Nodes without nvidia_peermem', [
      t('count(' + sel('railscope_host_gpudirect_rdma_module_loaded') + ' == 0) or vector(0)', 'nodes'),
    ], thresholds=lib.steps([[1, 'red']])),
    lib.table('Firing railscope alerts',
              [t(lib.ALERTS, instant=true)],
              w=24,
              h=8,
              hide=['Time', 'Value', 'alertstate'],
              links=NODE_LINK,
              desc='Returns rows only while an alert fires. Needs alerts/railscope.rules.yml loaded.'),
  ];

  local portBw = 'sum without (direction) (' + rate('railscope_ib_port_data_bytes_total') + ')';
  local throughput = [
    lib.row('Rails: throughput'),
    lib.ts('Throughput per rail',
           [t(perRail(portBw), 'rail {{rail}}')],
           'Bps',
           w=12,
           h=9,
           desc='Receive + transmit of every port of the rail, summed over the chosen nodes. '
                + 'A rail carrying less than its siblings is a dead leaf, a bad cable or a skewed NCCL ring.'),
    lib.ts('Mean throughput per port, by rail', [
      t('avg by (rail) (' + withRail(portBw) + ')', 'rail {{rail}}'),
    ], 'Bps', w=12, h=9),
    lib.table('Throughput by node and rail (now)',
              [
                t('sum by (instance, rail) (' + withRail(portBw) + ')', instant=true),
              ],
              unit='Bps',
              w=24,
              h=9,
              matrix=['instance', 'rail'],
              desc='Rows: nodes, columns: rails. A node whose rail is 0 while its siblings carry traffic has lost that rail.'),
  ];

  // GPU activity (GPM, Hopper and later) and power across the chosen nodes.
  local gpuActivity = [
    lib.row('GPU activity'),
    lib.ts('SM and tensor activity',
           [
             t('avg(' + railGpu(sel('railscope_gpu_sm_active_ratio')) + ')', 'SM active, mean'),
             t('quantile(0.1, ' + railGpu(sel('railscope_gpu_sm_active_ratio')) + ')', 'SM active, 10th percentile'),
             t('avg(' + railGpu(sel('railscope_gpu_tensor_active_ratio')) + ')', 'tensor active, mean'),
           ],
           'percentunit',
           w=12,
           desc='Over every GPU of the chosen nodes and rails that reports GPM (Hopper and later). '
                + 'A 10th percentile far below the mean: some GPUs idle or starved while the others work.'),
    lib.ts('GPU power',
           [t('sum(' + railGpu(rate('railscope_gpu_energy_joules_total', rng='5m')) + ')', 'GPUs of the chosen nodes')],
           'watt',
           w=8,
           desc="Mean power of the chosen nodes' GPUs over 5 minutes, from their energy counters (read every 60 s)."),
    lib.stat('GPU energy in the time range',
             [
               t('sum(' + railGpu(rate('railscope_gpu_energy_joules_total', fn='increase', rng='$__range')) + ') / 3600000',
                 'kWh'),
             ],
             'kwatth',
             w=4,
             h=8,
             desc="Energy the chosen nodes' GPUs used over the dashboard time range."),
  ];

  local linkErrors = [
    'railscope_ib_port_symbol_errors_total',
    'railscope_ib_port_receive_errors_total',
    'railscope_ib_port_link_error_recovery_total',
    'railscope_ib_port_link_downed_total',
    'railscope_ib_port_transmit_discards_total',
  ];
  local errorSum = std.join(' + ', [rate(m, fn='increase', rng='$__range') for m in linkErrors]);
  local errors = [
    lib.row('Rails: errors'),
  ] + [
    lib.ts(e[0],
           [t(perRail(rate(e[1])), 'rail {{rail}}')],
           'cps',
           w=8,
           desc='Summed over the chosen nodes: one rail with more errors than the others is the '
                + 'signature of a bad leaf switch.')
    for e in [
      ['Symbol errors per rail', 'railscope_ib_port_symbol_errors_total'],
      ['Receive errors per rail', 'railscope_ib_port_receive_errors_total'],
      ['Link error recovery per rail', 'railscope_ib_port_link_error_recovery_total'],
      ['Link downed per rail', 'railscope_ib_port_link_downed_total'],
      ['Transmit discards per rail', 'railscope_ib_port_transmit_discards_total'],
    ]
  ] + [
    lib.ts('RoCE retransmissions per rail', [
      t(perRail(rate('railscope_rdma_port_hw_stat_total', 'counter=~"' + lib.HW_RETRANS + '"')), 'rail {{rail}} {{counter}}'),
    ], 'cps', w=8),
    lib.ts('CNP and ECN per rail', [
      t(perRail(rate('railscope_rdma_port_hw_stat_total', 'counter=~"' + lib.HW_CNP + '"')), 'rail {{rail}} {{counter}}'),
    ], 'pps', w=12),
    lib.ts('Out of buffer per rail', [
      t(perRail(rate('railscope_rdma_port_hw_stat_total', 'counter="out_of_buffer"')), 'rail {{rail}}'),
    ], 'cps', w=12),
    lib.table('Error counts in the time range by node and rail',
              [
                t('sum by (instance, rail) (' + withRail('(' + errorSum + ')') + ')', instant=true),
              ],
              w=24,
              h=9,
              matrix=['instance', 'rail'],
              thresholds=lib.steps([[1, 'orange'], [100, 'red']]),
              desc='Symbol errors + receive errors + link error recovery + link downed + transmit discards. '
                   + 'A column lit across many nodes is a leaf switch; a single cell is a cable or port.'),
    lib.table('Priorities paused the most (top 20)',
              [
                t('topk(20, max by (instance, netdev, priority, direction) ('
                  + rate('railscope_pfc_pause_duration_seconds_total', rng='5m') + '))', instant=true),
              ],
              unit='percentunit',
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              sort=['Value', true],
              thresholds=lib.steps([[th.pfcPauseFraction / 2, 'orange'], [th.pfcPauseFraction, 'red']]),
              desc='Fraction of time each priority was paused over 5 minutes, across the chosen nodes: '
                   + "red is where RailscopePFCPauseStorm fires. direction rx: pauses received (this NIC's "
                   + 'transmit is held back); tx: pauses sent (this NIC cannot drain).'),
    lib.table('Ports with the most link errors in the time range (top 20)',
              [
                t('topk(20, sum by (instance, device, port) (' + railPort(errorSum) + '))', instant=true),
              ],
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              sort=['Value', true],
              thresholds=lib.steps([[1, 'orange'], [100, 'red']]),
              desc='The noisiest ports of the chosen nodes and rails (ports without a rail stay): symbol '
                   + 'errors + receive errors + link error recovery + link downed + transmit discards. Scales '
                   + 'to any number of nodes, unlike the node × rail table.'),
  ];

  // A port's value over the best of its peers (recording rules), with the port's rail.
  local railOf = ' * on (instance, device, port) group_left (rail) railscope:port_rail:info{'
                 + lib.matchers([lib.clusterMatcher, 'instance=~"$instance"', 'rail=~"$rail"']) + '}';
  local belowPeers(byModel, peerByModel) =
    'bottomk(20, ' + byModel + '{' + lib.S + '}'
    + ' / ignoring (job, instance, device, port) group_left () ' + lib.fleetSel(peerByModel) + ')' + railOf;
  local pciRoles = ' * on (instance, pci_address) group_left (role, rdma_device, gpu) '
                   + sel('railscope_pci_device_info', 'role=~"nic|gpu"');
  local redBelowOne = [{ color: 'red', value: null }, { color: 'green', value: 1 }];
  local peers = [
    lib.row('Off their peers'),
    lib.table("Ports below their peers' rate (worst 20)",
              [
                t(belowPeers('railscope:ib_port_rate_bytes_per_second:by_model', 'railscope:ib_port_rate_bytes_per_second:median_by_model'),
                  instant=true),
              ],
              unit='percentunit',
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              thresholds=redBelowOne,
              sort=['Value', false],
              desc='Active rate over the best rate of its peers in the fleet, as the recording rules define them (the same adapter model, hca_type, and rail). Below 100%: trained down. '
                   + 'Needs the recording rules of alerts/railscope.rules.yml.'),
    lib.table("Ports below their peers' width (worst 20)", [
      t(belowPeers('railscope:ib_port_link_width_lanes:by_model', 'railscope:ib_port_link_width_lanes:median_by_model'),
        instant=true),
    ], unit='percentunit', w=12, hide=['Time'], links=NODE_LINK, thresholds=redBelowOne, sort=['Value', false]),
    lib.table('MTU mismatches (worst 20)',
              [
                t(belowPeers('railscope:ib_port_active_mtu_bytes:by_link_layer', 'railscope:ib_port_active_mtu_bytes:median_by_link_layer'),
                  instant=true),
              ],
              unit='percentunit',
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              thresholds=redBelowOne,
              sort=['Value', false],
              desc='Active RDMA MTU over the largest of the same link layer in the fleet.'),
    lib.table('Active MTU by node and rail',
              [
                t('max by (instance, rail) (' + withRail(sel('railscope_ib_port_active_mtu_bytes')) + ')', instant=true),
              ],
              unit='bytes',
              w=12,
              matrix=['instance', 'rail'],
              thresholds=[{ color: 'red', value: null }, { color: 'green', value: 4096 }]),
    lib.table('PCIe width below max (worst 20)',
              [
                t('bottomk(20, ' + railPci(sel('railscope_pci_link_width_lanes') + ' / ' + sel('railscope_pci_link_max_width_lanes') + pciRoles) + ')',
                  instant=true),
              ],
              unit='percentunit',
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              thresholds=redBelowOne,
              sort=['Value', false],
              desc='NICs and GPUs: current over maximum link width.'),
    lib.table('PCIe speed below max (worst 20)',
              [
                t('bottomk(20, ' + railPci(sel('railscope_pci_link_speed_transfers_per_second') + ' / '
                                           + sel('railscope_pci_link_max_speed_transfers_per_second') + pciRoles) + ')',
                  instant=true),
              ],
              unit='percentunit',
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              thresholds=[{ color: 'orange', value: null }, { color: 'green', value: 1 }],
              sort=['Value', false],
              desc='GPUs lower their speed at idle: a GPU below max here matters only under load.'),
    lib.table('AER errors in the time range by node (top 20)', [
      t('topk(20, sum by (instance, severity) (' + rate('railscope_pci_aer_errors_total', fn='increase', rng='$__range') + '))',
        instant=true),
    ], w=12, hide=['Time'], links=NODE_LINK, thresholds=lib.steps([[1, 'orange'], [100, 'red']]), sort=['Value', true]),
    lib.table('GPUs not ok (top 20)',
              [
                t('topk(20, sum by (instance, state) (' + railGpu(sel('railscope_gpu_state', lib.NOT_OK)) + '))', instant=true),
              ],
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              thresholds=lib.steps([[1, 'red']]),
              sort=['Value', true],
              desc='GPUs per node in state lost (fallen off the bus), timeout (NVML hanging) or error.'),
    lib.table('Inactive NVLinks by node and GPU (top 20)', [
      t('topk(20, sum by (instance, gpu) (1 - ' + railGpu(sel('railscope_nvlink_up')) + '))', instant=true),
    ], w=12, hide=['Time'], links=NODE_LINK, thresholds=lib.steps([[1, 'red']]), sort=['Value', true]),
    lib.table('Collectors failing (worst 20)', [
      t('bottomk(20, ' + sel('railscope_collector_success') + ')', instant=true),
    ], w=12, hide=['Time'], links=NODE_LINK, mappings=lib.UPDOWN, thresholds=lib.redBelow(1), sort=['Value', false]),
  ];

  // The physical layer across the chosen nodes: the weakest optics, the links closest to
  // what their FEC can correct, and devlink reporters in error.
  local physical = [
    lib.row('Physical layer'),
    lib.table('Weakest receive power (dBm, worst 20 lanes)',
              [
                t('bottomk(20, 10 * log10(1000 * (' + sel('railscope_transceiver_rx_power_watts') + ' > 0)))', instant=true),
              ],
              unit='dBm',
              w=8,
              hide=['Time'],
              links=NODE_LINK,
              sort=['Value', false],
              desc='The lanes receiving the least light across the chosen nodes (dark lanes, at 0 W, left out: see '
                   + 'the node dashboard). Compare with the low warning level of each module on its node dashboard.'),
    lib.table('Highest pre-FEC BER (top 20 links)',
              [
                t('topk(20, railscope:phy_pre_fec_ber:rate1h{' + lib.matchers([lib.clusterMatcher, 'instance=~"$instance"']) + '})',
                  instant=true),
              ],
              unit='sci',
              w=8,
              hide=['Time'],
              links=NODE_LINK,
              sort=['Value', true],
              thresholds=lib.steps([[th.preFecBerRsThreshold / 10, 'orange'], [th.preFecBerRsThreshold, 'red']]),
              desc='Bits corrected per bit of link rate over the last hour (railscope:phy_pre_fec_ber:rate1h); red is '
                   + 'where RailscopePreFECBERHigh fires on an RS-FEC link.'),
    lib.table('devlink reporters in error or with errors in the time range',
              [
                t('(' + sel('railscope_devlink_health_reporter_healthy') + ' == 0) or on (instance, devlink, port, reporter) (0 * (increase('
                  + sel('railscope_devlink_health_reporter_errors_total') + '[$__range]) > 0) + 1)', instant=true),
              ],
              w=8,
              hide=['Time'],
              links=NODE_LINK,
              mappings={ '0': { text: 'in error', color: 'red' }, '1': { text: 'errors, recovered', color: 'orange' } },
              desc='Health reporters of the chosen nodes that are in error now, or counted errors in the time range '
                   + 'and recovered. fw_fatal is a firmware crash.'),
  ];

  // Where workloads run: the chosen pods, jobs and units, by node, with the number of devices
  // each holds there (the `workload` source).
  // The fleet by switch (the neighbour collector): which ports and nodes are behind each leaf,
  // and their errors and flaps, so that a fault shared by one switch's ports shows as one row.
  local behind(x) = x + ' * on (instance, device, port) group_left (neighbour) max by (instance, device, port, neighbour) ('
                    + sel('railscope:port_neighbour:info', 'device!=""') + ')';
  local switches = [
    lib.row('By switch'),
    lib.table('Switches: ports and nodes behind each, errors and flaps in the time range',
              [
                t('count by (neighbour) (' + sel('railscope:port_neighbour:info') + ')', instant=true),
                t('count by (neighbour) (count by (neighbour, instance) (' + sel('railscope:port_neighbour:info') + '))', instant=true),
                t('sum by (neighbour) (' + behind(railPort('increase(' + sel('railscope_ib_port_symbol_errors_total') + '[$__range])')) + ')', instant=true),
                t('sum by (neighbour) (' + behind(railPort('increase(' + sel('railscope_ib_port_link_downed_total') + '[$__range])')) + ')', instant=true),
                t('count by (neighbour) (count by (neighbour, instance) (' + sel('railscope:neighbour_port_faults:info') + ')) or '
                  + '0 * count by (neighbour) (' + sel('railscope:port_neighbour:info') + ')', instant=true),
              ],
              w=24,
              h=8,
              sort=['Value #E', true],
              desc='Per switch (railscope:port_neighbour:info: LLDP System Name or IB NodeDescription): Value #A the ports '
                   + 'behind it, #B the nodes, #C symbol errors and #D link downs of its InfiniBand ports in the time range, '
                   + '#E the nodes with an error or flap signal now (railscope:neighbour_port_faults:info; '
                   + 'RailscopeSwitchSuspect fires at %d).' % th.switchSuspectNodes),
    lib.table('Ports behind each switch',
              [t(sel('railscope:port_neighbour:info'), instant=true)],
              w=12,
              h=8,
              hide=['Time', 'Value'],
              links=NODE_LINK,
              order=['neighbour', 'neighbour_port', 'instance', 'device', 'port', 'netdev', 'rail'],
              desc='Each link and the switch port at its far end; a row opens the node dashboard.'),
    lib.table('Rails: switches by node count',
              [t('count by (rail, neighbour) (' + sel('railscope:rail_neighbour:info') + ')', instant=true)],
              w=12,
              h=8,
              hide=['Time'],
              order=['rail', 'neighbour', 'Value'],
              desc='Nodes per rail and switch. Where one leaf serves a rail, a switch with one or two nodes of it is a '
                   + 'cable in the wrong leaf (RailscopeRailMiscabled).'),
  ];

  local workloads = [
    lib.row('Workloads'),
    lib.table('Pods: devices per node',
              [
                t('count by (instance, namespace, pod, resource) (' + sel('railscope_workload_device_info', 'pod=~"$pod"') + ')',
                  instant=true),
              ],
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              order=['namespace', 'pod', 'instance', 'resource', 'Value'],
              desc='Devices each pod holds on each node, from the kubelet (railscope_workload_device_info). Choose pods '
                   + 'with the Pod variable to see where they run; a row opens the node dashboard.'),
    lib.table('Jobs and units: devices per node',
              [
                t('count by (instance, kind, workload) (' + sel('railscope_workload_process_device_info', 'workload=~"$workload"') + ')',
                  instant=true),
              ],
              w=12,
              hide=['Time'],
              links=NODE_LINK,
              order=['kind', 'workload', 'instance', 'Value'],
              desc='Devices the processes of each Slurm job, systemd unit, login session or pod (by UID) have open on '
                   + 'each node (railscope_workload_process_device_info). Choose jobs with the Job or unit variable.'),
  ];

  lib.dashboard(
    config.dashboardUIDs.fleet,
    'railscope / fleet and rails',
    'Per-rail throughput and errors across nodes, and the nodes whose ports, PCIe links, '
    + 'GPUs or NVLinks are off their peers, and where workloads run.',
    overview + throughput + gpuActivity + errors + peers + physical + switches + workloads,
    fleet=true,
    runbooks=lib.runbooks.fleet,
  )
