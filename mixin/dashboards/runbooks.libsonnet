// Which panels link to which runbook entries: panel title → the alerts of
// alerts/railscope.rules.yml that fire on what the panel shows. Each alert becomes a panel link
// "Runbook: <alert>" to std.format(runbookURLPattern, <alert in lower case>), the anchor of its
// heading in alerts/RUNBOOK.md. A title that names no panel fails the rendering;
// tests/tests/rules/dashboards.rs checks that every alert exists and has a runbook heading.
{
  node: {
    // Overview
    'Ports ACTIVE': ['RailscopePortDown'],
    'GPUs up': ['RailscopeGPULost'],
    'Collectors failing': ['RailscopeCollectorFailing'],
    'GPUDirect RDMA module': ['RailscopePeermemMissing'],
    'IOMMU mode': ['RailscopeIOMMUTranslated'],
    // RDMA ports
    'Logical state': ['RailscopePortDown', 'RailscopeLinkFlapping'],
    'Physical state': ['RailscopePortDown'],
    'Active rate': ['RailscopePortRateBelowPeers', 'RailscopePortRateBelowExpected'],
    'Link width': ['RailscopePortWidthBelowPeers', 'RailscopePortWidthBelowExpected'],
    'MTU: RDMA active vs netdev': ['RailscopeMTUMismatch', 'RailscopeRoCEMTUBelow4096'],
    'Port data rate': ['RailscopeRailImbalance'],
    // Port error counters
    'Symbol errors': ['RailscopeSymbolErrorsAboveBER'],
    'Bit error rate (symbol errors per bit)': ['RailscopeSymbolErrorsAboveBER'],
    'Link error recovery and link downed': ['RailscopeLinkErrorRecovery', 'RailscopeLinkFlapping'],
    'Receive errors': ['RailscopeReceiveErrors'],
    'Transmit discards and constraint errors': ['RailscopeReceiveErrors'],
    'Saturated PMA counters (worst first)': ['RailscopePmaCounterSaturated'],
    'Device read errors': ['RailscopeCollectorErrors'],
    // RoCE congestion
    'PFC pause fraction': ['RailscopePFCPauseStorm'],
    'Pause storm events': ['RailscopePFCStormEvents'],
    'CNP and ECN': ['RailscopeCNPSurge'],
    'RoCE retransmissions and timeouts': ['RailscopeRoCERetransmissions'],
    'Out of buffer': ['RailscopeRDMAOutOfBuffer'],
    // GIDs
    'GID entries by type': ['RailscopeRoCEPortWithoutV2GID', 'RailscopeGIDTableChanged'],
    'GID table': ['RailscopeGIDTableChanged'],
    // PCIe
    'NIC and GPU links: width and speed vs max': ['RailscopePCIeWidthDegraded', 'RailscopePCIeSpeedDegraded'],
    'Width and speed over max': ['RailscopePCIeWidthDegraded', 'RailscopePCIeSpeedDegraded'],
    'AER errors': ['RailscopePCIeAERCorrectable', 'RailscopePCIeAERUncorrectable'],
    'AER errors by type (totals, top 20)': ['RailscopePCIeAERCorrectable', 'RailscopePCIeAERUncorrectable'],
    'ACS state of bridges': ['RailscopeACSRedirect'],
    // Physical layer
    Transceivers: ['RailscopeTransceiverUnreadable'],
    'Optics: receive power': [
      'RailscopeTransceiverRxPowerLowWarning',
      'RailscopeTransceiverRxPowerLowAlarm',
      'RailscopeTransceiverLaneImbalance',
    ],
    'Optics: transmit power': ['RailscopeTransceiverTxOutOfRange'],
    'Optics: laser bias current': ['RailscopeTransceiverTxOutOfRange'],
    'Transceiver temperature': ['RailscopeTransceiverTemperatureHigh'],
    'Transceiver flags raised (last 10 minutes)': [
      'RailscopeTransceiverLossOfSignal',
      'RailscopeTransceiverFault',
      'RailscopeTransceiverAlarmFlag',
    ],
    'FEC blocks: corrected and uncorrectable': ['RailscopeFECUncorrectableBlocks'],
    'Pre-FEC BER': ['RailscopePreFECBERHigh'],
    'Link downs': ['RailscopeNetdevLinkFlapping'],
    'Link down reasons in the time range': ['RailscopeNetdevLinkDownReason', 'RailscopeNetdevLinkFlapping'],
    'devlink health reporters': ['RailscopeDevlinkFirmwareFatal', 'RailscopeDevlinkHealthReporterErrors'],
    'devlink errors and recoveries in the time range': ['RailscopeDevlinkFirmwareFatal', 'RailscopeDevlinkHealthReporterErrors'],
    // Topology and rails
    'NIC ↔ GPU distance': ['RailscopeNICFarFromGPU'],
    'Nearest GPU per NIC': ['RailscopeNICFarFromGPU'],
    // GPUs
    GPUs: ['RailscopeGPULost'],
    'GPUs throttled, by reason': ['RailscopeGPUThrottling'],
    'ECC errors (volatile)': ['RailscopeGPUECCUncorrectable'],
    // An empty XID panel is only reassuring while XID events are registered.
    'XID errors': [
      'RailscopeGPUXidHardware',
      'RailscopeGPUXidWarning',
      'RailscopeGPUXidApplication',
      'RailscopeGPUXidEventsUnavailable',
    ],
    'Memory health': ['RailscopeGPURowRemapPending', 'RailscopeGPURowRemapFailure'],
    // Kernel log
    'Kernel-log events': [
      'RailscopeNVSwitchFatalSXid',
      'RailscopeNVSwitchSXid',
      'RailscopeNICFirmwareUnresponsive',
      'RailscopeNICModuleError',
      'RailscopePCIeSlotLinkDown',
      'RailscopePCIeSlotPowerInsufficient',
    ],
    'GPU PCIe (NVML)': ['RailscopeGPUPCIeWidthDegraded'],
    'NVLink fabric health': ['RailscopeGPUFabricUnhealthy', 'RailscopeGPUFabricDegraded'],
    'NVLink-C2C links': ['RailscopeGPUC2CLinkDown'],
    // GPU activity
    'Clock event time, by reason': ['RailscopeGPUThrottling', 'RailscopeGPUThermalSlowdown', 'RailscopeGPUPowerBrake'],
    'Thermal slowdown time': ['RailscopeGPUThermalSlowdown'],
    'Power brake time': ['RailscopeGPUPowerBrake'],
    // NVLink
    'Active links per GPU': ['RailscopeNVLinkInactive'],
    'Inactive links (worst first)': ['RailscopeNVLinkInactive'],
    'NVLink errors by GPU': ['RailscopeNVLinkErrors'],
    'NVLink error rate per link (top 20)': ['RailscopeNVLinkErrors'],
    'NVLink5 link recoveries': ['RailscopeNVLinkErrors'],
    'NVLink5 FEC high-bin codewords per link': ['RailscopeNVLinkFECHistoryRising'],
    // Host: GPUDirect readiness
    'Kernel modules': ['RailscopePeermemMissing'],
    IOMMU: ['RailscopeIOMMUTranslated'],
    'Memlock limits': ['RailscopeMemlockLimitSmall'],
    // Agent
    'Collector success': ['RailscopeCollectorFailing'],
    'Collector errors': ['RailscopeCollectorErrors'],
    'Scrape duration and up': ['RailscopeAgentDown', 'RailscopeScrapeSlow'],
  },

  fleet: {
    // Overview
    'Nodes up': ['RailscopeAgentDown'],
    'Ports not ACTIVE': ['RailscopePortDown'],
    'GPUs lost': ['RailscopeGPULost'],
    'NVLinks inactive': ['RailscopeNVLinkInactive'],
    'Nodes without nvidia_peermem': ['RailscopePeermemMissing'],
    // Rails: throughput
    'Throughput per rail': ['RailscopeRailImbalance'],
    'Mean throughput per port, by rail': ['RailscopeRailImbalance'],
    'Throughput by node and rail (now)': ['RailscopeRailImbalance'],
    // Rails: errors
    'Symbol errors per rail': ['RailscopeSymbolErrorsAboveBER', 'RailscopeRailErrorsAcrossFleet'],
    'Receive errors per rail': ['RailscopeReceiveErrors', 'RailscopeRailErrorsAcrossFleet'],
    'Link error recovery per rail': ['RailscopeLinkErrorRecovery'],
    'Link downed per rail': ['RailscopeLinkFlapping', 'RailscopeRailErrorsAcrossFleet'],
    'Transmit discards per rail': ['RailscopeReceiveErrors'],
    'RoCE retransmissions per rail': ['RailscopeRoCERetransmissions'],
    'CNP and ECN per rail': ['RailscopeCNPSurge'],
    'Out of buffer per rail': ['RailscopeRDMAOutOfBuffer'],
    'Error counts in the time range by node and rail': ['RailscopeRailErrorsAcrossFleet'],
    'Priorities paused the most (top 20)': ['RailscopePFCPauseStorm'],
    'Ports with the most link errors in the time range (top 20)': [
      'RailscopeSymbolErrorsAboveBER',
      'RailscopeReceiveErrors',
      'RailscopeLinkErrorRecovery',
      'RailscopeLinkFlapping',
    ],
    // Off their peers
    "Ports below their peers' rate (worst 20)": ['RailscopePortRateBelowPeers'],
    "Ports below their peers' width (worst 20)": ['RailscopePortWidthBelowPeers'],
    'MTU mismatches (worst 20)': ['RailscopeMTUMismatch'],
    'Active MTU by node and rail': ['RailscopeMTUMismatch', 'RailscopeRoCEMTUBelow4096'],
    'PCIe width below max (worst 20)': ['RailscopePCIeWidthDegraded'],
    'PCIe speed below max (worst 20)': ['RailscopePCIeSpeedDegraded'],
    'AER errors in the time range by node (top 20)': ['RailscopePCIeAERCorrectable', 'RailscopePCIeAERUncorrectable'],
    'GPUs not ok (top 20)': ['RailscopeGPULost'],
    'Inactive NVLinks by node and GPU (top 20)': ['RailscopeNVLinkInactive'],
    'Collectors failing (worst 20)': ['RailscopeCollectorFailing'],
    'Weakest receive power (dBm, worst 20 lanes)': ['RailscopeTransceiverRxPowerLowWarning', 'RailscopeTransceiverRxPowerLowAlarm'],
    'Highest pre-FEC BER (top 20 links)': ['RailscopePreFECBERHigh'],
    'devlink reporters in error or with errors in the time range': ['RailscopeDevlinkFirmwareFatal', 'RailscopeDevlinkHealthReporterErrors'],
  },
}
