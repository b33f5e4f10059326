//! Step 9: NVLinks down among links up, data-link errors, fabric and C2C health.

use super::table;
use crate::doctor::checks::rules::NVLINK_ERRORS_PER_SECOND;

const GPU0_LINKS_UP: &str = r#"railscope_nvlink_up{gpu="0",link="0"} 1
railscope_nvlink_up{gpu="0",link="1"} 1"#;

table! { "nvlink";
    every_link_up_is_ok: [GPU0_LINKS_UP] => [
        Ok "nvlink" "2 of 2 NVLinks up, no replay or recovery errors",
    ];
    link_down_while_others_are_up_is_a_warning: [
        GPU0_LINKS_UP, r#"railscope_nvlink_up{gpu="0",link="2"} 0"#,
    ] => [Warning "nvlink_inactive" "GPU 0 NVLink 2 is down while 2 of its links are up"];
    /// A GPU with every link down has no NVLink in use (a PCIe GPU): nothing to say.
    gpu_with_every_link_down_is_not_a_finding: [
        r#"railscope_nvlink_up{gpu="0",link="0"} 0"#,
        r#"railscope_nvlink_up{gpu="0",link="1"} 0"#,
    ] => [Ok "nvlink" "0 of 2 NVLinks up"];
    replay_errors_are_a_warning: [
        GPU0_LINKS_UP,
        r#"railscope_nvlink_errors_total{gpu="0",link="1",type="replay"} 5"#,
        r#"railscope_nvlink_errors_total{gpu="0",link="1",type="recovery"} 1"#,
    ] => [Warning "nvlink_errors" "GPU 0 NVLink 1 error counters since the driver loaded: replay 5, recovery 1"];
    /// FEC corrects symbol errors; healthy NVLink5 links count them too.
    symbol_errors_are_not_a_finding: [
        GPU0_LINKS_UP, r#"railscope_nvlink_errors_total{gpu="0",link="0",type="symbol"} 1000"#,
    ] => [Ok "nvlink" ""];
    failed_link_recovery_is_a_warning: [
        GPU0_LINKS_UP,
        r#"railscope_nvlink_link_recovery_events_total{gpu="0",link="0",result="failed"} 1"#,
        r#"railscope_nvlink_link_recovery_events_total{gpu="0",link="0",result="successful"} 3"#,
    ] => [Warning "nvlink_errors" "failed link recoveries 1"];
    unhealthy_fabric_is_critical: [
        GPU0_LINKS_UP,
        r#"railscope_gpu_fabric_health{gpu="0",condition="route_unhealthy"} 1"#,
        r#"railscope_gpu_fabric_health{gpu="0",condition="degraded_bandwidth"} 1"#,
    ] => [Critical "fabric_unhealthy" "GPU 0's NVLink fabric reports it unhealthy: route_unhealthy, degraded_bandwidth"];
    degraded_fabric_is_a_warning: [
        GPU0_LINKS_UP, r#"railscope_gpu_fabric_health_state{gpu="0",state="limited_capacity"} 1"#,
    ] => [Warning "fabric_degraded" "runs at reduced bandwidth: summary limited_capacity"];
    c2c_link_down_is_a_warning: [
        GPU0_LINKS_UP,
        r#"railscope_gpu_c2c_link_up{gpu="0",link="0"} 1"#,
        r#"railscope_gpu_c2c_link_up{gpu="0",link="1"} 0"#,
    ] => [Warning "c2c_link_down" "GPU 0 NVLink-C2C link 1 to its Grace CPU is down"];
    no_nvlinks_skip: [""] => [Skip "nvlink" "no NVLinks reported"];
}

/// The advice names the rules' rate, `nvlinkErrorsPerSecond`.
#[test]
fn error_advice_names_the_rules_rate() {
    let text = format!(
        "{GPU0_LINKS_UP}\nrailscope_nvlink_errors_total{{gpu=\"0\",link=\"0\",type=\"replay\"}} 1"
    );
    let got = super::findings("nvlink", &[], &text);
    let want = format!("fires above {NVLINK_ERRORS_PER_SECOND}/s of data-link errors");
    assert!(got[0].fix.contains(&want), "{got:#?}");
}
