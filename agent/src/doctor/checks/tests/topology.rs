//! Step 8: each rail NIC's nearest GPU against `nicGPUDistance`, and the GDR level it implies.

use super::{hints, ib, table};
use crate::doctor::checks::rules::NIC_GPU_DISTANCE;

table! { "topology";
    nic_under_the_gpus_switch_is_ok: [
        ib("mlx5_0"),
        r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="0"} 10"#,
        r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="1"} 50"#,
    ] => [Ok "topology" "every rail NIC has a GPU within PIX"];
    nic_across_the_cpu_from_every_gpu_is_a_warning: [
        ib("mlx5_0"), ib("mlx5_1"),
        r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="0"} 10"#,
        r#"railscope_topology_nic_gpu_distance{device="mlx5_1",gpu="0"} 50"#,
        r#"railscope_topology_nic_gpu_distance{device="mlx5_1",gpu="1"} 50"#,
    ] => [Warning "nic_far_from_gpu" "mlx5_1's nearest GPU (0) is SYS away"];
    /// A front-end NIC (on a rail without a GPU) is not for GPUDirect.
    front_end_nic_far_from_the_gpus_is_not_checked: [
        ib("mlx5_0"), ib("mlx5_1"),
        r#"railscope_rail_info{device="mlx5_0",port="1",rail="0",gpu="0"} 1"#,
        r#"railscope_rail_info{device="mlx5_1",port="1",rail="1",gpu=""} 1"#,
        r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="0"} 20"#,
        r#"railscope_topology_nic_gpu_distance{device="mlx5_1",gpu="0"} 50"#,
    ] => [Ok "topology" "every rail NIC has a GPU within PXB"];
    no_distances_skip: [ib("mlx5_0")] => [Skip "topology" "no GPU↔NIC distances"];
}

/// A NIC at the rules' `nicGPUDistance` is far; one just nearer is not, and sets the GDR level.
#[test]
fn far_is_the_rules_threshold() {
    let text = |d: f64| {
        format!(
            "{}\nrailscope_topology_nic_gpu_distance{{device=\"mlx5_0\",gpu=\"0\"}} {d}",
            ib("mlx5_0")
        )
    };
    let far = super::findings("topology", &[], &text(NIC_GPU_DISTANCE));
    assert_eq!(far[0].check, "nic_far_from_gpu", "{far:#?}");
    assert!(
        !hints(&text(NIC_GPU_DISTANCE))
            .iter()
            .any(|(k, _)| *k == "NCCL_NET_GDR_LEVEL")
    );
    let near = super::findings("topology", &[], &text(NIC_GPU_DISTANCE - 10.0));
    assert_eq!(near[0].check, "topology", "{near:#?}");
    assert!(
        hints(&text(NIC_GPU_DISTANCE - 10.0))
            .iter()
            .any(|(k, _)| *k == "NCCL_NET_GDR_LEVEL")
    );
}

#[test]
fn nearest_gpu_level_is_the_nccl_gdr_level() {
    let text = [
        ib("mlx5_0"),
        r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="0"} 20"#.to_owned(),
    ]
    .join("\n");
    assert!(hints(&text).contains(&("NCCL_NET_GDR_LEVEL", "PXB".to_owned())));
}
