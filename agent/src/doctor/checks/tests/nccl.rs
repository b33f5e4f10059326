//! The NCCL settings the node implies, and the NCCL environment against them.

use super::{hints, ib, roce, table};

table! { "nccl";
    /// Without an environment (`--from`) there is nothing to compare.
    no_environment_is_no_step: [ib("mlx5_0")] => [];
    agreeing_environment_is_ok: [ib("mlx5_0"), ib("mlx5_1")]
        env [("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1")]
        => [Ok "nccl_env" "agree with the node (NCCL_IB_HCA==mlx5_0:1,mlx5_1:1)"];
    ib_disabled_on_a_node_with_rdma_ports_is_a_warning: [ib("mlx5_0")]
        env [("NCCL_IB_DISABLE", "1")]
        => [Warning "nccl_env" "NCCL_IB_DISABLE=1 while the node has RDMA ports"];
    ib_hca_naming_a_missing_device_is_a_warning: [ib("mlx5_0")]
        env [("NCCL_IB_HCA", "=mlx5_0,mlx5_9")]
        => [Warning "nccl_env" "NCCL_IB_HCA names mlx5_9 the node does not have"];
    /// Without '=' a name is a prefix: mlx5 matches every mlx5_N.
    ib_hca_prefix_matching_every_device_is_ok: [ib("mlx5_0"), ib("mlx5_1")]
        env [("NCCL_IB_HCA", "mlx5")]
        => [Ok "nccl_env" ""];
    ib_hca_leaving_out_a_rail_device_is_a_warning: [ib("mlx5_0"), ib("mlx5_1")]
        env [("NCCL_IB_HCA", "=mlx5_0")]
        => [Warning "nccl_env" "NCCL_IB_HCA leaves out rail devices: mlx5_1"];
    /// '^' excludes devices: nothing to compare with the rails.
    ib_hca_exclusion_list_is_ok: [ib("mlx5_0")]
        env [("NCCL_IB_HCA", "^mlx5_9")]
        => [Ok "nccl_env" ""];
    wrong_gid_index_is_a_warning: [
        roce("mlx5_0", "eth0"),
        r#"railscope_ib_port_gid_info{device="mlx5_0",port="1",index="3",gid="0000:0000:0000:0000:0000:ffff:0a00:0001",type="RoCE v2"} 1"#,
    ]
        env [("NCCL_IB_GID_INDEX", "0")]
        => [Warning "nccl_env" "NCCL_IB_GID_INDEX=0, but the RoCE v2 GID of the ports' address is at index 3"];
    gdr_level_below_the_nic_distance_is_a_warning: [
        ib("mlx5_0"), r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="0"} 20"#,
    ]
        env [("NCCL_NET_GDR_LEVEL", "PIX")]
        => [Warning "nccl_env" "NCCL_NET_GDR_LEVEL=PIX is below the node's NIC↔GPU distance PXB"];
    gdr_level_at_the_nic_distance_is_ok: [
        ib("mlx5_0"), r#"railscope_topology_nic_gpu_distance{device="mlx5_0",gpu="0"} 20"#,
    ]
        env [("NCCL_NET_GDR_LEVEL", "SYS")]
        => [Ok "nccl_env" "NCCL_NET_GDR_LEVEL=SYS"];
    socket_ifname_matching_no_netdev_is_a_warning: [
        ib("mlx5_0"), r#"railscope_netdev_info{netdev="eno1"} 1"#, r#"railscope_netdev_info{netdev="ib0"} 1"#,
    ]
        env [("NCCL_SOCKET_IFNAME", "=eth0")]
        => [Warning "nccl_env" "NCCL_SOCKET_IFNAME==eth0 matches no netdev railscope sees"];
    socket_ifname_prefix_of_a_netdev_is_ok: [
        ib("mlx5_0"), r#"railscope_netdev_info{netdev="eno1"} 1"#,
    ]
        env [("NCCL_SOCKET_IFNAME", "eno")]
        => [Ok "nccl_env" ""];
}

#[test]
fn active_ports_are_the_nccl_ib_hca() {
    let text = [ib("mlx5_0"), ib("mlx5_1")].join("\n");
    assert_eq!(
        hints(&text),
        vec![("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1".to_owned())]
    );
}

/// On a node whose rails follow its GPUs, an RDMA port on no GPU's rail is the front-end NIC:
/// the socket interface, not a rail.
#[test]
fn front_end_port_is_the_nccl_socket_interface() {
    let text = [
        ib("mlx5_0"),
        roce("mlx5_1", "eno1"),
        r#"railscope_rail_info{device="mlx5_0",port="1",rail="0",gpu="0"} 1"#.to_owned(),
        r#"railscope_rail_info{device="mlx5_1",port="1",rail="1",gpu=""} 1"#.to_owned(),
    ]
    .join("\n");
    assert_eq!(
        hints(&text),
        vec![
            ("NCCL_IB_HCA", "=mlx5_0:1".to_owned()),
            ("NCCL_SOCKET_IFNAME", "=eno1".to_owned()),
        ]
    );
}
