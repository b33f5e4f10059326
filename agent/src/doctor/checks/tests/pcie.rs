//! Step 3: PCIe width and speed against the maximum and the expectation; uncorrectable AER.

use super::table;

const NIC: &str = r#"railscope_pci_device_info{pci_address="0000:01:00.0",role="nic",rdma_device="mlx5_0"} 1
railscope_pci_link_max_width_lanes{pci_address="0000:01:00.0"} 16
railscope_pci_link_max_speed_transfers_per_second{pci_address="0000:01:00.0"} 32000000000"#;
const GPU: &str = r#"railscope_pci_device_info{pci_address="0000:1b:00.0",role="gpu",gpu="0"} 1
railscope_pci_link_max_width_lanes{pci_address="0000:1b:00.0"} 16
railscope_pci_link_width_lanes{pci_address="0000:1b:00.0"} 16
railscope_pci_link_max_speed_transfers_per_second{pci_address="0000:1b:00.0"} 32000000000"#;
const NIC_X16: &str = r#"railscope_pci_link_width_lanes{pci_address="0000:01:00.0"} 16"#;
const NIC_GEN5: &str =
    r#"railscope_pci_link_speed_transfers_per_second{pci_address="0000:01:00.0"} 32000000000"#;

table! { "pcie";
    nic_and_gpu_at_full_width_and_speed_are_ok: [NIC, NIC_X16, NIC_GEN5, GPU] => [
        Ok "pcie" "2 of 2 NIC and GPU functions at full width and (NICs) full speed",
    ];
    nic_below_its_maximum_width_is_a_warning: [
        NIC, NIC_GEN5, r#"railscope_pci_link_width_lanes{pci_address="0000:01:00.0"} 8"#,
    ] => [Warning "pcie_width" "mlx5_0 (0000:01:00.0) runs PCIe x8, its maximum is x16"];
    nic_below_its_maximum_speed_is_a_warning: [
        NIC, NIC_X16,
        r#"railscope_pci_link_speed_transfers_per_second{pci_address="0000:01:00.0"} 16000000000"#,
    ] => [Warning "pcie_speed" "runs PCIe Gen4 (16 GT/s), its maximum is Gen5 (32 GT/s)"];
    /// A GPU lowers its link speed at idle to save power.
    idle_gpu_below_its_maximum_speed_is_ok: [
        GPU, r#"railscope_pci_link_speed_transfers_per_second{pci_address="0000:1b:00.0"} 2500000000"#,
    ] => [Ok "pcie" "1 of 1 NIC and GPU function at full width"];
    gpu_below_its_maximum_width_is_a_warning: [
        r#"railscope_pci_device_info{pci_address="0000:1b:00.0",role="gpu",gpu="0"} 1"#,
        r#"railscope_pci_link_max_width_lanes{pci_address="0000:1b:00.0"} 16"#,
        r#"railscope_pci_link_width_lanes{pci_address="0000:1b:00.0"} 4"#,
    ] => [Warning "pcie_width" "GPU 0 (0000:1b:00.0) runs PCIe x4, its maximum is x16"];
    /// A card in a slot wired x8 trains x8 of an x8 maximum.
    nic_below_the_expected_width_is_a_warning: [
        r#"railscope_pci_device_info{pci_address="0000:01:00.0",role="nic"} 1"#,
        r#"railscope_pci_link_max_width_lanes{pci_address="0000:01:00.0"} 8"#,
        r#"railscope_pci_link_width_lanes{pci_address="0000:01:00.0"} 8"#,
        "railscope_inventory_expected_pcie_link_width_lanes 16",
    ] => [Warning "pcie_width_expected" "NIC 0000:01:00.0 runs PCIe x8, expected x16"];
    nic_below_the_expected_speed_is_a_warning: [
        r#"railscope_pci_device_info{pci_address="0000:01:00.0",role="nic",rdma_device="mlx5_0"} 1"#,
        r#"railscope_pci_link_max_speed_transfers_per_second{pci_address="0000:01:00.0"} 16000000000"#,
        r#"railscope_pci_link_speed_transfers_per_second{pci_address="0000:01:00.0"} 16000000000"#,
        "railscope_inventory_expected_pcie_link_speed_transfers_per_second 32000000000",
    ] => [Warning "pcie_speed_expected" "runs PCIe Gen4 (16 GT/s), expected Gen5 (32 GT/s)"];
    uncorrectable_aer_errors_are_critical: [
        NIC, NIC_X16, NIC_GEN5, GPU,
        r#"railscope_pci_aer_errors_total{pci_address="0000:01:00.0",severity="fatal"} 2"#,
        r#"railscope_pci_aer_errors_total{pci_address="0000:01:00.0",severity="correctable"} 9"#,
    ] => [
        Critical "pcie_aer_uncorrectable" "mlx5_0 (0000:01:00.0) has 2 uncorrectable (fatal) AER errors",
        Ok "pcie" "1 of 2 NIC and GPU functions",
    ];
    no_nic_or_gpu_function_skips: [
        r#"railscope_pci_device_info{pci_address="0000:00:01.0",role="bridge"} 1"#,
    ] => [Skip "pcie" "no NIC or GPU PCI functions"];
}
