//! Step 5: a routable RoCE v2 GID on every RoCE port, at one index.

use super::{hints, ib, roce, table};

const V2_IPV4_AT_3: &str = r#"railscope_ib_port_gid_info{device="mlx5_0",port="1",index="0",gid="fe80:0000:0000:0000:0000:00ff:fe00:0001",type="IB/RoCE v1"} 1
railscope_ib_port_gid_info{device="mlx5_0",port="1",index="1",gid="fe80:0000:0000:0000:0000:00ff:fe00:0001",type="RoCE v2"} 1
railscope_ib_port_gid_info{device="mlx5_0",port="1",index="3",gid="0000:0000:0000:0000:0000:ffff:0a00:0001",type="RoCE v2"} 1"#;

table! { "gid";
    roce_v2_ipv4_gid_is_ok: [roce("mlx5_0", "eth0"), V2_IPV4_AT_3] => [
        Ok "gid" "RoCE v2 GID at index 3 on 1 port",
    ];
    roce_port_without_a_v2_gid_is_a_warning: [
        roce("mlx5_0", "eth0"),
        r#"railscope_ib_port_gid_info{device="mlx5_0",port="1",index="0",gid="fe80:0000:0000:0000:0000:00ff:fe00:0001",type="IB/RoCE v1"} 1"#,
    ] => [Warning "roce_v2_gid" "mlx5_0 port 1 (eth0) has no RoCE v2 GID"];
    roce_port_with_only_a_link_local_v2_gid_is_a_warning: [
        roce("mlx5_0", "eth0"),
        r#"railscope_ib_port_gid_info{device="mlx5_0",port="1",index="1",gid="fe80:0000:0000:0000:0000:00ff:fe00:0001",type="RoCE v2"} 1"#,
    ] => [
        Warning "roce_v2_gid_link_local" "mlx5_0 port 1 has only a link-local RoCE v2 GID (index 1)",
        Ok "gid" "RoCE v2 GID at index 1 on 1 port",
    ];
    v2_gids_at_different_indexes_are_a_warning: [
        roce("mlx5_0", "eth0"), roce("mlx5_1", "eth1"), V2_IPV4_AT_3,
        r#"railscope_ib_port_gid_info{device="mlx5_1",port="1",index="5",gid="0000:0000:0000:0000:0000:ffff:0a00:0002",type="RoCE v2"} 1"#,
    ] => [Warning "gid_index_differs" "the RoCE v2 GID is at different indexes on different ports (3, 5)"];
    infiniband_only_skips: [ib("mlx5_0")] => [Skip "gid" "no ACTIVE RoCE fabric port"];
}

#[test]
fn one_v2_gid_index_is_the_nccl_gid_index() {
    let text = [roce("mlx5_0", "eth0"), V2_IPV4_AT_3.to_owned()].join("\n");
    assert!(hints(&text).contains(&("NCCL_IB_GID_INDEX", "3".to_owned())));
}
