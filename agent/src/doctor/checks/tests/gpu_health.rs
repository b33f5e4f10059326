//! Step 10: XIDs by the rules' classes, ECC, row remapping, recovery, throttling, XID events.

use super::{gpu, table};
use crate::doctor::checks::Severity;
use crate::doctor::checks::gpu_health::xid_severity;
use crate::doctor::checks::rules::{XID_HARDWARE, XID_WARNING};

table! { "gpu";
    healthy_gpus_are_ok: [gpu("0"), gpu("1")] => [
        Ok "gpu" "2 GPUs: no hardware XID, uncorrected ECC error, pending remap or throttling",
    ];
    hardware_xid_is_critical: [gpu("0"), r#"railscope_gpu_xid_errors_total{gpu="0",xid="79"} 1"#] => [
        Critical "xid" "GPU 0 logged XID 79 (1 event seen through NVML events)",
    ];
    /// Blackwell and later: the finding says where the GPU sits.
    a_gpu_is_named_with_its_tray_slot_and_module: [
        gpu("0"),
        r#"railscope_gpu_platform_info{gpu="0",chassis_serial="1823825100042",slot="4",tray="3",module_id="2",host_id="1",peer_type="2",ib_guid="0x21ac5b6a528f7c10"} 1"#,
        r#"railscope_gpu_xid_errors_total{gpu="0",xid="79"} 1"#,
    ] => [
        Critical "xid" "GPU 0 (tray 3, slot 4, module 2) logged XID 79",
    ];
    warning_xid_is_a_warning: [gpu("0"), r#"railscope_gpu_xid_errors_total{gpu="0",xid="94"} 2"#] => [
        Warning "xid" "GPU 0 logged XID 94 (2 events",
    ];
    /// XID 13 and the like are the application's: said, but the GPU is healthy.
    application_xid_is_ok: [gpu("0"), r#"railscope_gpu_xid_errors_total{gpu="0",xid="13"} 1"#] => [
        Ok "xid" "XID 13",
        Ok "gpu" "1 GPU: no hardware XID",
    ];
    xids_of_one_gpu_come_in_code_order: [
        gpu("0"),
        r#"railscope_gpu_xid_errors_total{gpu="0",xid="94"} 1"#,
        r#"railscope_gpu_xid_errors_total{gpu="0",xid="48"} 1"#,
        r#"railscope_gpu_xid_errors_total{gpu="0",xid="31"} 0"#,
    ] => [Critical "xid" "XID 48", Warning "xid" "XID 94"];
    uncorrected_volatile_ecc_errors_are_critical: [
        gpu("0"),
        r#"railscope_gpu_ecc_errors_total{gpu="0",type="uncorrected",scope="volatile"} 3"#,
        r#"railscope_gpu_ecc_errors_total{gpu="0",type="corrected",scope="volatile"} 100"#,
    ] => [Critical "ecc_uncorrected" "GPU 0 has 3 uncorrected ECC errors since the driver loaded"];
    /// Aggregate counts last over resets: the volatile ones say what happened since.
    uncorrected_aggregate_ecc_errors_alone_are_ok: [
        gpu("0"), r#"railscope_gpu_ecc_errors_total{gpu="0",type="uncorrected",scope="aggregate"} 3"#,
    ] => [Ok "gpu" ""];
    row_remap_failure_is_critical: [
        gpu("0"),
        r#"railscope_gpu_remapped_rows_failure{gpu="0"} 1"#,
        r#"railscope_gpu_remapped_rows_pending{gpu="0"} 1"#,
    ] => [Critical "row_remap_failure" "GPU 0: a row remapping failed"];
    pending_row_remap_is_a_warning: [gpu("0"), r#"railscope_gpu_remapped_rows_pending{gpu="0"} 1"#] => [
        Warning "row_remap_pending" "GPU 0: a row remap is pending",
    ];
    recovery_action_is_critical: [
        gpu("0"),
        r#"railscope_gpu_recovery_action{gpu="0",action="none"} 0"#,
        r#"railscope_gpu_recovery_action{gpu="0",action="gpu_reset"} 1"#,
    ] => [Critical "recovery_action" "GPU 0: the driver asks for gpu_reset"];
    no_recovery_action_is_ok: [gpu("0"), r#"railscope_gpu_recovery_action{gpu="0",action="none"} 1"#] => [
        Ok "gpu" "",
    ];
    thermal_slowdown_is_a_warning: [
        gpu("0"),
        r#"railscope_gpu_throttle_reason{gpu="0",reason="hw_thermal_slowdown"} 1"#,
        r#"railscope_gpu_throttle_reason{gpu="0",reason="sw_power_cap"} 1"#,
        r#"railscope_gpu_throttle_reason{gpu="0",reason="hw_power_brake_slowdown"} 1"#,
    ] => [Warning "throttling" "GPU 0 is throttled: hw_thermal_slowdown, hw_power_brake_slowdown"];
    /// A power cap is the GPU working as configured.
    power_cap_is_ok: [gpu("0"), r#"railscope_gpu_throttle_reason{gpu="0",reason="sw_power_cap"} 1"#] => [
        Ok "gpu" "",
    ];
    unregistered_xid_events_are_a_warning: [gpu("0"), r#"railscope_gpu_xid_events_registered{gpu="0"} 0"#] => [
        Warning "xid_events" "GPU 0: XID events could not be registered",
    ];
    /// A lost GPU registers nothing: step 1 already says it is lost.
    lost_gpu_without_xid_events_is_not_said_twice: [
        gpu("0"),
        r#"railscope_gpu_xid_events_registered{gpu="0"} 0"#,
        r#"railscope_gpu_state{gpu="0",state="lost"} 1"#,
    ] => [Ok "gpu" ""];
    no_gpus_skip: [""] => [Skip "gpu" "no GPUs"];
}

/// Every XID of the rules' classes takes its class's severity and alert.
#[test]
fn xid_classes_are_the_rules_classes() {
    for &code in XID_HARDWARE {
        assert_eq!(
            xid_severity(code),
            (Severity::Critical, Some("RailscopeGPUXidHardware"))
        );
    }
    for &code in XID_WARNING {
        assert_eq!(
            xid_severity(code),
            (Severity::Warning, Some("RailscopeGPUXidWarning"))
        );
    }
    assert_eq!(
        xid_severity(13),
        (Severity::Ok, Some("RailscopeGPUXidApplication"))
    );
}
