// railscope's mixin parameters. Override any of them from your own jsonnet:
//
//   (import 'railscope-mixin/mixin.libsonnet') + { _config+:: { railscopeSelector: 'job="gpu-nodes"' } }
//
// or render the files with `python3 mixin/render.py --config my-overrides.libsonnet --out DIR`.
{
  _config+:: {
    // Selects railscope's own series in every rule, and the scrape jobs the dashboards offer.
    // The default matches any job whose name contains "railscope" (the Debian package's
    // example, the fleet test and the ServiceMonitor's Service all use `railscope`).
    railscopeSelector: 'job=~".*railscope.*"',

    // The label that tells clusters apart where one store holds several (Thanos, Mimir,
    // VictoriaMetrics). Every aggregation and join keeps it, so two clusters' rails, models
    // and nodes never mix; without such a label it changes nothing.
    clusterLabel: 'cluster',
    // Dashboards get a cluster variable, and every query filters on it.
    showMultiCluster: false,

    // Absolute link of each alert's runbook entry: `%s` is the alert name in lower case, which
    // is the anchor of its heading in alerts/RUNBOOK.md. Point it at where your on-call reads
    // the runbook (an internal mirror or wiki copy of alerts/RUNBOOK.md).
    runbookURLPattern: 'https://example.invalid/railscope/blob/main/alerts/RUNBOOK.md#%s',

    // Severity of an alert by name, over the default in mixin/alerts/alerts.libsonnet:
    // e.g. { RailscopePortRateBelowPeers: 'critical' } to page on a slow port.
    severityOverrides: {},

    // The text of an expression parameter (`%(name)s` in the rules: selector, cluster, a
    // threshold by its name, xidHardware, ...; lib/rules.libsonnet lists them), replacing what
    // the values above give it. Leave it empty: mixin/render.py uses it to write the Helm
    // chart's rule template, whose parameters are Helm values.
    paramOverrides: {},

    // Alert levels. Rules and dashboards read them from here, so a panel's threshold line is
    // where its alert fires. `railscope doctor` is built with the ones it checks too
    // (roceMTUBytes, memlockBytes, nicGPUDistance, nvlinkErrorsPerSecond and the hardware and
    // warning XIDs, which render.py writes into agent/src/doctor/checks/rules.rs).
    thresholds: {
      // RailscopePFCPauseStorm: fraction of time a priority is paused (0.2 = 200 ms per s).
      pfcPauseFraction: 0.2,
      // RailscopeSymbolErrorsAboveBER: IBTA's bit error rate limit; symbol errors per second
      // above rate_bits_per_second * this exceed it.
      symbolErrorBER: 1e-12,
      // RailscopeLinkFlapping: link downs in an hour, or state changes in 30 minutes, above this.
      linkFlaps: 2,
      // RailscopeRoCEMTUBelow4096: the RoCE active MTU a rail port needs.
      roceMTUBytes: 4096,
      // RailscopeRoCERetransmissions: retransmission events per second on a port.
      roceRetransmissionsPerSecond: 10,
      // RailscopeCNPSurge: CNPs sent, handled and ECN-marked packets per second on a port.
      cnpPerSecond: 50000,
      // railscope:port_in_use:info: a rail carries a job when its GPU's mean utilization over
      // 5 minutes is above this.
      gpuBusyUtilization: 0.2,
      // RailscopeRailImbalance: a busy rail below this share of the node's median rail, on a
      // node whose median rail moves more than railBusyBytesPerSecond.
      railImbalanceRatio: 0.5,
      railBusyBytesPerSecond: 1e9,
      // RailscopeRailErrorsAcrossFleet: a rail's link errors per second above this many times
      // the median rail's, and above railErrorsPerSecond.
      railErrorsMedianFactor: 3,
      railErrorsPerSecond: 0.1,
      // ... and only when the errors come from at least this many of the rail's nodes: one
      // node's bad cable is its own port alert, not the leaf switch's. A leaf serves 16-32
      // nodes per rail in a rail-optimized fabric; lower it for fleets of a few nodes per rail.
      railErrorsMinNodes: 3,
      // RailscopePCIeAERCorrectable: correctable AER errors per second on a function.
      aerCorrectablePerSecond: 0.1,
      // RailscopeNICTemperatureNearCritical: degrees Celsius under a NIC sensor's critical
      // threshold (railscope_nic_temperature_critical_celsius: the ASIC's, or the transceiver
      // module's) at which it fires.
      nicTemperatureMarginCelsius: 5,
      // RailscopeNICFarFromGPU: the NIC's nearest GPU at this distance or more (40 = SYS,
      // across the CPU interconnect; see railscope_topology_nic_gpu_distance).
      nicGPUDistance: 40,
      // RailscopeNVLinkErrors: data-link errors per second on a link: CRC and replay errors
      // (NVLink 1-4); on NVLink5 the errors FEC left uncorrected (effective) and the packets
      // the link found broken or dropped.
      nvlinkErrorsPerSecond: 1,
      // RailscopeGPUThermalSlowdown: the fraction of time (over 5 minutes) a GPU's clocks are
      // held down by thermal slowdown (software or hardware), from
      // railscope_gpu_clock_event_seconds_total.
      gpuThermalSlowdownFraction: 0.1,
      // RailscopeGPUPowerBrake: the fraction of time (over 5 minutes) the external power brake
      // holds a GPU's clocks down. The brake is never part of normal operation, so the level
      // is low: it only has to stay above one-off events.
      gpuPowerBrakeFraction: 0.01,
      // RailscopeMemlockLimitSmall: the soft RLIMIT_MEMLOCK of init, in bytes.
      memlockBytes: 1073741824,
      // RailscopeSysfsReadBlocked: seconds a device's sysfs reads have been blocked.
      sysfsBlockedSeconds: 60,
      // RailscopeScrapeSlow: seconds a scrape takes.
      scrapeSeconds: 5,
      // RailscopeNVLinkFECHistoryRising: the lowest NVLink5 FEC histogram bin counted as
      // "high". Bin n holds the codewords that needed about n symbol corrections; the link's
      // RS-FEC corrects up to 15 symbols per codeword (bins 0-15), so a codeword in a high bin
      // was corrected with little margin left. Healthy links fill the low bins only: the
      // default counts the upper half, 8-15. An integer from 0 to 15.
      nvlinkFecHighBin: 8,
      // RailscopeNVLinkFECHistoryRising: codewords per second in the high bins (all of them
      // together, per link, over nvlinkFecWindow) above which a link is losing margin.
      nvlinkFecHighBinPerSecond: 1,
      // railscope:nvlink_domain_gpus:expected: the GPUs of every multi-node NVLink domain
      // (72 on GB200/GB300 NVL72). 0 expects what the domain reported within
      // nvlinkDomainLookback, which misses a GPU absent since before that; set it only where
      // every domain the selector sees has this size (a partitioned rack or an NVL36 has fewer).
      nvlinkDomainGPUs: 0,
      // The GPU temperature panel's threshold line, in °C (no alert: thermal slowdown itself
      // raises RailscopeGPUThrottling). Set it to your GPUs' `GPU Max Operating Temp` from
      // `nvidia-smi -q`.
      gpuTemperatureCelsius: 85,

      // The physical layer: transceiver modules (the transceiver collector), the PHY's FEC and
      // link state (phy) and the NIC's devlink health reporters (devlink).
      //
      // RailscopeTransceiverLaneImbalance: a lane's received power this many dB under the
      // brightest lane of its module (3 dB = half the light) ...
      transceiverLaneImbalanceDb: 3,
      // ... while that brightest lane receives more than this, in watts (1e-5 W = -20 dBm): a
      // module whose lanes are all dark (the far end off, no fibre) is no imbalance.
      transceiverLaneLitWatts: 1e-5,
      // RailscopeTransceiverTemperatureHigh: degrees Celsius under the module's own high
      // warning threshold at which it fires (0: at the warning level the module advertises).
      transceiverTemperatureMarginCelsius: 0,
      // RailscopePreFECBERHigh: the pre-FEC bit error rate (corrected bits per bit of link
      // rate, over an hour) above which a link is losing margin, by the FEC mode in use.
      // RS: RS(544,514) "KP4" on PAM4 lanes (200G/400G/800G Ethernet, NDR/XDR) corrects up to
      // a BER of about 2.4e-4, RS(528,514) "KR4" on 25G NRZ lanes up to about 5e-5; healthy
      // links run at 1e-8 to 1e-6, so 1e-5 leaves margin under both.
      preFecBerRsThreshold: 1e-5,
      // LLRS: the low-latency RS(272,257+1), which corrects 7 symbols per codeword instead of 15.
      preFecBerLlrsThreshold: 1e-6,
      // BASE-R (FireCode, 10G/25G NRZ): a burst corrector with little margin.
      preFecBerBaseRThreshold: 1e-8,
      // No FEC (off or none): every bit error reaches the frames, so this is the link's BER.
      preFecBerNoFecThreshold: 1e-12,
      // RailscopeFECUncorrectableBlocks: FEC blocks the PHY could not correct in 15 minutes
      // above this (each one is a frame lost); it fires when that lasts 15 minutes.
      fecUncorrectableBlocks: 0,
      // RailscopeNetdevLinkFlapping: link downs of a netdev in 15 minutes above this.
      netdevLinkDownEvents: 1,
      // RailscopeDevlinkHealthReporterErrors: errors a devlink health reporter other than fw
      // and fw_fatal (tx, rx: a queue recovered) counted in an hour above this. An error of
      // fw fires at the first.
      devlinkReporterErrors: 3,

      // The switch at the far end of each link (the neighbour collector: LLDP, IB SMPs).
      //
      // RailscopeSwitchSuspect: ports of at least this many different nodes behind one
      // switch (the same neighbour name) show errors or flaps at once (railscope:neighbour_port_faults:info:
      // symbol errors above the BER limit, receive errors, link flaps, FEC uncorrectable
      // blocks, RoCE retransmissions, each at the level of its own port alert).
      switchSuspectNodes: 2,
      // RailscopeRailMiscabled: a node's rail port lands on another leaf group than the
      // group that holds more than this share of the rail's nodes (0.5: a strict majority;
      // at least 0.5, so that a rail has one majority group at most) ...
      railMiscabledMajority: 0.5,
      // ... on rails where at least this many nodes report a neighbour.
      railMiscabledMinNodes: 3,
      // RailscopeNeighbourFrameSizeBelowMTU: bytes a frame carries beyond the netdev's MTU:
      // 14 of Ethernet header and 4 of FCS. Set 22 where every frame is VLAN-tagged (RoCE
      // marking its priority by PCP sends 802.1Q-tagged frames: 4 more bytes).
      neighbourFrameOverheadBytes: 18,
    },

    // XIDs by NVIDIA's catalogue action (alerts/RUNBOOK.md has the table).
    xids: {
      // Reset the GPU, reboot the node or replace the GPU: RailscopeGPUXidHardware.
      hardware: [46, 48, 64, 74, 79, 95, 119, 120, 136, 140, 143, 155, 156, 158],
      // The GPU went on working but asks for attention: RailscopeGPUXidWarning.
      warning: [92, 94, 154],
      // Usually the application's fault: RailscopeGPUXidApplication.
      application: [13, 31, 43, 45],
    },
    // The leaf group of a switch, for RailscopeRailMiscabled: a regular expression on the
    // neighbour's name (anchored, as label_replace anchors it) whose first group names the
    // group, e.g. 'su[0-9]+-(rail[0-9]+)-.*' where a rail spans several leaves named by
    // scalable unit (su3-rail4-leaf: group rail4; a rail-4 port on a rail-5 leaf fires, one on
    // another unit's rail-4 leaf does not). The default, '(.*)', makes each switch its own group: right where each
    // rail has one leaf (a fleet of up to one leaf's worth of nodes); where a rail spans
    // several leaves none of them holds a majority, and the alert stays silent until this
    // names the groups. A name the expression does not match is in no group (never checked).
    // It goes into a PromQL string in double quotes, where a backslash is written twice: the
    // regex `\d` is `'\\\\d'` in jsonnet; classes (`[0-9]`) need none.
    neighbourGroupRegex: '(.*)',
    // How far back RailscopePortGone, RailscopeGPUGone and RailscopeNVLinkGone look for a
    // device the node had: one gone longer ago than this stops alerting (and a range this long
    // is read for every port, GPU and link at each evaluation).
    goneLookback: '3h',
    // The window of RailscopeNVLinkFECHistoryRising's rate of high-bin FEC codewords.
    nvlinkFecWindow: '15m',
    // How far back railscope:nvlink_domain_gpus:expected looks for the GPUs an NVLink domain
    // had: a GPU gone from the domain for longer stops counting against it (as goneLookback
    // does for RailscopeGPUGone).
    nvlinkDomainLookback: '3h',
    // How often the per-link NVLink rules (RailscopeNVLinkInactive, RailscopeNVLinkErrors,
    // RailscopeNVLinkGone; group railscope.nvlink) are evaluated. They read every link of
    // every GPU, half a DGX node's series; their `for` durations are 5m and 10m.
    nvlinkRulesInterval: '1m',

    // How long RailscopeGPUXidHardware keeps firing after the XID, so that the page stays
    // until someone acts.
    xidHardwareKeepFiringFor: '24h',

    // Grafana.
    dashboardTags: ['railscope', 'gpu', 'rdma'],
    dashboardRefresh: '1m',
    dashboardTimezone: '',
    dashboardUIDs: {
      node: 'railscope-node',
      fleet: 'railscope-fleet',
    },
  },
}
