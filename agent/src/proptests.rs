//! Property tests of the exposition: label values and help text taken from the system, with
//! any content, are escaped by each format's rules and read back exactly by a small
//! reference parser; metric and label names are always valid, whatever names the kernel,
//! drivers and NVML hand the mapping.

use proptest::prelude::*;
use proptest::test_runner::Config;

use railscope_collectors::sources::infiniband::types::{
    Device, Enumerated, Gid, HwCounter, PmaCounter, PmaDir, Port, Rate, Snapshot as IbSnapshot,
};
use railscope_collectors::sources::{ethtool, gpu, netdev, pci};

use crate::exposition::{Family, Format, Value, encode};
use crate::mapping;

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------
// A strict reference reader of both formats
// ---------------------------------------------------------------------------------------

/// One line of an exposition.
#[derive(Debug, Clone, PartialEq)]
enum Line {
    Help(String, String),
    Type(String, String),
    Unit(String, String),
    Sample {
        name: String,
        labels: Vec<(String, String)>,
        value: String,
    },
    Eof,
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Reads an escaped string up to (not including) `end`, or to the end of `chars` when
/// `end` is `None`. `\\` and `\n` are escapes in both formats, `\"` in label values and in
/// OpenMetrics help; a raw `"` ends a label value and is invalid in OpenMetrics help.
fn unescape(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    end: Option<char>,
    quote_escape: bool,
    raw_quote_ok: bool,
) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let Some(c) = chars.next() else {
            return match end {
                None => Ok(out),
                Some(_) => Err("unterminated string".into()),
            };
        };
        match c {
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                Some('"') if quote_escape => out.push('"'),
                other => return Err(format!("invalid escape \\{other:?}")),
            },
            '\n' => return Err("raw newline".into()),
            c if Some(c) == end => return Ok(out),
            '"' if !raw_quote_ok => return Err("unescaped quote".into()),
            c => out.push(c),
        }
    }
}

fn parse_line(line: &str, format: Format) -> Result<Line, String> {
    if line == "# EOF" {
        return Ok(Line::Eof);
    }
    if let Some(rest) = line.strip_prefix("# ") {
        let (keyword, rest) = rest.split_once(' ').ok_or("bare comment")?;
        let (name, text) = rest.split_once(' ').ok_or("descriptor without text")?;
        if !is_metric_name(name) {
            return Err(format!("invalid metric name {name:?}"));
        }
        return match keyword {
            "HELP" => {
                let om = format == Format::OpenMetrics;
                let help = unescape(&mut text.chars().peekable(), None, om, !om)?;
                Ok(Line::Help(name.into(), help))
            }
            "TYPE" => Ok(Line::Type(name.into(), text.into())),
            "UNIT" if format == Format::OpenMetrics => Ok(Line::Unit(name.into(), text.into())),
            _ => Err(format!("unknown descriptor {keyword}")),
        };
    }
    let name_end = line.find(['{', ' ']).ok_or("sample without a value")?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("invalid metric name {name:?}"));
    }
    let mut chars = line[name_end..].chars().peekable();
    let mut labels = Vec::new();
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            let mut label = String::new();
            for c in chars.by_ref() {
                if c == '=' {
                    break;
                }
                label.push(c);
            }
            if !is_label_name(&label) {
                return Err(format!("invalid label name {label:?}"));
            }
            if chars.next() != Some('"') {
                return Err("label value without quote".into());
            }
            labels.push((label, unescape(&mut chars, Some('"'), true, true)?));
            match chars.next() {
                Some(',') => continue,
                Some('}') => break,
                other => return Err(format!("{other:?} after a label value")),
            }
        }
    }
    if chars.next() != Some(' ') {
        return Err("no space before the value".into());
    }
    let value: String = chars.collect();
    let ok = matches!(value.as_str(), "NaN" | "+Inf" | "-Inf")
        || (value.parse::<f64>().is_ok() && !value.contains(['i', 'I', 'N', 'n']));
    if !ok {
        return Err(format!("invalid value {value:?}"));
    }
    Ok(Line::Sample {
        name: name.into(),
        labels,
        value,
    })
}

/// Reads a whole exposition and checks its structure: every sample follows its family's
/// `TYPE`, each family is described once, OpenMetrics ends with `# EOF`.
fn parse_exposition(text: &str, format: Format) -> Result<Vec<Line>, String> {
    let body = text.strip_suffix('\n').ok_or("no final newline")?;
    let lines = body
        .split('\n')
        .map(|l| parse_line(l, format).map_err(|e| format!("{e} in {l:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut typed = std::collections::BTreeSet::new();
    let mut current: Option<(String, String)> = None;
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::Type(name, kind) => {
                if !typed.insert(name.clone()) {
                    return Err(format!("{name} described twice"));
                }
                current = Some((name.clone(), kind.clone()));
            }
            Line::Sample { name, .. } => {
                let (family, kind) = current.as_ref().ok_or("sample before TYPE")?;
                let ok = match (format, kind.as_str()) {
                    (Format::Prometheus, _) => name == family,
                    (Format::OpenMetrics, "counter") => *name == format!("{family}_total"),
                    (Format::OpenMetrics, "info") => *name == format!("{family}_info"),
                    (Format::OpenMetrics, _) => name == family,
                };
                if !ok {
                    return Err(format!("sample {name} in family {family} ({kind})"));
                }
            }
            Line::Unit(name, unit) if !name.ends_with(&format!("_{unit}")) => {
                return Err(format!("{name} does not end in its unit {unit}"));
            }
            Line::Eof if i + 1 != lines.len() || format != Format::OpenMetrics => {
                return Err("misplaced # EOF".into());
            }
            _ => {}
        }
    }
    if format == Format::OpenMetrics && lines.last() != Some(&Line::Eof) {
        return Err("no # EOF".into());
    }
    Ok(lines)
}

/// The samples of `families`, as `(sample name, labels)`, in encoding order.
fn expected_samples(families: &[Family]) -> Vec<(String, Vec<(String, String)>)> {
    families
        .iter()
        .flat_map(|f| {
            f.samples.iter().map(|s| {
                (
                    f.sample_name(),
                    s.labels
                        .iter()
                        .map(|(n, v)| ((*n).to_owned(), v.to_string()))
                        .collect(),
                )
            })
        })
        .collect()
}

/// Encodes in both formats, reads both back, and checks that every sample's name and label
/// values come back exactly and every name is valid.
fn assert_round_trip(families: &[Family]) -> Result<(), TestCaseError> {
    let want = expected_samples(families);
    for format in [Format::Prometheus, Format::OpenMetrics] {
        let text = encode(families, format);
        let lines = parse_exposition(&text, format)
            .map_err(|e| TestCaseError::fail(format!("{format:?}: {e}\n{text}")))?;
        let got: Vec<(String, Vec<(String, String)>)> = lines
            .into_iter()
            .filter_map(|l| match l {
                Line::Sample { name, labels, .. } => Some((name, labels)),
                _ => None,
            })
            .collect();
        prop_assert_eq!(&got, &want, "{:?}", format);
        for (_, labels) in &got {
            let mut names: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
            names.sort_unstable();
            let before = names.len();
            names.dedup();
            prop_assert_eq!(names.len(), before, "duplicate label name in {:?}", labels);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

/// Label values as the system may hand them over: anything, and strings dense in the
/// characters that need escaping or look like syntax.
fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\\\\"\n\r\t ,={}#a-z0-9_é\u{0}\u{2028}\u{feff}]{0,24}",
        Just(String::new()),
        Just("\\".to_owned()),
        Just("\\n".to_owned()),
        Just("a\"} 1\nfake_metric 2".to_owned()),
    ]
}

const LABELS: [&str; 4] = ["device", "counter", "netdev", "stat"];

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn label_values_round_trip(values in prop::collection::vec(prop::collection::vec(hostile(), 0..=4), 1..6)) {
        let mut info = Family::info("railscope_test", "Test.");
        let mut counter = Family::counter("railscope_test_events", "Test.");
        let mut gauge = Family::gauge("railscope_test_size_bytes", "Test.");
        for (i, row) in values.iter().enumerate() {
            let labels: Vec<(&'static str, String)> =
                LABELS.iter().copied().zip(row.iter().cloned()).collect();
            match i % 3 {
                0 => info.push(labels, 1u64),
                1 => counter.push(labels, i as u64),
                _ => gauge.push(labels, 0.5f64),
            }
        }
        assert_round_trip(&[info, counter, gauge])?;
    }

    /// Help text with any content comes back exactly from either format: the library escapes
    /// 0.0.4 help, the exposition's wrapper OpenMetrics help.
    #[test]
    fn help_round_trips(help in hostile()) {
        let mut family = Family::gauge("railscope_test", Box::leak(help.clone().into_boxed_str()));
        family.push_unlabelled(1u64);
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let text = encode(std::slice::from_ref(&family), format);
            let back = parse_exposition(&text, format)
                .map_err(|e| TestCaseError::fail(format!("{format:?}: {e}\n{text}")))?
                .into_iter()
                .find_map(|l| match l { Line::Help(_, help) => Some(help), _ => None });
            prop_assert_eq!(back.as_deref(), Some(help.as_str()), "{:?}", format);
        }
    }

    /// A value is written so that it reads back as the same number.
    #[test]
    fn values_round_trip(f in any::<f64>(), u in any::<u64>(), i in any::<i64>()) {
        let mut family = Family::gauge("railscope_test", "Test.");
        family.push_unlabelled(f);
        family.push_unlabelled(u);
        family.push_unlabelled(i);
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let text = encode(std::slice::from_ref(&family), format);
            let values: Vec<String> = parse_exposition(&text, format)
                .map_err(TestCaseError::fail)?
                .into_iter()
                .filter_map(|l| match l { Line::Sample { value, .. } => Some(value), _ => None })
                .collect();
            let back = match values[0].as_str() {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap(),
            };
            prop_assert!(back == f || (f.is_nan() && back.is_nan()), "{} -> {}", f, values[0]);
            prop_assert_eq!(values[1].parse::<u64>().ok(), Some(u));
            prop_assert_eq!(values[2].parse::<i64>().ok(), Some(i));
        }
        prop_assert!(matches!(family.samples[1].value, Value::U64(_)));
    }
}

fn rdma_device() -> impl Strategy<Value = Device> {
    (
        prop::collection::vec(hostile(), 14),
        prop::collection::vec((hostile(), any::<u64>()), 0..4),
        any::<u32>(),
    )
        .prop_map(|(s, counters, n)| {
            let hw: Vec<HwCounter> = counters
                .iter()
                .map(|(name, value)| HwCounter {
                    name: name.as_str().into(),
                    value: *value,
                })
                .collect();
            let port = Port {
                number: n % 4 + 1,
                state: Some(Enumerated {
                    value: 4,
                    name: s[0].clone(),
                }),
                phys_state: Some(Enumerated {
                    value: 5,
                    name: s[1].clone(),
                }),
                link_layer: Some(s[2].clone()),
                rate: Some(Rate {
                    bits_per_second: 400_000_000_000,
                    width: 4,
                    speed: Some(s[3].clone()),
                }),
                pma: vec![
                    PmaCounter {
                        name: s[4].as_str().into(),
                        value: 7,
                        bits: Some(16),
                        dir: PmaDir::Counters,
                    },
                    PmaCounter {
                        name: "symbol_error".into(),
                        value: 65535,
                        bits: Some(16),
                        dir: PmaDir::Counters,
                    },
                ],
                hw_counters: hw.clone(),
                gids: Some(vec![Gid {
                    index: 3,
                    gid: "fe80:0000:0000:0000:0ac4:7aff:fe12:3456".into(),
                    gid_type: Some(s[5].clone()),
                    netdev: Some(s[6].clone()),
                }]),
                netdev: Some(s[6].clone()),
                netdev_mtu: Some(4200),
                active_mtu: Some(4096),
                ..Port::default()
            };
            Device {
                name: s[7].clone(),
                node_guid: Some(s[8].clone()),
                fw_ver: Some(s[9].clone()),
                hca_type: Some(s[10].clone()),
                board_id: Some(s[11].clone()),
                pci_address: Some(s[12].clone()),
                driver: Some(s[13].clone()),
                hw_counters: hw,
                ports: vec![port],
                ..Device::default()
            }
        })
}

proptest! {
    #![proptest_config(config(64))]

    /// Whatever the kernel and drivers name things, the mapped families have valid names and
    /// their label values read back exactly in both formats.
    #[test]
    fn mapped_system_names_round_trip(
        devices in prop::collection::vec(rdma_device(), 1..3),
        netdev_names in prop::collection::vec(hostile(), 4),
        stats in prop::collection::vec((hostile(), any::<u64>()), 0..4),
        aer in prop::collection::vec((hostile(), any::<u64>()), 0..3),
        gpu_names in prop::collection::vec(hostile(), 3),
    ) {
        let mut families = mapping::infiniband::families(&IbSnapshot { devices });
        families.extend(mapping::netdev::families(&netdev::Snapshot {
            netdevs: vec![netdev::Netdev {
                name: netdev_names[0].clone(),
                driver: Some(netdev_names[1].clone()),
                address: Some(netdev_names[2].clone()),
                operstate: Some(netdev_names[3].clone()),
                mtu: Some(9000),
                ..netdev::Netdev::default()
            }],
        }));
        families.extend(mapping::ethtool::families(&ethtool::Snapshot {
            netdevs: vec![ethtool::NetdevStats {
                name: netdev_names[0].clone(),
                reported: stats.len(),
                known: vec![],
                other: stats,
            }],
        }));
        families.extend(mapping::pci::pci_families(&pci::Snapshot {
            devices: vec![pci::PciDevice {
                address: netdev_names[1].clone(),
                role: pci::Role::Nic,
                vendor: Some(0x15b3),
                device: Some(0x101d),
                class: Some(0x020000),
                numa_node: Some(0),
                driver: Some(netdev_names[2].clone()),
                rdma_devices: vec![netdev_names[3].clone()],
                gpu_index: None,
                current_speed: Some(32e9),
                max_speed: Some(32e9),
                current_width: Some(16),
                max_width: Some(16),
                aer: vec![pci::Aer { severity: "correctable", total: Some(1), by_type: aer }],
                acs: None,
            }],
        }));
        families.extend(mapping::gpu::families(&gpu::types::Snapshot {
            driver_version: Some(gpu_names[0].clone()),
            cuda_version: Some(gpu_names[1].clone()),
            gpus: vec![gpu::types::Gpu {
                identity: gpu::types::Identity {
                    name: Some(gpu_names[2].clone()),
                    uuid: Some(gpu_names[0].clone()),
                    serial: Some(gpu_names[1].clone()),
                    pci_address: Some(gpu_names[2].clone()),
                    ..gpu::types::Identity::default()
                },
                failures: vec![("name", gpu_names[1].clone())],
                ..gpu::types::Gpu::default()
            }],
        }));
        for family in &families {
            prop_assert!(is_metric_name(family.name), "{}", family.name);
            prop_assert!(is_metric_name(&family.sample_name()));
            for sample in &family.samples {
                for (label, _) in &sample.labels {
                    prop_assert!(is_label_name(label), "{} in {}", label, family.name);
                }
            }
        }
        assert_round_trip(&families)?;
    }
}

/// The reference reader rejects what it must, so the properties above can fail.
#[test]
fn the_reference_reader_is_strict() {
    for (line, format) in [
        ("m{a=\"x\\q\"} 1", Format::Prometheus),
        ("m{a=\"x\ny\"} 1", Format::Prometheus),
        ("m{a=\"x} 1", Format::Prometheus),
        ("m{1a=\"x\"} 1", Format::Prometheus),
        ("1m 1", Format::Prometheus),
        ("m 1 2", Format::Prometheus),
        ("m infinity", Format::Prometheus),
        ("# HELP m a \"quote\"", Format::OpenMetrics),
        ("# HELP m a \\q", Format::Prometheus),
    ] {
        assert!(parse_line(line, format).is_err(), "{line:?} was read");
    }
    assert_eq!(
        parse_line("m{a=\"x\\\\\\\"\\n,}\"} 1", Format::Prometheus),
        Ok(Line::Sample {
            name: "m".into(),
            labels: vec![("a".into(), "x\\\"\n,}".into())],
            value: "1".into()
        })
    );
    assert!(parse_exposition("m 1\n", Format::OpenMetrics).is_err());
    assert!(parse_exposition("# TYPE m gauge\nm 1\n# EOF\n", Format::OpenMetrics).is_ok());
}

/// Found by the property tests: OpenMetrics help is an escaped string, so a `"` in it must
/// be escaped (text 0.0.4 keeps it raw).
#[test]
fn a_quote_in_help_is_escaped_in_openmetrics_only() {
    let mut family = Family::gauge("railscope_test", "a \"b\"");
    family.push_unlabelled(1u64);
    assert!(
        encode(vec![family.clone()], Format::OpenMetrics)
            .starts_with("# HELP railscope_test a \\\"b\\\"\n")
    );
    assert!(
        encode(vec![family], Format::Prometheus).starts_with("# HELP railscope_test a \"b\"\n")
    );
}
