//! Table-driven tests of each step: small expositions, parsed as `--from` parses a running
//! agent's ([`Facts::parse_text`]), and the findings the step must make of them (severity,
//! check, and a piece of the summary), in order. Each row is a test named after its condition.

use super::{Finding, Severity, run};
use crate::doctor::facts::Facts;

mod cabling;
mod devices;
mod gid;
mod gpu_health;
mod gpudirect;
mod kernel_log;
mod link;
mod mtu;
mod nccl;
mod nvlink;
mod pcie;
mod pfc;
mod physical;
mod topology;

/// One row per test: `name: [parts of the exposition] (env [(variable, value), ...])? =>
/// [Severity check "summary part", ...]`. The findings of `step` must be exactly those.
macro_rules! table {
    ($step:literal; $(
        $(#[$doc:meta])*
        $name:ident: [$($part:expr),* $(,)?] $(env [$(($k:literal, $v:literal)),* $(,)?])?
            => [$($sev:ident $check:literal $summary:literal),* $(,)?];
    )*) => {$(
        $(#[$doc])*
        #[test]
        fn $name() {
            let text = [$(AsRef::<str>::as_ref(&$part)),*].join("\n");
            let env: Vec<(String, String)> = vec![$($(($k.to_owned(), $v.to_owned())),*)?];
            $crate::doctor::checks::tests::expect(
                $step,
                &env,
                &text,
                &[$(($crate::doctor::checks::Severity::$sev, $check, $summary)),*],
            );
        }
    )*};
}
pub(super) use table;

/// The findings of step `step` on `text` (with NCCL environment `env`), against `want`.
pub(super) fn expect(
    step: &str,
    env: &[(String, String)],
    text: &str,
    want: &[(Severity, &str, &str)],
) {
    let got = findings(step, env, text);
    let matches = got.len() == want.len()
        && got.iter().zip(want).all(|(f, (severity, check, summary))| {
            f.severity == *severity && f.check == *check && f.summary.contains(summary)
        });
    assert!(
        matches,
        "step {step}: want {want:#?}\ngot {:#?}\nfrom:\n{text}",
        got.iter()
            .map(|f| (f.severity, f.check, f.summary.as_str()))
            .collect::<Vec<_>>()
    );
}

/// Every finding of step `step` (none when the step is not in the report).
pub(super) fn findings(step: &str, env: &[(String, String)], text: &str) -> Vec<Finding> {
    let facts = Facts::parse_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (steps, _) = run(&facts, env);
    steps
        .into_iter()
        .find(|s| s.id == step)
        .map(|s| s.findings)
        .unwrap_or_default()
}

/// The NCCL settings doctor derives from `text`: (variable, value).
pub(super) fn hints(text: &str) -> Vec<(&'static str, String)> {
    let facts = Facts::parse_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (_, hints) = run(&facts, &[]);
    hints.settings.into_iter().map(|(k, v, _)| (k, v)).collect()
}

/// An RDMA device with one port (port 1): its device and port info and its state gauges.
/// `state` and `phys` as sysfs names them; `node_type` CA (a NIC) or RNIC (iWARP).
pub(super) fn port(
    device: &str,
    netdev: &str,
    layer: &str,
    state: &str,
    phys: &str,
    node_type: &str,
) -> String {
    let state_number = match state {
        "ACTIVE" => 4,
        "ARMED" => 3,
        "INIT" => 2,
        _ => 1,
    };
    let phys_number = match phys {
        "LinkUp" => 5,
        "Polling" => 2,
        "<unknown>" => 0,
        _ => 3,
    };
    let hca = if node_type == "RNIC" { "" } else { "MT4129" };
    format!(
        "railscope_ib_device_info{{device=\"{device}\",hca_type=\"{hca}\",node_type=\"{node_type}\"}} 1\n\
         railscope_ib_port_info{{device=\"{device}\",port=\"1\",link_layer=\"{layer}\",state=\"{state}\",phys_state=\"{phys}\",netdev=\"{netdev}\",mtu_source=\"netdev\"}} 1\n\
         railscope_ib_port_state{{device=\"{device}\",port=\"1\"}} {state_number}\n\
         railscope_ib_port_phys_state{{device=\"{device}\",port=\"1\"}} {phys_number}"
    )
}

/// An ACTIVE / LinkUp RoCE port.
pub(super) fn roce(device: &str, netdev: &str) -> String {
    port(device, netdev, "Ethernet", "ACTIVE", "LinkUp", "CA")
}

/// An ACTIVE / LinkUp InfiniBand port.
pub(super) fn ib(device: &str) -> String {
    port(device, "", "InfiniBand", "ACTIVE", "LinkUp", "CA")
}

/// An ACTIVE iWARP port (Ethernet link layer, node type RNIC).
pub(super) fn iwarp(device: &str, netdev: &str) -> String {
    port(device, netdev, "Ethernet", "ACTIVE", "<unknown>", "RNIC")
}

/// A GPU NVML lists, `gpu` its index.
pub(super) fn gpu(gpu: &str) -> String {
    format!(
        "railscope_gpu_info{{gpu=\"{gpu}\",pci_address=\"0000:{gpu}b:00.0\",uuid=\"GPU-{gpu}\"}} 1"
    )
}
