//! The ethtool generic netlink family (`"ethtool"`, version 1), shared by the sources that
//! ask it: `phy` (FEC, standard statistics, link state) and `transceiver` (module EEPROM).
//!
//! Kernel interface: `include/uapi/linux/ethtool_netlink.h` (6.14+:
//! `ethtool_netlink_generated.h`, generated from `Documentation/netlink/specs/ethtool.yaml`),
//! `Documentation/networking/ethtool-netlink.rst`. Every request carries a header nest
//! naming the device by index or name and the request's flags; every reply carries the same
//! header naming the device it answers for.

use super::genl::Attrs;
use super::{DecodeError, attributes, c_string, find, u32_value};

/// The family's name, as `nlctrl` knows it.
pub const FAMILY: &str = "ethtool";
/// `ETHTOOL_GENL_VERSION`.
pub const VERSION: u8 = 1;

/// `ETHTOOL_A_HEADER_DEV_INDEX` (u32).
pub const A_HEADER_DEV_INDEX: u16 = 1;
/// `ETHTOOL_A_HEADER_DEV_NAME` (string).
pub const A_HEADER_DEV_NAME: u16 = 2;
/// `ETHTOOL_A_HEADER_FLAGS` (u32).
pub const A_HEADER_FLAGS: u16 = 3;

/// `ETHTOOL_FLAG_COMPACT_BITSETS`: bitsets as value/mask arrays rather than named bits.
pub const FLAG_COMPACT_BITSETS: u32 = 1 << 0;
/// `ETHTOOL_FLAG_OMIT_REPLY`.
#[allow(dead_code, reason = "for SET requests; no source sends one yet")]
pub const FLAG_OMIT_REPLY: u32 = 1 << 1;
/// `ETHTOOL_FLAG_STATS`: include statistics in the reply (FEC, pause, ...).
pub const FLAG_STATS: u32 = 1 << 2;

/// The request header nest for the netdev `ifindex` with `flags` (no flags attribute when
/// `flags` is 0, as ethtool(8) sends it).
pub fn header(ifindex: u32, flags: u32) -> Attrs {
    let h = Attrs::new().u32(A_HEADER_DEV_INDEX, ifindex);
    if flags == 0 {
        h
    } else {
        h.u32(A_HEADER_FLAGS, flags)
    }
}

/// The reply header nest's device: `ETHTOOL_A_HEADER_DEV_INDEX` and `ETHTOOL_A_HEADER_DEV_NAME`
/// (`ethnl_fill_reply_header()`, `net/ethtool/netlink.c`, writes both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyHeader {
    /// `ETHTOOL_A_HEADER_DEV_INDEX`.
    pub index: Option<u32>,
    /// `ETHTOOL_A_HEADER_DEV_NAME`.
    pub name: Option<String>,
}

/// Decodes a reply's header nest (the payload of its `*_HEADER` attribute).
pub fn decode_header(payload: &[u8]) -> Result<ReplyHeader, DecodeError> {
    let attrs = attributes(payload)?;
    Ok(ReplyHeader {
        index: find(&attrs, A_HEADER_DEV_INDEX).and_then(u32_value),
        name: find(&attrs, A_HEADER_DEV_NAME)
            .map(|p| String::from_utf8_lossy(c_string(p)).into_owned()),
    })
}

// Bitsets (`Documentation/networking/ethtool-netlink.rst`, "Bit sets"; written by
// `ethnl_put_bitset32()`, read by `ethnl_update_bitset32()` in `net/ethtool/bitset.c`).
// Attribute numbers from `include/uapi/linux/ethtool_netlink_generated.h`
// (`ethtool_netlink.h` before 6.14).

/// `ETHTOOL_A_BITSET_NOMASK` (flag): the bitset is a list (value only), not a value/mask pair.
pub const A_BITSET_NOMASK: u16 = 1;
/// `ETHTOOL_A_BITSET_SIZE` (u32): the number of significant bits.
pub const A_BITSET_SIZE: u16 = 2;
/// `ETHTOOL_A_BITSET_BITS` (nest of `ETHTOOL_A_BITSET_BITS_BIT`): the verbose form.
pub const A_BITSET_BITS: u16 = 3;
/// `ETHTOOL_A_BITSET_VALUE` (u32 array): the compact form's value words.
pub const A_BITSET_VALUE: u16 = 4;
/// `ETHTOOL_A_BITSET_MASK` (u32 array): the compact form's mask words.
pub const A_BITSET_MASK: u16 = 5;
/// `ETHTOOL_A_BITSET_BITS_BIT` (nest): one bit of the verbose form.
pub const A_BITSET_BITS_BIT: u16 = 1;
/// `ETHTOOL_A_BITSET_BIT_INDEX` (u32).
pub const A_BITSET_BIT_INDEX: u16 = 1;
/// `ETHTOOL_A_BITSET_BIT_NAME` (string).
pub const A_BITSET_BIT_NAME: u16 = 2;
/// `ETHTOOL_A_BITSET_BIT_VALUE` (flag): the bit is set (verbose form with a mask).
pub const A_BITSET_BIT_VALUE: u16 = 3;

/// The largest bitset accepted from a reply; the kernel's largest (link modes) has about
/// a hundred bits, features a few dozen more.
pub const MAX_BITSET_BITS: u32 = 4096;

/// One bit of a decoded bitset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bit {
    /// The bit's index.
    pub index: u32,
    /// Its name, where the verbose form gave one (`"FEC_RS"`... as the kernel's string set
    /// names it).
    pub name: Option<String>,
    /// Whether it is set.
    pub set: bool,
}

/// A decoded bitset, compact or verbose: the bits it speaks of (every bit of a list, the
/// masked bits of a value/mask pair), in index order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bitset {
    /// `ETHTOOL_A_BITSET_SIZE`.
    pub size: u32,
    /// Whether it was a list (`ETHTOOL_A_BITSET_NOMASK`).
    pub list: bool,
    /// The bits: for a list the set ones, for a value/mask pair the masked ones.
    pub bits: Vec<Bit>,
}

impl Bitset {
    /// Whether bit `index` is set.
    pub fn is_set(&self, index: u32) -> bool {
        self.set_bits().any(|b| b == index)
    }

    /// The indices of the set bits, ascending.
    pub fn set_bits(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().filter(|b| b.set).map(|b| b.index)
    }
}

/// Decodes a bitset attribute's payload, compact (`ETHTOOL_FLAG_COMPACT_BITSETS`: value and
/// mask as u32 words, bit *i* in word *i*/32 at position *i*%32) or verbose (a nest of bits
/// with index, name and, with a mask, a value flag).
pub fn decode_bitset(payload: &[u8]) -> Result<Bitset, DecodeError> {
    let attrs = attributes(payload)?;
    let list = find(&attrs, A_BITSET_NOMASK).is_some();
    let size = find(&attrs, A_BITSET_SIZE)
        .and_then(u32_value)
        .ok_or_else(|| DecodeError("bitset without ETHTOOL_A_BITSET_SIZE".into()))?;
    if size > MAX_BITSET_BITS {
        return Err(DecodeError(format!(
            "bitset of {size} bits, more than {MAX_BITSET_BITS}"
        )));
    }
    let mut bits = Vec::new();
    if let Some(value) = find(&attrs, A_BITSET_VALUE) {
        let words = words(value, size, "value")?;
        let mask = match find(&attrs, A_BITSET_MASK) {
            Some(mask) => Some(self::words(mask, size, "mask")?),
            None if list => None,
            None => {
                return Err(DecodeError(
                    "compact bitset with neither a mask nor ETHTOOL_A_BITSET_NOMASK".into(),
                ));
            }
        };
        for index in 0..size {
            let (w, b) = ((index / 32) as usize, index % 32);
            let known = mask.as_ref().is_none_or(|m| m[w] & (1 << b) != 0);
            let set = words[w] & (1 << b) != 0;
            if known && (set || mask.is_some()) {
                bits.push(Bit {
                    index,
                    name: None,
                    set,
                });
            }
        }
    } else if let Some(nest) = find(&attrs, A_BITSET_BITS) {
        for (ty, bit) in attributes(nest)? {
            if ty != A_BITSET_BITS_BIT {
                continue;
            }
            let bit = attributes(bit)?;
            let index = find(&bit, A_BITSET_BIT_INDEX)
                .and_then(u32_value)
                .ok_or_else(|| DecodeError("bitset bit without an index".into()))?;
            if index >= size {
                return Err(DecodeError(format!(
                    "bitset bit {index} past its size {size}"
                )));
            }
            bits.push(Bit {
                index,
                name: find(&bit, A_BITSET_BIT_NAME)
                    .map(|p| String::from_utf8_lossy(c_string(p)).into_owned()),
                set: list || find(&bit, A_BITSET_BIT_VALUE).is_some(),
            });
        }
        bits.sort_by_key(|b| b.index);
    } else if size > 0 {
        return Err(DecodeError(
            "bitset with neither ETHTOOL_A_BITSET_VALUE nor ETHTOOL_A_BITSET_BITS".into(),
        ));
    }
    Ok(Bitset { size, list, bits })
}

/// The u32 words of a compact bitset's value or mask, exactly as many as `size` needs.
fn words(payload: &[u8], size: u32, what: &str) -> Result<Vec<u32>, DecodeError> {
    let n = size.div_ceil(32) as usize;
    if payload.len() != n * 4 {
        return Err(DecodeError(format!(
            "bitset {what} of {} bytes for {size} bits",
            payload.len()
        )));
    }
    Ok(payload
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

/// A compact list bitset of `size` bits with the bits `set` (each below `size`), as a
/// request's bitset attribute holds it: `NOMASK`, `SIZE`, `VALUE`.
pub fn compact_list(size: u32, set: &[u32]) -> Attrs {
    let mut words = vec![0u32; size.div_ceil(32) as usize];
    for &bit in set.iter().filter(|&&b| b < size) {
        words[(bit / 32) as usize] |= 1 << (bit % 32);
    }
    let value: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    Attrs::new()
        .bytes(A_BITSET_NOMASK, &[])
        .u32(A_BITSET_SIZE, size)
        .bytes(A_BITSET_VALUE, &value)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{cstr, nest, nla};
    use super::*;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn a_compact_list_gives_its_set_bits() {
        // ethnl_put_bitset32() with no mask: NOMASK, SIZE, VALUE (bit 50: word 1, bit 18).
        let payload = [
            nla(A_BITSET_NOMASK, &[]),
            nla(A_BITSET_SIZE, &121u32.to_ne_bytes()),
            nla(A_BITSET_VALUE, &words(&[0x1, 1 << 18, 0, 1 << 10])),
        ]
        .concat();
        let set = decode_bitset(&payload).unwrap();
        assert!(set.list);
        assert_eq!(set.set_bits().collect::<Vec<_>>(), vec![0, 50, 106]);
        assert!(set.is_set(50) && !set.is_set(51));
        // A value of another length than SIZE needs is refused.
        let short = [
            nla(A_BITSET_NOMASK, &[]),
            nla(A_BITSET_SIZE, &121u32.to_ne_bytes()),
            nla(A_BITSET_VALUE, &words(&[1, 2])),
        ]
        .concat();
        assert!(decode_bitset(&short).is_err());
    }

    #[test]
    fn a_compact_value_and_mask_speaks_of_the_masked_bits() {
        let payload = [
            nla(A_BITSET_SIZE, &8u32.to_ne_bytes()),
            nla(A_BITSET_VALUE, &words(&[0b0101])),
            nla(A_BITSET_MASK, &words(&[0b0111])),
        ]
        .concat();
        let set = decode_bitset(&payload).unwrap();
        assert!(!set.list);
        let bits: Vec<(u32, bool)> = set.bits.iter().map(|b| (b.index, b.set)).collect();
        assert_eq!(bits, vec![(0, true), (1, false), (2, true)]);
        // Neither a mask nor NOMASK: malformed.
        let bare = [
            nla(A_BITSET_SIZE, &8u32.to_ne_bytes()),
            nla(A_BITSET_VALUE, &words(&[1])),
        ]
        .concat();
        assert!(decode_bitset(&bare).is_err());
    }

    #[test]
    fn a_verbose_bitset_gives_indices_names_and_values() {
        let bit = |i: u32, name: &str, value: bool| {
            let mut attrs = vec![
                nla(A_BITSET_BIT_INDEX, &i.to_ne_bytes()),
                nla(A_BITSET_BIT_NAME, &cstr(name)),
            ];
            if value {
                attrs.push(nla(A_BITSET_BIT_VALUE, &[]));
            }
            nest(A_BITSET_BITS_BIT, &attrs)
        };
        let payload = [
            nla(A_BITSET_SIZE, &121u32.to_ne_bytes()),
            nest(
                A_BITSET_BITS,
                &[bit(51, "BASER", false), bit(50, "RS", true)],
            ),
        ]
        .concat();
        let set = decode_bitset(&payload).unwrap();
        assert_eq!(set.set_bits().collect::<Vec<_>>(), vec![50]);
        assert_eq!(set.bits[0].name.as_deref(), Some("RS"));
        assert_eq!(set.bits[1].index, 51);
        // A list: every bit given is set.
        let list = [
            nla(A_BITSET_NOMASK, &[]),
            nla(A_BITSET_SIZE, &121u32.to_ne_bytes()),
            nest(A_BITSET_BITS, &[bit(51, "BASER", false)]),
        ]
        .concat();
        assert!(decode_bitset(&list).unwrap().is_set(51));
        // A bit past SIZE, no SIZE, an absurd SIZE: errors.
        let past = [
            nla(A_BITSET_SIZE, &8u32.to_ne_bytes()),
            nest(A_BITSET_BITS, &[bit(51, "BASER", true)]),
        ]
        .concat();
        assert!(decode_bitset(&past).is_err());
        assert!(decode_bitset(&nla(A_BITSET_NOMASK, &[])).is_err());
        assert!(decode_bitset(&nla(A_BITSET_SIZE, &u32::MAX.to_ne_bytes())).is_err());
    }

    #[test]
    fn a_request_list_round_trips() {
        let payload = compact_list(5, &[0, 3, 9]).finish();
        let set = decode_bitset(&payload).unwrap();
        assert!(set.list);
        assert_eq!(set.size, 5);
        assert_eq!(set.set_bits().collect::<Vec<_>>(), vec![0, 3]);
    }

    #[test]
    fn the_reply_header_names_the_device() {
        let payload = [
            nla(A_HEADER_DEV_INDEX, &4u32.to_ne_bytes()),
            nla(A_HEADER_DEV_NAME, &cstr("ens1f0np0")),
        ]
        .concat();
        let h = decode_header(&payload).unwrap();
        assert_eq!((h.index, h.name.as_deref()), (Some(4), Some("ens1f0np0")));
        assert!(decode_header(&[9, 0, 1, 0]).is_err());
    }
}
