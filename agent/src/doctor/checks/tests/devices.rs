//! Step 1: collectors, ports up, GPUs answering, the expected inventory.

use super::{gpu, ib, iwarp, port, table};

table! { "devices";
    healthy_port_and_gpu_are_ok: [ib("mlx5_0"), gpu("0")] => [
        Ok "ports" "1 of 1 RDMA port on 1 device ACTIVE / LinkUp",
        Ok "gpus" "1 of 1 GPU answer NVML",
    ];
    no_devices_and_no_gpus_skip: [""] => [
        Skip "ports" "no RDMA devices",
        Skip "gpus" "no GPUs",
    ];
    failed_collector_is_a_warning: [
        r#"railscope_collector_success{collector="pci"} 0"#,
        r#"railscope_collector_success{collector="infiniband"} 1"#,
        ib("mlx5_0"),
    ] => [
        Warning "collector_failing" "the pci collector did not complete",
        Ok "ports" "1 of 1 RDMA port",
        Skip "gpus" "",
    ];
    collector_with_unreadable_files_is_a_warning: [
        r#"railscope_collector_last_errors{collector="infiniband"} 2"#,
        r#"railscope_collector_last_errors{collector="pci"} 0"#,
        ib("mlx5_0"),
    ] => [
        Warning "collector_errors" "the infiniband collector could not read or parse 2 files",
        Ok "ports" "",
        Skip "gpus" "",
    ];
    port_down_is_critical: [
        port("mlx5_0", "", "InfiniBand", "DOWN", "Disabled", "CA"),
        ib("mlx5_1"),
    ] => [
        Critical "port_down" "mlx5_0 port 1 is DOWN / Disabled, not ACTIVE / LinkUp",
        Ok "ports" "1 of 2 RDMA ports on 2 devices ACTIVE / LinkUp",
        Skip "gpus" "",
    ];
    /// The link is up but the subnet manager has not made the port ACTIVE.
    port_init_with_link_up_is_critical: [port("mlx5_0", "", "InfiniBand", "INIT", "LinkUp", "CA")] => [
        Critical "port_down" "is INIT / LinkUp",
        Skip "gpus" "",
    ];
    /// An iWARP driver that reports no physical state: the port state alone counts.
    iwarp_port_without_physical_state_is_up: [iwarp("iwp0", "eth0")] => [
        Ok "ports" "1 of 1 RDMA port",
        Skip "gpus" "",
    ];
    lost_gpu_is_critical: [
        gpu("0"),
        gpu("1"),
        r#"railscope_gpu_state{gpu="0",state="lost"} 1"#,
        r#"railscope_gpu_state{gpu="1",state="lost"} 0"#,
    ] => [
        Skip "ports" "",
        Critical "gpu_lost" "GPU 0 (0000:0b:00.0) is lost: fallen off the bus",
        Ok "gpus" "1 of 2 GPUs answer NVML",
    ];
    hung_gpu_is_critical: [gpu("0"), r#"railscope_gpu_state{gpu="0",state="timeout"} 1"#] => [
        Skip "ports" "",
        Critical "gpu_lost" "is hung: NVML calls time out",
    ];
    missing_gpus_against_the_inventory_are_critical: [
        gpu("0"),
        r#"railscope_inventory_expected{kind="gpu"} 8"#,
        r#"railscope_inventory_present{kind="gpu"} 7"#,
    ] => [
        Skip "ports" "",
        Critical "inventory" "7 GPUs, the node must have 8",
        Ok "gpus" "",
    ];
    missing_rdma_ports_against_the_inventory_are_critical: [
        ib("mlx5_0"),
        r#"railscope_inventory_expected{kind="rdma_port"} 2"#,
        r#"railscope_inventory_present{kind="rdma_port"} 1"#,
    ] => [
        Ok "ports" "",
        Critical "inventory" "1 RDMA ports, the node must have 2",
        Skip "gpus" "",
    ];
    nvlinks_down_against_the_inventory_are_a_warning: [
        r#"railscope_inventory_expected{kind="nvlink_up"} 18"#,
        r#"railscope_inventory_present{kind="nvlink_up"} 17"#,
    ] => [
        Skip "ports" "",
        Warning "inventory" "17 NVLinks up, the node must have 18",
        Skip "gpus" "",
    ];
    inventory_as_expected_is_ok: [
        r#"railscope_inventory_expected{kind="rdma_port_up"} 1"#,
        r#"railscope_inventory_present{kind="rdma_port_up"} 1"#,
    ] => [
        Skip "ports" "",
        Ok "inventory" "1 RDMA ports up at the expected rate and width, as expected (1)",
        Skip "gpus" "",
    ];
    inventory_without_a_count_skips: [r#"railscope_inventory_expected{kind="gpu"} 8"#] => [
        Skip "ports" "",
        Skip "inventory" "the count of GPUs is not known",
        Skip "gpus" "",
    ];
}
