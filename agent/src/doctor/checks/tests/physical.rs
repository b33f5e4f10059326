//! Step 12: the physical layer under the port counters.

use super::table;

/// A 4-lane module on eth0 with the thresholds of a 100G-SR4 QSFP28 (watts).
const MODULE: &str = r#"railscope_transceiver_info{netdev="eth0",spec="sff8636",type="QSFP28",vendor="FINISAR CORP.",part_number="FTLC9555REPM",revision="A0",serial="X1",connector="MPO 1x12",media="optical"} 1
railscope_netdev_up{netdev="eth0"} 1
railscope_transceiver_rx_power_threshold_watts{netdev="eth0",level="high_alarm"} 0.0034
railscope_transceiver_rx_power_threshold_watts{netdev="eth0",level="high_warning"} 0.0017
railscope_transceiver_rx_power_threshold_watts{netdev="eth0",level="low_warning"} 0.0000891
railscope_transceiver_rx_power_threshold_watts{netdev="eth0",level="low_alarm"} 0.0000355
railscope_transceiver_tx_bias_threshold_amperes{netdev="eth0",level="high_alarm"} 0.013
railscope_transceiver_tx_bias_threshold_amperes{netdev="eth0",level="low_alarm"} 0.002
railscope_transceiver_temperature_threshold_celsius{netdev="eth0",level="high_warning"} 70
railscope_transceiver_temperature_celsius{netdev="eth0"} 41.5"#;

/// Four lanes at about -1 dBm.
const LANES_OK: &str = r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="1"} 0.00081
railscope_transceiver_rx_power_watts{netdev="eth0",lane="2"} 0.00079
railscope_transceiver_rx_power_watts{netdev="eth0",lane="3"} 0.00083
railscope_transceiver_rx_power_watts{netdev="eth0",lane="4"} 0.0008
railscope_transceiver_tx_bias_amperes{netdev="eth0",lane="1"} 0.0065"#;

const HEALTHY_REPORTERS: &str = r#"railscope_devlink_health_reporter_healthy{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="",reporter="fw"} 1
railscope_devlink_health_reporter_healthy{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="",reporter="fw_fatal"} 1
railscope_phy_link_up{netdev="eth0"} 1"#;

table! { "physical";
    a_healthy_module_and_firmware_is_ok: [MODULE, LANES_OK, HEALTHY_REPORTERS]
        => [Ok "physical" "1 transceiver module with 4 lanes within their thresholds, 1 PHY link up, 2 devlink reporters healthy"];
    nothing_to_read_skips: [r#"railscope_build_info{version="0.1.0"} 1"#]
        => [Skip "physical" "InfiniBand-mode ports have no module EEPROM"];
    a_lane_under_the_low_warning_is_a_warning_and_an_imbalance: [MODULE, HEALTHY_REPORTERS,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="1"} 0.00081"#,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="2"} 0.00005"#,
    ] => [
        Warning "transceiver_rx_power_low" "eth0 lane 2 receives -13.01 dBm, below the module's low warning threshold of -10.50 dBm",
        Warning "transceiver_lane_imbalance" "eth0 lane 2 receives -13.01 dBm against -0.92 dBm on the module's best lane (12.1 dB below",
    ];
    a_dark_lane_under_the_low_alarm_is_critical: [MODULE, HEALTHY_REPORTERS,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="1"} 0.00081"#,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="2"} 0"#,
    ] => [
        Critical "transceiver_rx_power_low" "eth0 lane 2 receives -inf dBm, below the module's low alarm threshold",
        Warning "transceiver_lane_imbalance" "eth0 lane 2",
    ];
    an_all_dark_module_is_no_imbalance: [HEALTHY_REPORTERS,
        r#"railscope_transceiver_rx_power_watts{netdev="eth1",lane="1"} 0.000001"#,
        r#"railscope_transceiver_rx_power_watts{netdev="eth1",lane="2"} 0"#,
    ] => [Ok "physical" "0 transceiver modules with 2 lanes"];
    three_db_below_is_within_the_margin: [MODULE, HEALTHY_REPORTERS,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="1"} 0.0008"#,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="2"} 0.00041"#,
    ] => [Ok "physical" "1 transceiver module with 2 lanes"];
    loss_of_signal_on_an_up_netdev_and_a_tx_fault_are_warnings: [MODULE, LANES_OK, HEALTHY_REPORTERS,
        r#"railscope_transceiver_lane_flag{netdev="eth0",lane="3",flag="rx_los"} 1"#,
        r#"railscope_transceiver_lane_flag{netdev="eth0",lane="3",flag="tx_fault"} 1"#,
        r#"railscope_transceiver_lane_flag{netdev="eth0",lane="1",flag="rx_lol"} 0"#,
        r#"railscope_transceiver_lane_flag{netdev="eth0",lane="1",flag="rx_power_low_warning"} 1"#,
    ] => [
        Warning "transceiver_flag" "the module of eth0 lane 3 raised rx_los",
        Warning "transceiver_flag" "the module of eth0 lane 3 raised tx_fault",
    ];
    loss_of_signal_on_a_netdev_set_down_is_not_a_finding: [MODULE, LANES_OK, HEALTHY_REPORTERS,
        r#"railscope_netdev_up{netdev="eth9"} 0"#,
        r#"railscope_transceiver_lane_flag{netdev="eth9",lane="1",flag="rx_los"} 1"#,
    ] => [Ok "physical" "1 transceiver module"];
    a_module_alarm_flag_and_a_module_fault: [MODULE, LANES_OK, HEALTHY_REPORTERS,
        r#"railscope_transceiver_module_flag{netdev="eth0",flag="temperature_high_alarm"} 1"#,
        r#"railscope_transceiver_module_flag{netdev="eth0",flag="module_fault"} 1"#,
        r#"railscope_transceiver_module_flag{netdev="eth0",flag="voltage_low_warning"} 1"#,
    ] => [
        Warning "transceiver_flag" "the module of eth0 raised temperature_high_alarm",
        Warning "transceiver_flag" "the module of eth0 raised module_fault",
    ];
    a_laser_bias_past_its_high_alarm: [MODULE, HEALTHY_REPORTERS,
        r#"railscope_transceiver_rx_power_watts{netdev="eth0",lane="1"} 0.0008"#,
        r#"railscope_transceiver_tx_bias_amperes{netdev="eth0",lane="1"} 0.0142"#,
    ] => [Warning "transceiver_tx_out_of_range" "eth0 lane 1: laser bias current 0.0142 is beyond its high alarm threshold 0.013"];
    a_module_at_its_warning_temperature: [MODULE, LANES_OK, HEALTHY_REPORTERS,
        r#"railscope_transceiver_temperature_celsius{netdev="eth0"} 70.2"#,
    ] => [Warning "transceiver_temperature" "the module of eth0 is at 70.2 °C, within 0 °C of its high warning threshold of 70.0 °C"];
    a_down_link_with_its_reason: [HEALTHY_REPORTERS,
        r#"railscope_phy_link_up{netdev="eth1"} 0"#,
        r#"railscope_phy_link_ext_state{netdev="eth1",state="link_training_failure",substate="kr_frame_lock_not_acquired"} 1"#,
    ] => [Warning "link_down_reason" "eth1 has no link: link_training_failure (kr_frame_lock_not_acquired)"];
    fw_fatal_in_error_is_critical_and_tx_a_warning: [MODULE, LANES_OK, HEALTHY_REPORTERS,
        r#"railscope_devlink_health_reporter_healthy{devlink="pci/0000:40:00.0",pci_address="0000:40:00.0",device="mlx5_1",port="",reporter="fw_fatal"} 0"#,
        r#"railscope_devlink_health_reporter_errors_total{devlink="pci/0000:40:00.0",pci_address="0000:40:00.0",device="mlx5_1",port="",reporter="fw_fatal"} 2"#,
        r#"railscope_devlink_health_reporter_healthy{devlink="pci/0000:40:00.0",pci_address="0000:40:00.0",device="mlx5_1",port="1",reporter="tx"} 0"#,
    ] => [
        Critical "devlink_reporter_error" "the devlink health reporter fw_fatal of pci/0000:40:00.0 is in error",
        Warning "devlink_reporter_error" "the devlink health reporter tx of pci/0000:40:00.0 port 1 is in error",
    ];
}
