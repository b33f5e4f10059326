//! Step 6: PFC on, on the same priorities, on every RoCE fabric netdev.

use super::{ib, roce, table};

const ETH0_PRIO3: &str = r#"railscope_dcb_pfc_enabled{netdev="eth0",priority="0"} 0
railscope_dcb_pfc_enabled{netdev="eth0",priority="3"} 1"#;

table! { "pfc";
    pfc_on_one_priority_is_ok: [
        roce("mlx5_0", "eth0"), ETH0_PRIO3,
        r#"railscope_netdev_ecn_marked_packets_total{netdev="eth0"} 12"#,
    ] => [Ok "pfc" "PFC on priority 3 of 1 RoCE netdev"];
    pfc_off_on_every_priority_is_a_warning: [
        roce("mlx5_0", "eth0"),
        r#"railscope_dcb_pfc_enabled{netdev="eth0",priority="0"} 0"#,
        r#"railscope_dcb_pfc_enabled{netdev="eth0",priority="3"} 0"#,
    ] => [Warning "pfc_off" "PFC is off on every priority of eth0"];
    pfc_on_different_priorities_is_a_warning: [
        roce("mlx5_0", "eth0"), roce("mlx5_1", "eth1"), ETH0_PRIO3,
        r#"railscope_dcb_pfc_enabled{netdev="eth1",priority="0"} 0"#,
        r#"railscope_dcb_pfc_enabled{netdev="eth1",priority="4"} 1"#,
    ] => [Warning "pfc_differs" "do not enable PFC on the same priorities"];
    pfc_off_on_one_netdev_of_two_is_two_warnings: [
        roce("mlx5_0", "eth0"), roce("mlx5_1", "eth1"), ETH0_PRIO3,
        r#"railscope_dcb_pfc_enabled{netdev="eth1",priority="3"} 0"#,
    ] => [
        Warning "pfc_off" "PFC is off on every priority of eth1",
        Warning "pfc_differs" "",
    ];
    roce_without_dcb_state_skips: [roce("mlx5_0", "eth0")] => [Skip "pfc" "no PFC state for a RoCE fabric netdev"];
    infiniband_skips: [ib("mlx5_0")] => [Skip "pfc" "no PFC state"];
}
