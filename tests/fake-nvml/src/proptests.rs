//! Property tests of the fixture reader: arbitrary and mangled JSON never panics the loader,
//! the value parsers (bus ids, cpulists, UUIDs, hex numbers) give back what was rendered,
//! and a fixture survives a save and load unchanged whatever its values (costs included).

use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::fixture::{
    CallCost, Costs, FieldOverride, FieldType, Fixture, parse_bus_id, parse_cpulist, parse_uuid,
};

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// The shipped fixtures' JSON text, read once.
fn shipped() -> Vec<String> {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TEXTS.get_or_init(read_shipped).clone()
}

fn read_shipped() -> Vec<String> {
    let mut paths: Vec<_> = std::fs::read_dir(crate::fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// A shipped fixture's text with one edit: cut short, a character inserted or replaced, or
/// a number swapped for another token.
fn mangled_json() -> impl Strategy<Value = String> {
    let texts = shipped();
    (
        prop::sample::select(texts),
        any::<prop::sample::Index>(),
        0u8..4,
        prop::sample::select(vec![
            "\"",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "-1",
            "1e999",
            "18446744073709551616",
            "null",
            "\"0x\"",
            "\"0x+1\"",
            "true",
            "\\u0000",
            "\"\\ud800\"",
            "é",
        ]),
    )
        .prop_map(|(text, at, how, token)| {
            let mut at = at.index(text.len().max(1));
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let (head, tail) = text.split_at(at);
            match how {
                0 => head.to_owned(),
                1 => format!("{head}{token}{tail}"),
                2 => {
                    let mut rest = tail.chars();
                    rest.next();
                    format!("{head}{token}{}", rest.as_str())
                }
                _ => {
                    // Replace the next number with the token.
                    let start = tail
                        .find(|c: char| c.is_ascii_digit())
                        .unwrap_or(tail.len());
                    let end = tail[start..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(tail.len(), |e| start + e);
                    format!("{head}{}{token}{}", &tail[..start], &tail[end..])
                }
            }
        })
}

fn load(text: &str) {
    if let Ok(fixture) = serde_json::from_str::<Fixture>(text) {
        let _ = fixture.validate();
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_text_never_panics_the_loader(text in any::<String>()) {
        load(&text);
    }

    #[test]
    fn mangled_fixtures_never_panic_the_loader(text in mangled_json()) {
        load(&text);
    }

    /// Any values in a fixture survive `save` and `load`: names with quotes, backslashes and
    /// control characters, 64-bit masks written as hex, field values as doubles.
    #[test]
    fn fixtures_round_trip_through_json(
        which in any::<prop::sample::Index>(),
        name in any::<String>(),
        reasons in prop::option::of(any::<u64>()),
        value in any::<f64>().prop_filter("JSON has no NaN or infinity", |v| v.is_finite()),
        id in any::<u32>(),
    ) {
        static FIXTURES: std::sync::OnceLock<Vec<Fixture>> = std::sync::OnceLock::new();
        let fixtures = FIXTURES.get_or_init(|| {
            shipped().iter().map(|t| serde_json::from_str(t).unwrap()).collect()
        });
        let mut fixture = fixtures[which.index(fixtures.len())].clone();
        // One GPU is enough to carry the values, and keeps a case cheap.
        fixture.gpus.truncate(1);
        let gpu = &mut fixture.gpus[0];
        gpu.name = name;
        gpu.clock_event_reasons = reasons;
        gpu.pci.device_id = id;
        gpu.fields.push(FieldOverride {
            id: 1,
            scope: None,
            value,
            value_type: FieldType::Double,
            error: None,
        });
        let text = serde_json::to_string_pretty(&fixture).unwrap();
        let back: Fixture = serde_json::from_str(&text).unwrap();
        prop_assert!(back == fixture, "{:?}",
            (&back.gpus[0].name, back.gpus[0].clock_event_reasons, back.gpus[0].pci.device_id, back.gpus[0].fields.last()));
    }

    /// A fixture's `costs` survive `save` and `load` in either form, and any in-range
    /// values validate.
    #[test]
    fn costs_round_trip_through_json(
        scale in 0.0..=Costs::MAX_SCALE,
        wall_us in 0.0..=CallCost::MAX_US,
        cpu_us in 0.0..=CallCost::MAX_US,
        id in any::<u32>(),
        which in any::<prop::sample::Index>(),
        plain in any::<bool>(),
    ) {
        let names: Vec<&str> = crate::EXPORTED_SYMBOLS
            .iter()
            .copied()
            .filter(|n| n.starts_with("nvml"))
            .collect();
        let mut fixture: Fixture = serde_json::from_str(&shipped()[0]).unwrap();
        fixture.gpus.clear();
        let cost = CallCost { wall_us, cpu_us };
        fixture.costs = Some(if plain {
            Costs::default()
        } else {
            Costs {
                scale,
                overrides: [(names[which.index(names.len())].to_owned(), cost)].into(),
                fields: [(id, cost)].into(),
                ..Costs::default()
            }
        });
        prop_assert_eq!(fixture.validate(), Ok(()));
        let text = serde_json::to_string_pretty(&fixture).unwrap();
        let back: Fixture = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, fixture);
    }

    /// Hex numbers are read from a JSON number, `0x…` or `0X…` alike.
    #[test]
    fn hex_or_number(v in any::<u32>(), form in 0u8..4) {
        let written = match form {
            0 => v.to_string(),
            1 => format!("\"0x{v:x}\""),
            2 => format!("\"0X{v:08X}\""),
            _ => format!("\"0x{:x}_{:04x}\"", v >> 16, v & 0xffff),
        };
        let json = format!(r#"{{"bus_id": "0000:1b:00.0", "device_id": {written}, "subsystem_id": 0}}"#);
        let pci: crate::fixture::Pci = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(pci.device_id, v);
        // A sign is not a hex digit.
        let signed = format!(r#"{{"bus_id": "0000:1b:00.0", "device_id": "0x+{v:x}", "subsystem_id": 0}}"#);
        prop_assert!(serde_json::from_str::<crate::fixture::Pci>(&signed).is_err());
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn value_parsers_never_panic(text in prop_oneof![
        any::<String>(),
        "[0-9a-fA-F:.+ -]{0,20}",
        "[0-9a-fA-F+-]{30,40}",
    ]) {
        if let Ok(id) = parse_bus_id(&text) {
            prop_assert!(id.bus <= 0xff && id.device <= 0xff && id.function <= 0xf);
            prop_assert!(text.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.'),
                "{:?} has more than hex digits", text);
        }
        if let Ok(cpus) = parse_cpulist(&text) {
            prop_assert!(cpus.iter().all(|&c| c < 8192));
        }
        if parse_uuid(&text).is_ok() {
            prop_assert!(text.chars().all(|c| c.is_ascii_hexdigit() || c == '-'),
                "{:?} has more than hex digits", text);
        }
    }

    /// NVML's `%08X:%02X:%02X.%X` and sysfs's `%04x:%02x:%02x.%d` both parse to the numbers.
    #[test]
    fn bus_ids_round_trip(domain in any::<u32>(), bus in any::<u8>(), device in 0u8..32, function in 0u8..8) {
        let nvml = format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}");
        let id = parse_bus_id(&nvml).unwrap();
        prop_assert_eq!(
            (id.domain, id.bus, id.device, id.function),
            (domain, u32::from(bus), u32::from(device), u32::from(function))
        );
        if domain <= 0xffff {
            let sysfs = format!("{domain:04x}:{bus:02x}:{device:02x}.{function}");
            prop_assert_eq!(parse_bus_id(&sysfs), Ok(id));
        }
    }

    /// A CPU set written as the kernel's `%*pbl` (ranges, commas) parses back to the set.
    #[test]
    fn cpulists_round_trip(cpus in prop::collection::btree_set(0u32..8192, 0..64)) {
        let cpus: Vec<u32> = cpus.into_iter().collect();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
            i = j + 1;
        }
        prop_assert_eq!(parse_cpulist(&parts.join(",")), Ok(cpus));
    }

    #[test]
    fn uuids_round_trip(bytes in any::<[u8; 16]>(), upper in any::<bool>()) {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
        let text = if upper { text.to_ascii_uppercase() } else { text };
        prop_assert_eq!(parse_uuid(&text), Ok(bytes));
        prop_assert_eq!(parse_uuid(&hex), Ok(bytes));
    }
}
