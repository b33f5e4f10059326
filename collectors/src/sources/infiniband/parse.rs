//! Pure parsers for the text the kernel prints in `/sys/class/infiniband`
//! (`drivers/infiniband/core/sysfs.c`, `Documentation/ABI/stable/sysfs-class-infiniband`).
//! They take `&str` and return typed values, so they are table-tested with kernel text.

use super::types::{Enumerated, MtuRule, Rate};
use crate::error::ErrorKind;
use crate::fs::attr::Invalid;

/// Why a value could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text does not have the expected format.
    #[error("expected {expected}, found {found:?}")]
    Format {
        /// What format was expected.
        expected: &'static str,
        /// What was found (truncated).
        found: String,
    },
    /// The kernel printed `N/A (no PMA)`: the counter is not available on this device.
    #[error("the kernel reports {0:?}")]
    NotAvailable(String),
}

/// A value the kernel reports as not available is an [`ErrorKind::Unavailable`] error of its
/// file, any other refused text a parse error.
impl From<ParseError> for Invalid {
    fn from(err: ParseError) -> Self {
        let kind = match err {
            ParseError::NotAvailable(_) => ErrorKind::Unavailable,
            ParseError::Format { .. } => ErrorKind::Parse,
        };
        Invalid {
            kind,
            detail: err.to_string(),
        }
    }
}

fn format_error(expected: &'static str, found: &str) -> ParseError {
    let mut found = found.to_owned();
    if found.len() > 64 {
        let mut cut = 64;
        while !found.is_char_boundary(cut) {
            cut -= 1;
        }
        found.truncate(cut);
        found.push('…');
    }
    ParseError::Format { expected, found }
}

/// Parses `"<n>: <NAME>"`, as printed by `state`, `phys_state` and `node_type`.
pub fn parse_enumerated(text: &str) -> Result<Enumerated, ParseError> {
    let text = text.trim();
    let (number, name) = text
        .split_once(':')
        .ok_or_else(|| format_error("\"<number>: <name>\"", text))?;
    let value = number
        .trim()
        .parse::<u32>()
        .map_err(|_| format_error("\"<number>: <name>\"", text))?;
    Ok(Enumerated {
        value,
        name: name.trim().to_owned(),
    })
}

/// Parses `rate`: `"<Gb/s>[.5] Gb/sec (<width>X[ <SPEED>])"`, including older kernels'
/// `"10 Gb/sec (4X)"` without a speed word and the fractional `"2.5 Gb/sec (1X SDR)"`.
pub fn parse_rate(text: &str) -> Result<Rate, ParseError> {
    const EXPECTED: &str = "\"<n> Gb/sec (<w>X[ <speed>])\"";
    let text = text.trim();
    let (number, rest) = text
        .split_once(' ')
        .ok_or_else(|| format_error(EXPECTED, text))?;
    let rest = rest
        .strip_prefix("Gb/sec (")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format_error(EXPECTED, text))?;
    let bits_per_second = parse_gbps(number).ok_or_else(|| format_error(EXPECTED, text))?;
    let (width, speed) = match rest.split_once(' ') {
        Some((width, speed)) => (width, Some(speed.trim())),
        None => (rest, None),
    };
    let width = width
        .strip_suffix('X')
        .and_then(|w| w.parse::<u32>().ok())
        .filter(|&w| w > 0)
        .ok_or_else(|| format_error(EXPECTED, text))?;
    let speed = match speed {
        Some("") | None => None,
        Some(s) if s.chars().all(|c| c.is_ascii_alphanumeric()) => Some(s.to_owned()),
        Some(_) => return Err(format_error(EXPECTED, text)),
    };
    Ok(Rate {
        bits_per_second,
        width,
        speed,
    })
}

/// `"400"` → 400·10⁹, `"2.5"` → 2.5·10⁹ bits per second, exactly.
fn parse_gbps(number: &str) -> Option<u64> {
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if whole.is_empty() || !whole.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let mut frac_ns: u64 = 0;
    for (i, digit) in frac.bytes().enumerate() {
        frac_ns += u64::from(digit - b'0') * 10u64.pow(8 - i as u32);
    }
    whole.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Parses a counter printed with `%u`/`%llu`; `N/A (no PMA)` (kernels before the PMA
/// rework, iWARP and mlx4 VFs) is reported as [`ParseError::NotAvailable`].
pub fn parse_counter(text: &str) -> Result<u64, ParseError> {
    let text = text.trim();
    if text.starts_with("N/A") {
        return Err(ParseError::NotAvailable(text.to_owned()));
    }
    if text.is_empty() || !text.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format_error("an unsigned decimal counter", text));
    }
    text.parse::<u64>()
        .map_err(|_| format_error("an unsigned 64-bit counter", text))
}

/// Parses a hexadecimal `"0x%x"` value (`lid`, `sm_lid`). Only hex digits may follow the
/// `0x`: `from_str_radix` alone would also take a sign (`0x+1a`).
pub fn parse_hex_u32(text: &str) -> Result<u32, ParseError> {
    let text = text.trim();
    text.strip_prefix("0x")
        .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| format_error("a hexadecimal \"0x...\" value", text))
}

/// Parses a decimal integer (`numa_node`, `mtu`, `lifespan`).
pub fn parse_int<T: std::str::FromStr>(text: &str) -> Result<T, ParseError> {
    let text = text.trim();
    text.parse::<T>()
        .map_err(|_| format_error("a decimal integer", text))
}

/// Parses a GID printed with `%pI6` (eight groups of four lower-case hex digits). Returns
/// `Ok(None)` for the all-zero GID, which the kernel prints for empty slots.
pub fn parse_gid(text: &str) -> Result<Option<String>, ParseError> {
    let text = text.trim();
    let groups: Vec<&str> = text.split(':').collect();
    let valid = groups.len() == 8
        && groups
            .iter()
            .all(|g| g.len() == 4 && g.bytes().all(|c| c.is_ascii_hexdigit()));
    if !valid {
        return Err(format_error("a GID of eight 4-digit hex groups", text));
    }
    if groups.iter().all(|g| *g == "0000") {
        return Ok(None);
    }
    Ok(Some(text.to_ascii_lowercase()))
}

/// The InfiniBand MTUs, largest first.
const IB_MTUS: [u32; 5] = [4096, 2048, 1024, 512, 256];

/// The active RDMA MTU a RoCE/iWARP driver derives from its netdev MTU
/// (see [`MtuRule`]): the largest IB MTU that fits after the
/// rule's headers, capped at 4096.
pub fn roce_active_mtu(rule: MtuRule, netdev_mtu: u32) -> u32 {
    let (headers, floor) = match rule {
        // iboe_get_mtu() returns 0 below 256; mlx5 then reports min(4096, 0) = 0.
        MtuRule::Iboe => (96, 0),
        // rxe clamps to 256.
        MtuRule::Rxe => (80, 256),
        // ib_mtu_int_to_enum() falls back to 256.
        MtuRule::NoHeaders => (0, 256),
    };
    let payload = netdev_mtu.saturating_sub(headers);
    IB_MTUS
        .iter()
        .copied()
        .find(|&mtu| mtu <= payload)
        .unwrap_or(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rate_the_kernel_prints_parses() {
        // (speed, per-lane deci-Gb/s) from ib_speed_attrs[] in drivers/infiniband/core/verbs.c.
        let speeds = [
            ("SDR", 25u64),
            ("DDR", 50),
            ("QDR", 100),
            ("FDR10", 100),
            ("FDR", 140),
            ("EDR", 250),
            ("HDR", 500),
            ("NDR", 1000),
            ("XDR", 2000),
        ];
        for (speed, lane) in speeds {
            for width in [1u32, 2, 4, 8, 12] {
                let rate = lane * u64::from(width);
                // sysfs_emit(buf, "%d%s Gb/sec (%dX%s)\n", rate / 10, rate % 10 ? ".5" : "", ...)
                let text = format!(
                    "{}{} Gb/sec ({}X {})\n",
                    rate / 10,
                    if rate % 10 != 0 { ".5" } else { "" },
                    width,
                    speed
                );
                let parsed = parse_rate(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
                assert_eq!(parsed.bits_per_second, rate * 100_000_000, "{text:?}");
                assert_eq!(parsed.width, width, "{text:?}");
                assert_eq!(parsed.speed.as_deref(), Some(speed), "{text:?}");
            }
        }
    }

    #[test]
    fn rates_from_real_devices_and_old_kernels() {
        let cases = [
            ("400 Gb/sec (4X NDR)\n", 400_000_000_000, 4, Some("NDR")),
            ("200 Gb/sec (2X NDR)\n", 200_000_000_000, 2, Some("NDR")),
            ("2.5 Gb/sec (1X SDR)\n", 2_500_000_000, 1, Some("SDR")),
            ("10 Gb/sec (1X FDR10)\n", 10_000_000_000, 1, Some("FDR10")),
            // Kernels before the speed word for SDR (v4.x): no suffix at all.
            ("10 Gb/sec (4X)\n", 10_000_000_000, 4, None),
            ("2.5 Gb/sec (1X)\n", 2_500_000_000, 1, None),
            ("1600 Gb/sec (8X XDR)\n", 1_600_000_000_000, 8, Some("XDR")),
        ];
        for (text, bps, width, speed) in cases {
            let rate = parse_rate(text).unwrap();
            assert_eq!(
                (rate.bits_per_second, rate.width, rate.speed.as_deref()),
                (bps, width, speed)
            );
        }
    }

    #[test]
    fn malformed_rates_are_errors() {
        for text in [
            "",
            "fast",
            "400 Gb/sec",
            "400 Gb/sec (X NDR)",
            "-10 Gb/sec (4X NDR)",
            "400 Gb/sec (0X NDR)",
            "4.0.0 Gb/sec (4X)",
            "400 Mb/sec (4X NDR)",
        ] {
            assert!(parse_rate(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn enumerated_attributes() {
        assert_eq!(
            parse_enumerated("4: ACTIVE\n").unwrap(),
            Enumerated {
                value: 4,
                name: "ACTIVE".into()
            }
        );
        assert_eq!(
            parse_enumerated("4: PortConfigurationTraining\n")
                .unwrap()
                .name,
            "PortConfigurationTraining"
        );
        assert_eq!(parse_enumerated("7: Phy Test\n").unwrap().name, "Phy Test");
        assert_eq!(parse_enumerated("9: <unknown>\n").unwrap().value, 9);
        assert_eq!(
            parse_enumerated("6: usNIC UDP\n").unwrap().name,
            "usNIC UDP"
        );
        assert!(parse_enumerated("ACTIVE").is_err());
        assert!(parse_enumerated("x: ACTIVE").is_err());
    }

    #[test]
    fn counters() {
        assert_eq!(parse_counter("0\n"), Ok(0));
        assert_eq!(parse_counter("18446744073709551615\n"), Ok(u64::MAX));
        assert_eq!(
            parse_counter("N/A (no PMA)\n"),
            Err(ParseError::NotAvailable("N/A (no PMA)".into()))
        );
        assert!(matches!(
            parse_counter("-1\n"),
            Err(ParseError::Format { .. })
        ));
        assert!(matches!(
            parse_counter("garbage\n"),
            Err(ParseError::Format { .. })
        ));
        assert!(matches!(
            parse_counter("18446744073709551616"),
            Err(ParseError::Format { .. })
        ));
        assert!(matches!(parse_counter(""), Err(ParseError::Format { .. })));
    }

    #[test]
    fn gids() {
        assert_eq!(
            parse_gid("0000:0000:0000:0000:0000:0000:0000:0000\n"),
            Ok(None)
        );
        assert_eq!(
            parse_gid("fe80:0000:0000:0000:0ac4:7aff:fe12:3456\n"),
            Ok(Some("fe80:0000:0000:0000:0ac4:7aff:fe12:3456".into()))
        );
        assert!(parse_gid("fe80::1").is_err());
    }

    #[test]
    fn lids_and_pci_addresses() {
        assert_eq!(parse_hex_u32("0x1a3\n"), Ok(0x1a3));
        assert_eq!(parse_hex_u32("0x0\n"), Ok(0));
        assert!(parse_hex_u32("419").is_err());
        // Found by the property tests: `from_str_radix` takes a sign after the `0x`.
        assert!(parse_hex_u32("0x+a").is_err());
    }

    #[test]
    fn active_mtu_rules_match_the_kernel() {
        // iboe_get_mtu(): 1500 → 1024, 4200 → 4096, 9000 → 4096, 4191 → 2048.
        let iboe = [
            (1500, 1024),
            (4200, 4096),
            (9000, 4096),
            (4192, 4096),
            (4191, 2048),
            (2144, 2048),
            (2143, 1024),
            (1120, 1024),
            (1119, 512),
            (352, 256),
            (351, 0),
        ];
        for (netdev, active) in iboe {
            assert_eq!(
                roce_active_mtu(MtuRule::Iboe, netdev),
                active,
                "iboe {netdev}"
            );
        }
        // rxe, measured on a live kernel (Soft-RoCE on a stock Debian 6.1 kernel, netdev MTU set step by step).
        let rxe = [
            (68, 256),
            (576, 256),
            (1103, 512),
            (1104, 1024),
            (1280, 1024),
            (1500, 1024),
            (2127, 1024),
            (2128, 2048),
            (4000, 2048),
            (4175, 2048),
            (4176, 4096),
            (4200, 4096),
            (9000, 4096),
            (65535, 4096),
        ];
        for (netdev, active) in rxe {
            assert_eq!(
                roce_active_mtu(MtuRule::Rxe, netdev),
                active,
                "rxe {netdev}"
            );
        }
        // iw_query_port(): no headers; siw on lo (MTU 65536) shows 4096, on a 1500 veth 1024.
        let iwarp = [
            (1500, 1024),
            (9000, 4096),
            (65536, 4096),
            (4096, 4096),
            (200, 256),
        ];
        for (netdev, active) in iwarp {
            assert_eq!(
                roce_active_mtu(MtuRule::NoHeaders, netdev),
                active,
                "iwarp {netdev}"
            );
        }
    }

    /// A small deterministic generator, so the robustness test needs no dependency.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    #[test]
    fn parsers_never_panic_on_arbitrary_text() {
        let alphabet: Vec<char> = "0123456789abcdefx:. XGb/sec()NDRA\n\t-+é\u{0}"
            .chars()
            .collect();
        let mut rng = Lcg(0x5eed);
        for _ in 0..50_000 {
            let len = (rng.next() % 32) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(rng.next() as usize) % alphabet.len()])
                .collect();
            if let Ok(rate) = parse_rate(&text) {
                assert!(rate.width > 0, "{text:?}");
            }
            let _ = parse_enumerated(&text);
            let _ = parse_counter(&text);
            let _ = parse_hex_u32(&text);
            let _ = parse_gid(&text);
            let _ = parse_int::<i64>(&text);
        }
    }

    #[test]
    fn formatted_rates_round_trip() {
        let mut rng = Lcg(7);
        for _ in 0..10_000 {
            let deci = rng.next() % 100_000;
            let width = 1 + (rng.next() % 32) as u32;
            let text = format!(
                "{}{} Gb/sec ({}X NDR)",
                deci / 10,
                if deci % 10 == 5 { ".5" } else { "" },
                width
            );
            let rate = parse_rate(&text).unwrap();
            let expect = (deci / 10) * 1_000_000_000 + if deci % 10 == 5 { 500_000_000 } else { 0 };
            assert_eq!(
                (rate.bits_per_second, rate.width),
                (expect, width),
                "{text}"
            );
        }
    }
}
