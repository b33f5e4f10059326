//! Step 13: who is at the far end of each port, and the far end's settings against this end's.

use super::{ib, roce, table};
use crate::doctor::checks::Table;
use crate::doctor::facts::Facts;

/// The neighbour collector's series of one link: its status (one series per status), and
/// with `neighbour` = `Some((name, port))` its identity.
fn link(
    device: &str,
    netdev: &str,
    protocol: &str,
    status: &str,
    neighbour: Option<(&str, &str)>,
) -> String {
    let key = format!(r#"device="{device}",port="1",netdev="{netdev}",protocol="{protocol}""#);
    let mut out = vec![format!("railscope_neighbour_changes_total{{{key}}} 0")];
    for s in [
        "ok",
        "no_frames",
        "not_available",
        "refused",
        "no_permission",
        "timeout",
    ] {
        out.push(format!(
            r#"railscope_neighbour_status{{{key},status="{s}"}} {}"#,
            u8::from(s == status)
        ));
    }
    if let Some((name, port)) = neighbour {
        out.push(format!(
            r#"railscope_neighbour_info{{{key},neighbour="{name}",neighbour_id="0x0c42a10300a1b2c3",neighbour_port="{port}",neighbour_port_description=""}} 1"#
        ));
    }
    out.join("\n")
}

/// A far-end value of the link of `device`.
fn far(family: &str, device: &str, netdev: &str, protocol: &str, value: f64) -> String {
    format!(
        r#"railscope_neighbour_{family}{{device="{device}",port="1",netdev="{netdev}",protocol="{protocol}"}} {value}"#
    )
}

/// This end's IB rate (bytes/s) and width of `device` port 1.
fn here(device: &str, rate: f64, width: u32) -> String {
    format!(
        "railscope_ib_port_rate_bytes_per_second{{device=\"{device}\",port=\"1\"}} {rate}\n\
         railscope_ib_port_link_width_lanes{{device=\"{device}\",port=\"1\"}} {width}"
    )
}

fn rail(device: &str, rail: u32) -> String {
    format!(r#"railscope_rail_info{{device="{device}",port="1",rail="{rail}",gpu="{rail}"}} 1"#)
}

fn pattern(rail: u32, pattern: &str) -> String {
    format!(
        r#"railscope_inventory_expected_rail_neighbour_info{{rail="{rail}",pattern="{pattern}"}} 1"#
    )
}

/// PFC per priority, `on` the enabled ones, as `family` with `labels`.
fn pfc(family: &str, labels: &str, on: &[u8]) -> String {
    (0..8u8)
        .map(|p| {
            format!(
                r#"{family}{{{labels},priority="{p}"}} {}"#,
                u8::from(on.contains(&p))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn host_pfc(netdev: &str, on: &[u8]) -> String {
    pfc(
        "railscope_dcb_pfc_enabled",
        &format!(r#"netdev="{netdev}""#),
        on,
    )
}

fn switch_pfc(device: &str, netdev: &str, on: &[u8]) -> String {
    pfc(
        "railscope_neighbour_pfc_enabled",
        &format!(r#"device="{device}",port="1",netdev="{netdev}",protocol="lldp""#),
        on,
    )
}

fn mtu(netdev: &str, mtu: u32) -> String {
    format!(r#"railscope_netdev_mtu_bytes{{netdev="{netdev}"}} {mtu}"#)
}

table! { "cabling";
    no_neighbour_series_skips: [ib("mlx5_0")]
        => [Skip "cabling" "no neighbour facts"];
    statuses_without_a_neighbour_are_rows_not_findings: [ib("mlx5_0"), roce("mlx5_1", "eth1"),
        link("mlx5_0", "", "smp", "no_permission", None),
        link("mlx5_1", "eth1", "lldp", "no_frames", None),
        link("mlx5_1", "", "smp", "not_available", None),
    ] => [Skip "cabling" "no neighbour known on 3 links (1 no_frames, 1 no_permission, 1 not_available)"];
    an_ib_far_end_at_this_ends_rate_is_ok: [ib("mlx5_0"), here("mlx5_0", 50e9, 4),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-01 MQM9790", "17"))),
        far("rate_bytes_per_second", "mlx5_0", "", "smp", 50e9),
        far("link_width_lanes", "mlx5_0", "", "smp", 4.0),
    ] => [Ok "cabling" "1 neighbour of 1 link known, the far ends' settings match this end's"];
    an_ib_far_end_at_half_the_rate_is_rate_lower: [ib("mlx5_0"), here("mlx5_0", 50e9, 4),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-01 MQM9790", "17"))),
        far("rate_bytes_per_second", "mlx5_0", "", "smp", 25e9),
        far("link_width_lanes", "mlx5_0", "", "smp", 4.0),
    ] => [Warning "neighbour_rate_lower" "the far end of mlx5_0 port 1 (leaf-01 MQM9790 port 17) runs at 200 Gb/s 4x, this end at 400 Gb/s 4x"];
    an_ib_far_end_narrower_at_the_same_rate_is_rate_lower: [ib("mlx5_0"), here("mlx5_0", 50e9, 4),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-01", "17"))),
        far("link_width_lanes", "mlx5_0", "", "smp", 2.0),
    ] => [Warning "neighbour_rate_lower" "runs at 2x, this end at 400 Gb/s 4x"];
    a_far_end_faster_than_this_end_is_not_a_finding: [ib("mlx5_0"), here("mlx5_0", 25e9, 4),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-01", "17"))),
        far("rate_bytes_per_second", "mlx5_0", "", "smp", 50e9),
    ] => [Ok "cabling" "1 neighbour of 1 link known"];
    an_mtu_9000_netdev_on_a_1518_switch_port_is_above_the_frame_size: [roce("mlx5_1", "eth1"), mtu("eth1", 9000),
        link("mlx5_1", "eth1", "lldp", "ok", Some(("leaf-a3-07", "Ethernet1/12"))),
        far("max_frame_size_bytes", "mlx5_1", "eth1", "lldp", 1518.0),
    ] => [Warning "neighbour_frame_size" "eth1 has MTU 9000 (9018 B frames) but its switch port leaf-a3-07 Ethernet1/12 takes frames of at most 1518 B"];
    mtu_plus_18_equal_to_the_frame_size_fits: [roce("mlx5_1", "eth1"), mtu("eth1", 9198),
        link("mlx5_1", "eth1", "lldp", "ok", Some(("leaf-a3-07", "Ethernet1/12"))),
        far("max_frame_size_bytes", "mlx5_1", "eth1", "lldp", 9216.0),
    ] => [Ok "cabling" "1 neighbour of 1 link known"];
    pfc_on_other_priorities_than_the_switch_is_a_mismatch: [roce("mlx5_1", "eth1"), host_pfc("eth1", &[3]),
        link("mlx5_1", "eth1", "lldp", "ok", Some(("leaf-a3-07", "Ethernet1/12"))),
        switch_pfc("mlx5_1", "eth1", &[3, 4]),
    ] => [Warning "neighbour_pfc_mismatch" "eth1 enables PFC on priority 3 but its switch port leaf-a3-07 Ethernet1/12 on 3,4"];
    the_same_pfc_priorities_match: [roce("mlx5_1", "eth1"), host_pfc("eth1", &[3]),
        link("mlx5_1", "eth1", "lldp", "ok", Some(("leaf-a3-07", "Ethernet1/12"))),
        switch_pfc("mlx5_1", "eth1", &[3]),
    ] => [Ok "cabling" "1 neighbour of 1 link known"];
    a_switch_that_sent_no_pfc_tlv_is_not_compared: [roce("mlx5_1", "eth1"), host_pfc("eth1", &[3]),
        link("mlx5_1", "eth1", "lldp", "ok", Some(("leaf-a3-07", "Ethernet1/12"))),
    ] => [Ok "cabling" "1 neighbour of 1 link known"];
    a_neighbour_outside_its_rails_pattern_is_miscabled: [ib("mlx5_0"), ib("mlx5_3"), rail("mlx5_0", 0), rail("mlx5_3", 3),
        pattern(0, "^leaf-0[1-4]"), pattern(3, "^leaf-a3-"),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-02 MQM9790", "5"))),
        link("mlx5_3", "", "smp", "ok", Some(("leaf-02 MQM9790", "6"))),
    ] => [Warning "rail_miscabled" "mlx5_3 port 1 is on rail 3 but its neighbour \"leaf-02 MQM9790\" (port 6) does not match the rail's expected pattern \"^leaf-a3-\""];
    neighbours_matching_their_rails_are_ok: [ib("mlx5_0"), ib("mlx5_3"), rail("mlx5_0", 0), rail("mlx5_3", 3),
        pattern(0, "^leaf-0[1-4]"), pattern(3, "^leaf-a3-"),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-02 MQM9790", "5"))),
        link("mlx5_3", "", "smp", "ok", Some(("leaf-a3-01", "6"))),
    ] => [Ok "cabling" "2 neighbours of 2 links known, the far ends' settings match this end's; 2 match its rail's expected pattern"];
    a_rail_without_a_pattern_is_not_checked: [ib("mlx5_0"), rail("mlx5_0", 1), pattern(0, "^leaf-0"),
        link("mlx5_0", "", "smp", "ok", Some(("spine-9", "5"))),
    ] => [Ok "cabling" "; 0 match its rail's expected pattern"];
    a_link_without_a_status_yet_is_pending: [roce("mlx5_1", "eth1"),
        r#"railscope_neighbour_changes_total{device="mlx5_1",port="1",netdev="eth1",protocol="lldp"} 0"#,
    ] => [Skip "cabling" "no neighbour known on 1 link (1 pending)"];
    a_pattern_that_does_not_compile_is_said: [ib("mlx5_0"), rail("mlx5_0", 0), pattern(0, "^leaf-("),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-01", "5"))),
    ] => [Warning "rail_pattern_invalid" "the expected neighbour pattern of rail 0 is not a regular expression"];
}

/// The cabling table of `text`.
fn cabling_table(text: &str) -> Table {
    let facts = Facts::parse_text(text).unwrap();
    let (steps, _) = crate::doctor::checks::run(&facts, &[]);
    steps
        .into_iter()
        .find(|s| s.id == "cabling")
        .and_then(|s| s.table)
        .unwrap()
}

#[test]
fn the_table_has_a_row_per_link_in_rail_order_with_the_far_end() {
    let text = [
        ib("mlx5_0"),
        ib("mlx5_1"),
        roce("mlx5_2", "eth2"),
        rail("mlx5_0", 1),
        rail("mlx5_1", 0),
        here("mlx5_1", 50e9, 4),
        link("mlx5_0", "", "smp", "timeout", None),
        link("mlx5_1", "", "smp", "ok", Some(("leaf-01 MQM9790", "17"))),
        far("rate_bytes_per_second", "mlx5_1", "", "smp", 50e9),
        far("link_width_lanes", "mlx5_1", "", "smp", 4.0),
        link(
            "mlx5_2",
            "eth2",
            "lldp",
            "ok",
            Some(("leaf-a3-07", "Ethernet1/12")),
        ),
        far("max_frame_size_bytes", "mlx5_2", "eth2", "lldp", 9216.0),
        switch_pfc("mlx5_2", "eth2", &[3]),
    ]
    .join("\n");
    let table = cabling_table(&text);
    let keys: Vec<&str> = table.columns.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        keys,
        [
            "device",
            "port",
            "rail",
            "netdev",
            "neighbour",
            "neighbour_port",
            "protocol",
            "far_end",
            "status"
        ]
    );
    assert_eq!(
        table.rows,
        [
            [
                "mlx5_1",
                "1",
                "0",
                "",
                "leaf-01 MQM9790",
                "17",
                "smp",
                "400 Gb/s, 4x",
                "ok"
            ],
            ["mlx5_0", "1", "1", "", "", "", "smp", "", "timeout"],
            [
                "mlx5_2",
                "1",
                "",
                "eth2",
                "leaf-a3-07",
                "Ethernet1/12",
                "lldp",
                "frame 9216 B, PFC 3",
                "ok"
            ],
        ]
    );
}

#[test]
fn text_and_json_show_the_table() {
    let text = [
        ib("mlx5_0"),
        link("mlx5_0", "", "smp", "ok", Some(("leaf-01 MQM9790", "17"))),
        link("mlx5_0", "", "lldp", "no_permission", None),
    ]
    .join("\n");
    let facts = Facts::parse_text(&text).unwrap();
    let report = crate::doctor::diagnose(&facts, &[], "test".to_owned());
    let out = crate::doctor::render::text(&report, false);
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.contains("Cabling"))
        .skip_while(|l| !l.starts_with("  device"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        table,
        [
            "  device  port  rail  netdev  neighbour        neighbour port  protocol  far end  status",
            "  mlx5_0  1     -     -       -                -               lldp      -        no_permission",
            "  mlx5_0  1     -     -       leaf-01 MQM9790  17              smp       -        ok",
        ],
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&crate::doctor::render::json(&report)).unwrap();
    let step = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "cabling")
        .unwrap();
    assert_eq!(step["table"]["columns"][5]["key"], "neighbour_port");
    assert_eq!(step["table"]["rows"][1]["neighbour"], "leaf-01 MQM9790");
    assert_eq!(step["table"]["rows"][0]["status"], "no_permission");
    let other = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "mtu")
        .unwrap();
    assert!(other.get("table").is_none());
}
