//! The inhibit rules of `alerts/alertmanager.example.yml`, in a real Alertmanager: faults that
//! raise several alerts at once reach the receiver as one notification each, and unrelated
//! alerts are not hidden. Alerts are sent with `amtool alert add`, as Prometheus would send
//! what the rules raise for each fault. A missing `amtool` or Alertmanager is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use railscope_tests::{free_port, get, shipped_alerts, tool, webhook, workspace};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn example() -> String {
    std::fs::read_to_string(workspace().join("alerts/alertmanager.example.yml")).unwrap()
}

#[test]
fn the_example_config_is_valid() {
    let amtool = tool("amtool");
    let out = Command::new(amtool)
        .args(["check-config"])
        .arg(workspace().join("alerts/alertmanager.example.yml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("24 inhibit rules"), "{text}");
}

/// Sends one firing alert with these labels.
fn fire(amtool: &str, url: &str, labels: &[(&str, &str)]) {
    let out = Command::new(amtool)
        .arg("alert")
        .arg("add")
        .arg(format!("--alertmanager.url={url}"))
        .args(labels.iter().map(|(k, v)| format!("{k}={v}")))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "amtool alert add {labels:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn one_fault_is_one_notification() {
    let amtool = tool("amtool");
    tool("prometheus-alertmanager");
    let dir = tempfile::tempdir().unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let hook = webhook(Arc::clone(&received));
    // A test route and receiver; the inhibit rules verbatim from the example.
    let example = example();
    let inhibit = &example[example.find("inhibit_rules:").unwrap()..];
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &config,
        format!(
            "route:\n  receiver: test\n  group_by: [alertname, instance, device, port, gpu]\n  group_wait: 3s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      - url: http://127.0.0.1:{hook}/\n        send_resolved: false\n{inhibit}"
        ),
    )
    .unwrap();
    let port = free_port();
    let _am = Killed(
        railscope_tests::alertmanager_command(&config, dir.path(), port)
            .spawn()
            .unwrap(),
    );
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    while !get(addr, "/-/ready", &[]).is_ok_and(|r| r.status == 200) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Alertmanager did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!("http://127.0.0.1:{port}");
    // Each alert carries the severity the shipped rules give it.
    let alerts = shipped_alerts();
    let severity = |name: &str| -> String {
        let rule = alerts
            .iter()
            .find(|r| r["alert"] == name)
            .unwrap_or_else(|| panic!("no alert {name} in the rules"));
        rule["labels"]["severity"].as_str().unwrap().to_owned()
    };
    let port_alert = |name: &str, instance: &str, device: &str| {
        fire(
            &amtool,
            &url,
            &[
                ("alertname", name),
                ("severity", &severity(name)),
                ("instance", instance),
                ("device", device),
                ("port", "1"),
                ("job", "railscope"),
            ],
        );
    };
    // n1 mlx5_0: the port is down; its rate, width and MTU alerts come with it.
    port_alert("RailscopePortDown", "n1", "mlx5_0");
    port_alert("RailscopePortRateBelowPeers", "n1", "mlx5_0");
    port_alert("RailscopePortWidthBelowPeers", "n1", "mlx5_0");
    port_alert("RailscopeMTUMismatch", "n1", "mlx5_0");
    // n1 mlx5_3: one lane lost, with an expectations file: four alerts for one fault.
    port_alert("RailscopePortRateBelowPeers", "n1", "mlx5_3");
    port_alert("RailscopePortWidthBelowPeers", "n1", "mlx5_3");
    port_alert("RailscopePortRateBelowExpected", "n1", "mlx5_3");
    port_alert("RailscopePortWidthBelowExpected", "n1", "mlx5_3");
    // n2 mlx5_1: one lane lost, without expectations.
    port_alert("RailscopePortRateBelowPeers", "n2", "mlx5_1");
    port_alert("RailscopePortWidthBelowPeers", "n2", "mlx5_1");
    // n2 mlx5_2: a fault of its own on the same node, not hidden by mlx5_1's.
    port_alert("RailscopeRoCEMTUBelow4096", "n2", "mlx5_2");
    // n3 GPU 4 fell off the bus: XID 79 and its NVLinks with it. GPU 5's XID is its own.
    for (name, gpu) in [
        ("RailscopeGPULost", "4"),
        ("RailscopeGPUXidHardware", "4"),
        ("RailscopeNVLinkInactive", "4"),
        ("RailscopeGPUXidHardware", "5"),
        // GPU 6: the driver asks for a reset after its XID 95: the reset is the page.
        ("RailscopeGPURecoveryActionRequired", "6"),
        ("RailscopeGPUXidHardware", "6"),
    ] {
        fire(
            &amtool,
            &url,
            &[
                ("alertname", name),
                ("severity", &severity(name)),
                ("instance", "n3"),
                ("gpu", gpu),
                ("job", "railscope"),
            ],
        );
    }
    // n5 GPU 0 at x8: sysfs and NVML both see it; one page.
    for name in [
        "RailscopePCIeWidthDegraded",
        "RailscopeGPUPCIeWidthDegraded",
    ] {
        fire(
            &amtool,
            &url,
            &[
                ("alertname", name),
                ("severity", &severity(name)),
                ("instance", "n5"),
                ("gpu", "0"),
                ("pci_address", "0000:1b:00.0"),
                ("job", "railscope"),
            ],
        );
    }
    // n6: the clock-event counters name the cause of GPU 1's throttling; GPU 2's fabric is
    // unhealthy, which says more than its degraded bandwidth.
    for (name, gpu) in [
        ("RailscopeGPUThermalSlowdown", "1"),
        ("RailscopeGPUThrottling", "1"),
        ("RailscopeGPUFabricUnhealthy", "2"),
        ("RailscopeGPUFabricDegraded", "2"),
    ] {
        fire(
            &amtool,
            &url,
            &[
                ("alertname", name),
                ("severity", &severity(name)),
                ("instance", "n6"),
                ("gpu", gpu),
                ("job", "railscope"),
            ],
        );
    }
    // Rack A, an NVL72 domain: n7 GPU 2's fabric is unhealthy and n8 GPU 0 fell off the bus;
    // the domain alert names both and is the one page. n9 GPU 1, in another rack's domain, is
    // unhealthy too: its own page. n10 GPU 3 is lost on a node in no multi-node domain.
    const RACK_A: (&str, &str) = ("8c2f6e1a-4b7d-4d93-9a05-e3b1c7f2d468", "32767");
    const RACK_B: (&str, &str) = ("3e7a9c41-0d25-4f8b-b6e2-5a1c9d0f7b83", "32766");
    fire(
        &amtool,
        &url,
        &[
            ("alertname", "RailscopeNVLinkDomainDegraded"),
            ("severity", &severity("RailscopeNVLinkDomainDegraded")),
            ("cluster_uuid", RACK_A.0),
            ("clique_id", RACK_A.1),
        ],
    );
    for (name, instance, gpu, domain) in [
        ("RailscopeGPUFabricUnhealthy", "n7", "2", Some(RACK_A)),
        ("RailscopeGPUFabricDegraded", "n7", "2", Some(RACK_A)),
        ("RailscopeGPULost", "n8", "0", Some(RACK_A)),
        ("RailscopeGPUFabricUnhealthy", "n9", "1", Some(RACK_B)),
        ("RailscopeGPULost", "n10", "3", None),
    ] {
        let mut labels = vec![
            ("alertname", name),
            ("instance", instance),
            ("gpu", gpu),
            ("job", "railscope"),
        ];
        let severity = severity(name);
        labels.push(("severity", &severity));
        if let Some((uuid, clique)) = domain {
            labels.push(("cluster_uuid", uuid));
            labels.push(("clique_id", clique));
        }
        fire(&amtool, &url, &labels);
    }
    // n4: the agent is down; the alerts its stale series raised are hidden.
    fire(
        &amtool,
        &url,
        &[
            ("alertname", "RailscopeAgentDown"),
            ("severity", &severity("RailscopeAgentDown")),
            ("instance", "n4"),
            ("job", "railscope"),
        ],
    );
    port_alert("RailscopeRailImbalance", "n4", "mlx5_6");
    // p1, the physical layer. eth2 (mlx5_2) lane 2 lost its signal: its receive power and
    // imbalance alerts come with it; lane 3's low receive power is a fault of its own. The
    // module is at its temperature warning: the hwmon view of the same module is hidden, the
    // ASIC's is not. eth4 has no cable: its module cannot be read, which says nothing more.
    let netdev_alert = |name: &str, instance: &str, extra: &[(&str, &str)]| {
        let severity = severity(name);
        let mut labels = vec![
            ("alertname", name),
            ("severity", severity.as_str()),
            ("instance", instance),
            ("job", "railscope"),
        ];
        labels.extend_from_slice(extra);
        fire(&amtool, &url, &labels);
    };
    let eth2 = [
        ("netdev", "eth2"),
        ("device", "mlx5_2"),
        ("port", "1"),
        ("rail", "2"),
    ];
    for name in [
        "RailscopeTransceiverLossOfSignal",
        "RailscopeTransceiverRxPowerLowWarning",
        "RailscopeTransceiverRxPowerLowAlarm",
        "RailscopeTransceiverLaneImbalance",
    ] {
        let mut labels = eth2.to_vec();
        labels.push(("lane", "2"));
        if name == "RailscopeTransceiverLossOfSignal" {
            labels.push(("flag", "rx_los"));
        }
        netdev_alert(name, "p1", &labels);
    }
    let mut lane3 = eth2.to_vec();
    lane3.push(("lane", "3"));
    netdev_alert("RailscopeTransceiverRxPowerLowWarning", "p1", &lane3);
    netdev_alert("RailscopeTransceiverTemperatureHigh", "p1", &eth2);
    for sensor in ["module0", "asic"] {
        netdev_alert(
            "RailscopeNICTemperatureNearCritical",
            "p1",
            &[
                ("device", "mlx5_2"),
                ("pci_address", "0000:2a:00.0"),
                ("sensor", sensor),
                ("rail", "2"),
            ],
        );
    }
    let eth4 = [("netdev", "eth4"), ("rail", "none")];
    let mut no_cable = eth4.to_vec();
    no_cable.extend([("state", "no_cable"), ("substate", "")]);
    netdev_alert("RailscopeNetdevLinkDownReason", "p1", &no_cable);
    netdev_alert("RailscopeTransceiverUnreadable", "p1", &eth4);
    // p2: mlx5_0's firmware crashed; its port went down and its optics read dark meanwhile.
    netdev_alert(
        "RailscopeDevlinkFirmwareFatal",
        "p2",
        &[
            ("devlink", "pci/0000:18:00.0"),
            ("pci_address", "0000:18:00.0"),
            ("device", "mlx5_0"),
            ("port", ""),
            ("reporter", "fw_fatal"),
            ("rail", "0"),
        ],
    );
    port_alert("RailscopePortDown", "p2", "mlx5_0");
    netdev_alert(
        "RailscopeTransceiverRxPowerLowAlarm",
        "p2",
        &[
            ("netdev", "eth0"),
            ("device", "mlx5_0"),
            ("port", "1"),
            ("lane", "1"),
            ("rail", "0"),
        ],
    );
    // Switch leaf-r3: the ports of s1 and s2 behind it log symbol errors, and the switch
    // alert names them: their own alerts are hidden. s3's port is behind another switch, and
    // s1's other port down is a page of its own.
    fire(
        &amtool,
        &url,
        &[
            ("alertname", "RailscopeSwitchSuspect"),
            ("severity", &severity("RailscopeSwitchSuspect")),
            ("neighbour", "MF0;leaf-r3:MQM9700/U1"),
        ],
    );
    for (name, instance, device, neighbour) in [
        (
            "RailscopeSymbolErrorsAboveBER",
            "s1",
            "mlx5_3",
            "MF0;leaf-r3:MQM9700/U1",
        ),
        (
            "RailscopeLinkFlapping",
            "s2",
            "mlx5_3",
            "MF0;leaf-r3:MQM9700/U1",
        ),
        (
            "RailscopeSymbolErrorsAboveBER",
            "s3",
            "mlx5_3",
            "MF0;leaf-r4:MQM9700/U1",
        ),
        (
            "RailscopePortDown",
            "s1",
            "mlx5_4",
            "MF0;leaf-r3:MQM9700/U1",
        ),
    ] {
        let severity = severity(name);
        fire(
            &amtool,
            &url,
            &[
                ("alertname", name),
                ("severity", &severity),
                ("instance", instance),
                ("device", device),
                ("port", "1"),
                ("rail", "3"),
                ("neighbour", neighbour),
                ("neighbour_port", "7"),
                ("job", "railscope"),
            ],
        );
    }

    let expected: BTreeSet<(String, String, String)> = [
        ("RailscopePortDown", "n1", "mlx5_0"),
        ("RailscopePortWidthBelowExpected", "n1", "mlx5_3"),
        ("RailscopePortWidthBelowPeers", "n2", "mlx5_1"),
        ("RailscopeRoCEMTUBelow4096", "n2", "mlx5_2"),
        ("RailscopeGPULost", "n3", "4"),
        ("RailscopeGPUXidHardware", "n3", "5"),
        ("RailscopeGPURecoveryActionRequired", "n3", "6"),
        ("RailscopeAgentDown", "n4", ""),
        ("RailscopePCIeWidthDegraded", "n5", "0"),
        ("RailscopeGPUThermalSlowdown", "n6", "1"),
        ("RailscopeGPUFabricUnhealthy", "n6", "2"),
        ("RailscopeNVLinkDomainDegraded", "", ""),
        ("RailscopeGPUFabricUnhealthy", "n9", "1"),
        ("RailscopeGPULost", "n10", "3"),
        ("RailscopeTransceiverLossOfSignal", "p1", "mlx5_2"),
        ("RailscopeTransceiverRxPowerLowWarning", "p1", "mlx5_2"),
        ("RailscopeTransceiverTemperatureHigh", "p1", "mlx5_2"),
        ("RailscopeNICTemperatureNearCritical", "p1", "mlx5_2"),
        ("RailscopeNetdevLinkDownReason", "p1", ""),
        ("RailscopeDevlinkFirmwareFatal", "p2", "mlx5_0"),
        ("RailscopeSwitchSuspect", "", ""),
        ("RailscopeSymbolErrorsAboveBER", "s3", "mlx5_3"),
        ("RailscopePortDown", "s1", "mlx5_4"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    let notified = || -> BTreeSet<(String, String, String)> {
        received
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(_, v)| v["alerts"].as_array().cloned().unwrap_or_default())
            .map(|a| {
                let l = &a["labels"];
                let s = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
                let what = if l["gpu"].is_string() {
                    s("gpu")
                } else {
                    s("device")
                };
                (s("alertname"), s("instance"), what)
            })
            .collect()
    };
    // Every expected notification arrives after the group wait; then wait a little longer
    // for any that should not.
    let start = Instant::now();
    while notified() != expected && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(notified(), expected);
    // The physical-layer alerts differ by lane and sensor too: which of them came through.
    let physical: BTreeSet<String> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, v)| v["alerts"].as_array().cloned().unwrap_or_default())
        .filter(|a| {
            a["labels"]["instance"]
                .as_str()
                .is_some_and(|i| i.starts_with('p'))
        })
        .map(|a| {
            let l = &a["labels"];
            let s = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            format!(
                "{} {} {} lane={} sensor={}",
                s("alertname"),
                s("instance"),
                s("netdev"),
                s("lane"),
                s("sensor")
            )
        })
        .collect();
    let expected_physical: BTreeSet<String> = [
        "RailscopeTransceiverLossOfSignal p1 eth2 lane=2 sensor=",
        "RailscopeTransceiverRxPowerLowWarning p1 eth2 lane=3 sensor=",
        "RailscopeTransceiverTemperatureHigh p1 eth2 lane= sensor=",
        "RailscopeNICTemperatureNearCritical p1  lane= sensor=asic",
        "RailscopeNetdevLinkDownReason p1 eth4 lane= sensor=",
        "RailscopeDevlinkFirmwareFatal p2  lane= sensor=",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(physical, expected_physical);
}
