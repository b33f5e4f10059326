//! Step 2: link rate and width against peers or the expectation; saturated PMA counters.

use super::{ib, roce, table};

const RATE_400: &str = r#"railscope_ib_port_rate_bytes_per_second{device="mlx5_0",port="1"} 50000000000
railscope_ib_port_link_width_lanes{device="mlx5_0",port="1"} 4"#;

table! { "link";
    peers_at_the_same_rate_and_width_are_ok: [
        ib("mlx5_0"), ib("mlx5_1"), RATE_400,
        r#"railscope_ib_port_rate_bytes_per_second{device="mlx5_1",port="1"} 50000000000"#,
        r#"railscope_ib_port_link_width_lanes{device="mlx5_1",port="1"} 4"#,
    ] => [Ok "link" "2 ports at 400 Gb/s 4X"];
    port_slower_than_its_peers_is_a_warning: [
        ib("mlx5_0"), ib("mlx5_1"), RATE_400,
        r#"railscope_ib_port_rate_bytes_per_second{device="mlx5_1",port="1"} 25000000000"#,
        r#"railscope_ib_port_link_width_lanes{device="mlx5_1",port="1"} 4"#,
    ] => [
        Warning "port_rate" "mlx5_1 port 1 trained at 200 Gb/s, its MT4129 peers at 400 Gb/s",
        Ok "link" "1 port at 400 Gb/s 4X",
    ];
    port_narrower_than_its_peers_is_a_warning: [
        ib("mlx5_0"), ib("mlx5_1"), RATE_400,
        r#"railscope_ib_port_rate_bytes_per_second{device="mlx5_1",port="1"} 50000000000"#,
        r#"railscope_ib_port_link_width_lanes{device="mlx5_1",port="1"} 2"#,
    ] => [
        Warning "port_width" "mlx5_1 port 1 runs 2X, its MT4129 peers 4X",
        Ok "link" "1 port at 400 Gb/s 4X",
    ];
    /// Every port trained low together: only the expectation shows it.
    port_below_the_expected_rate_is_a_warning: [
        ib("mlx5_0"),
        r#"railscope_ib_port_rate_bytes_per_second{device="mlx5_0",port="1"} 25000000000"#,
        r#"railscope_ib_port_link_width_lanes{device="mlx5_0",port="1"} 4"#,
        "railscope_inventory_expected_port_rate_bytes_per_second 50000000000",
    ] => [Warning "port_rate" "mlx5_0 port 1 trained at 200 Gb/s, expected 400 Gb/s"];
    port_below_the_expected_width_is_a_warning: [
        roce("mlx5_0", "eth0"), RATE_400,
        "railscope_inventory_expected_port_width_lanes 8",
    ] => [Warning "port_width" "mlx5_0 port 1 runs 4X, expected 8X"];
    saturated_pma_counter_is_a_warning: [
        ib("mlx5_0"), RATE_400,
        r#"railscope_ib_port_pma_saturated{device="mlx5_0",port="1",counter="symbol_error"} 1"#,
        r#"railscope_ib_port_pma_saturated{device="mlx5_0",port="1",counter="link_downed"} 0"#,
    ] => [
        Warning "pma_saturated" "mlx5_0 port 1: 1 PMA counter at their maximum",
        Ok "link" "1 port at 400 Gb/s 4X",
    ];
    no_active_port_skips: [""] => [Skip "link" "no ACTIVE fabric port to check"];
    port_without_rate_skips: [ib("mlx5_0")] => [Skip "link" "no ACTIVE fabric port to check"];
}
