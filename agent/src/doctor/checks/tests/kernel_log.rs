//! Step 11: the kernel-log events the kmsg collector counted.

use super::table;

const READ: &str = "railscope_kmsg_records_total 1200";

table! { "kernel";
    quiet_kernel_log_is_ok: [
        READ, r#"railscope_kmsg_events_total{kind="xid",code="79",pci_address="0000:1b:00.0"} 0"#,
    ] => [Ok "kernel" "no XID, SXID, NIC firmware, module or PCIe slot event"];
    nic_firmware_timeout_is_critical: [
        READ, r#"railscope_kmsg_events_total{kind="mlx5_cmd_timeout",pci_address="0000:01:00.0"} 2"#,
    ] => [Critical "kernel_log" "mlx5_cmd_timeout on 0000:01:00.0: 2 events"];
    fatal_sxid_is_critical: [
        READ, r#"railscope_kmsg_events_total{kind="sxid",code="24007",severity="fatal",device="nvswitch0"} 1"#,
    ] => [Critical "kernel_log" "sxid 24007 on nvswitch0: 1 event"];
    nonfatal_sxid_is_a_warning: [
        READ, r#"railscope_kmsg_events_total{kind="sxid",code="11012",severity="nonfatal",device="nvswitch0"} 1"#,
    ] => [Warning "kernel_log" "sxid 11012"];
    hardware_xid_is_critical: [
        READ, r#"railscope_kmsg_events_total{kind="xid",code="79",pci_address="0000:1b:00.0"} 1"#,
    ] => [Critical "kernel_log" "xid 79 on 0000:1b:00.0: 1 event"];
    application_xid_is_ok: [
        READ, r#"railscope_kmsg_events_total{kind="xid",code="13",pci_address="0000:1b:00.0"} 1"#,
    ] => [Ok "kernel_log" "xid 13"];
    module_and_pcie_slot_events_are_warnings: [
        READ,
        r#"railscope_kmsg_events_total{kind="pcie_link_down",pci_address="0000:17:02.0"} 1"#,
        r#"railscope_kmsg_events_total{kind="mlx5_module",device="mlx5_0"} 3"#,
        r#"railscope_kmsg_events_total{kind="pcie_power",pci_address="0000:17:02.0"} 1"#,
    ] => [
        Warning "kernel_log" "mlx5_module on mlx5_0: 3 events",
        Warning "kernel_log" "pcie_link_down",
        Warning "kernel_log" "pcie_power",
    ];
    unknown_event_kind_is_a_warning: [READ, r#"railscope_kmsg_events_total{kind="other"} 1"#] => [
        Warning "kernel_log" "other: 1 event",
    ];
    unread_kernel_log_skips: [""] => [Skip "kernel" "the kernel log is not read"];
}
