//! Proptest strategies and settings shared by the property tests that sit beside each parser
//! (`proptests.rs` in a source's folder, `mod proptests` in a shared module).
//!
//! Two kinds of property, per parser:
//! * **never panics**: arbitrary strings and bytes, and inputs generated close to the real
//!   format (valid text with random numbers, netlink messages with random lengths, truncation
//!   and nesting), only ever give a value or an error;
//! * **round trip**: a value rendered the way the kernel (or driver, or library) renders it
//!   parses back to the same value: counters, rates, GIDs, enumerated states, netlink
//!   attributes built by [`crate::netlink::testing`], ethtool string sets and statistic names.
//!
//! Case counts are kept moderate so the whole suite runs in a few seconds in a debug build.
//! A failure prints the minimized input; each one found is kept as a named unit test beside
//! the property.

use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::netlink::testing::nla;

/// `cases` cases, no regression files written into the source tree (a failure prints its
/// minimized input, which is then kept as a unit test here).
pub(crate) fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Strings that look like kernel text: digits, hex, the separators and words the formats
/// use, whitespace, and a few non-ASCII characters.
pub(crate) fn kernelish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "0",
        "1",
        "4",
        "9",
        "00",
        "400",
        "2.5",
        ".5",
        ".",
        ":",
        " ",
        "  ",
        "\n",
        "\t",
        "x",
        "0x",
        "X",
        "Gb/sec",
        " (",
        ")",
        "(",
        "NDR",
        "4X",
        "ACTIVE",
        "N/A",
        "-",
        "+",
        "ff",
        "fe80",
        "0000",
        "GT/s",
        "PCIe",
        "é",
        "\u{0}",
        "18446744073709551615",
        "18446744073709551616",
        "4294967296",
        "e",
        "E",
        "inf",
        "NaN",
    ]);
    prop::collection::vec(pieces, 0..12).prop_map(|v| v.concat())
}

/// Any string: half arbitrary Unicode, half near the kernel formats.
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        kernelish(),
        "[ ]?(0x)?[-+]?[0-9a-fA-F]{0,9}( GT/s)?\n?",
    ]
}

// Netlink: the RDMA, rtnetlink and DCB properties build bytes with `netlink::testing`.

/// A name without NUL (a C string's content).
pub(crate) fn c_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,40}",
        "[^\u{0}]{0,40}",
        "[a-z0-9_ ,=\"\\\\{}]{1,30}",
    ]
}

/// A valid byte string mutated: truncated, a byte changed, or a length field rewritten.
pub(crate) fn mutated(bytes: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = bytes.len().max(1);
    (0..len, any::<u8>(), 0u8..4, any::<u16>()).prop_map(move |(at, byte, how, word)| {
        let mut b = bytes.clone();
        match how {
            0 => b.truncate(at),
            1 => {
                if let Some(x) = b.get_mut(at) {
                    *x = byte;
                }
            }
            2 => {
                // Rewrite a 16-bit word at a 4-byte boundary: an attribute length or type.
                let at = at & !3;
                if at + 2 <= b.len() {
                    b[at..at + 2].copy_from_slice(&word.to_ne_bytes());
                }
            }
            _ => b.extend_from_slice(&word.to_ne_bytes()),
        }
        b
    })
}

/// Attributes with random types (flags included) and payload lengths, and the
/// `(type without flags, payload)` pairs a decoder must see.
pub(crate) fn attr_list() -> impl Strategy<Value = (Vec<u8>, Vec<(u16, Vec<u8>)>)> {
    prop::collection::vec(
        (any::<u16>(), prop::collection::vec(any::<u8>(), 0..40)),
        0..10,
    )
    .prop_map(|attrs| {
        let bytes = attrs.iter().flat_map(|(ty, p)| nla(*ty, p)).collect();
        let expect = attrs.into_iter().map(|(ty, p)| (ty & 0x3fff, p)).collect();
        (bytes, expect)
    })
}

/// A netdev name `dev_valid_name()` accepts: 1–15 bytes, not `.`/`..`, no `/`, `:` or
/// whitespace.
pub(crate) fn ifname() -> impl Strategy<Value = String> {
    "[!-9;-~&&[^/]]{1,15}".prop_filter("dev_valid_name", |n| n != "." && n != "..")
}

/// An errno as `NLMSG_ERROR` carries it, edge values included.
pub(crate) fn errno_field() -> impl Strategy<Value = i32> {
    prop_oneof![
        any::<i32>(),
        Just(i32::MIN),
        Just(i32::MAX),
        Just(0),
        -4095i32..=0
    ]
}
