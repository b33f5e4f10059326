//! Step 4: the RoCE MTU floor (`roceMTUBytes`) and one active MTU across the fabric.

use super::{ib, iwarp, roce, table};
use crate::doctor::checks::rules::ROCE_MTU_BYTES;

table! { "mtu";
    roce_port_at_4096_is_ok: [
        roce("mlx5_0", "eth0"),
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_0",port="1"} 4096"#,
    ] => [Ok "mtu" "1 port at active MTU 4096"];
    roce_port_on_a_1500_netdev_is_a_warning: [
        roce("mlx5_0", "eth0"),
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_0",port="1"} 1024"#,
        r#"railscope_ib_port_netdev_mtu_bytes{device="mlx5_0",port="1"} 1500"#,
    ] => [Warning "roce_mtu" "mlx5_0 port 1 has an active RoCE MTU of 1024 (netdev eth0 at MTU 1500)"];
    /// The floor is for RoCE: an InfiniBand port's MTU is the subnet manager's.
    infiniband_port_at_2048_is_ok: [
        ib("mlx5_0"),
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_0",port="1"} 2048"#,
    ] => [Ok "mtu" "1 port at active MTU 2048"];
    /// iWARP has an Ethernet link layer but no RoCE MTU.
    iwarp_port_at_1024_is_ok: [
        iwarp("iwp0", "eth0"),
        r#"railscope_ib_port_active_mtu_bytes{device="iwp0",port="1"} 1024"#,
    ] => [Ok "mtu" "1 port at active MTU 1024"];
    fabric_ports_at_different_mtus_are_a_warning: [
        ib("mlx5_0"), ib("mlx5_1"),
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_0",port="1"} 4096"#,
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_1",port="1"} 2048"#,
    ] => [Warning "mtu_mismatch" "the fabric ports do not share one active MTU (2048, 4096)"];
    roce_port_below_the_floor_and_its_peer_are_two_warnings: [
        roce("mlx5_0", "eth0"), roce("mlx5_1", "eth1"),
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_0",port="1"} 4096"#,
        r#"railscope_ib_port_active_mtu_bytes{device="mlx5_1",port="1"} 1024"#,
    ] => [
        Warning "roce_mtu" "mlx5_1 port 1 has an active RoCE MTU of 1024",
        Warning "mtu_mismatch" "(1024, 4096)",
    ];
    unknown_active_mtu_skips: [ib("mlx5_0")] => [
        Skip "mtu" "the active MTU of 1 port is not known",
    ];
    no_active_port_skips: [""] => [Skip "mtu" "no ACTIVE fabric port to check"];
}

/// The floor is the rules' `roceMTUBytes`: a port at it passes, one just below does not.
#[test]
fn roce_floor_is_the_rules_threshold() {
    for (mtu, want) in [(ROCE_MTU_BYTES, "mtu"), (ROCE_MTU_BYTES / 2.0, "roce_mtu")] {
        let text = format!(
            "{}\nrailscope_ib_port_active_mtu_bytes{{device=\"mlx5_0\",port=\"1\"}} {mtu}",
            roce("mlx5_0", "eth0")
        );
        let got = super::findings("mtu", &[], &text);
        assert_eq!(got[0].check, want, "{mtu}: {got:#?}");
    }
}
