//! Step 7: peer memory, the IOMMU, ACS and the memlock floor (`memlockBytes`).

use super::{gpu, ib, table};
use crate::doctor::checks::rules::MEMLOCK_BYTES;

table! { "gpudirect";
    no_gpus_skips: [ib("mlx5_0")] => [Skip "gpudirect" "GPUDirect RDMA needs GPUs and RDMA NICs"];
    no_rdma_nics_skips: [gpu("0")] => [Skip "gpudirect" ""];
    peermem_loaded_is_ok: [ib("mlx5_0"), gpu("0"), "railscope_host_gpudirect_rdma_module_loaded 1"] => [
        Ok "peermem" "nvidia_peermem is loaded",
    ];
    dmabuf_capable_driver_without_peermem_is_ok: [
        ib("mlx5_0"), gpu("0"),
        "railscope_host_gpudirect_rdma_module_loaded 0",
        "railscope_host_gpudirect_rdma_dmabuf_capable 1",
    ] => [Ok "peermem" "GPU memory registers through dma-buf"];
    neither_peermem_nor_dmabuf_is_a_warning: [
        ib("mlx5_0"), gpu("0"),
        "railscope_host_gpudirect_rdma_module_loaded 0",
        "railscope_host_gpudirect_rdma_dmabuf_capable 0",
    ] => [Warning "peermem" "neither nvidia_peermem is loaded nor is the NVIDIA module dma-buf capable"];
    translating_iommu_is_a_warning: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_host_iommu_mode{mode="translated"} 1"#,
        r#"railscope_host_iommu_mode{mode="passthrough"} 0"#,
    ] => [Warning "iommu" "the IOMMU translates DMA"];
    passthrough_iommu_is_ok: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_host_iommu_mode{mode="translated"} 0"#,
        r#"railscope_host_iommu_mode{mode="passthrough"} 1"#,
    ] => [Ok "iommu" "IOMMU passthrough"];
    acs_redirect_on_a_bridge_is_a_warning: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_pci_acs_state{pci_address="0000:17:02.0",state="redirect"} 1"#,
        r#"railscope_pci_acs_state{pci_address="0000:16:00.0",state="redirect"} 1"#,
        r#"railscope_pci_acs_state{pci_address="0000:15:00.0",state="redirect"} 0"#,
    ] => [Warning "acs" "ACS redirects peer-to-peer traffic on 2 bridges above a NIC or GPU"];
    acs_without_redirect_is_ok: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_pci_acs_state{pci_address="0000:15:00.0",state="redirect"} 0"#,
    ] => [Ok "acs" "no bridge above a NIC or GPU redirects"];
    small_memlock_limit_is_a_warning: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_host_memlock_limit_bytes{process="init",limit="soft"} 65536"#,
    ] => [Warning "memlock" "the locked-memory limit is 65536 bytes"];
    unlimited_memlock_is_ok: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_host_memlock_limit_bytes{process="init",limit="soft"} +Inf"#,
    ] => [Ok "memlock" "locked memory unlimited"];
    /// The hard limit is not what a job inherits.
    small_hard_memlock_limit_is_not_checked: [
        ib("mlx5_0"), gpu("0"),
        r#"railscope_host_memlock_limit_bytes{process="init",limit="hard"} 65536"#,
    ] => [];
}

/// The floor is the rules' `memlockBytes`: a limit at it passes, one byte less does not.
#[test]
fn memlock_floor_is_the_rules_threshold() {
    for (limit, want) in [
        (MEMLOCK_BYTES, "locked memory limit"),
        (MEMLOCK_BYTES - 1.0, "the locked-memory limit is"),
    ] {
        let text = format!(
            "{}\n{}\nrailscope_host_memlock_limit_bytes{{process=\"init\",limit=\"soft\"}} {limit}",
            ib("mlx5_0"),
            gpu("0")
        );
        let got = super::findings("gpudirect", &[], &text);
        assert!(got[0].summary.starts_with(want), "{limit}: {got:#?}");
    }
}
