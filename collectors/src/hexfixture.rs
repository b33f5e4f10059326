//! Annotated hex fixtures for tests: the recorded netlink replies (`tests/fixtures/dcb`,
//! `phy`, `devlink`) and umad packets (`tests/fixtures/smp`) are kept as hex with comments.

/// The bytes of an annotated hex fixture: `#` starts a comment, whitespace is ignored.
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}
