//! Captures of module memory as a [`PageReader`], so a dump from a real module is decoded
//! without the module (`railscope` tests, and "check a capture" in the docs).
//!
//! Three forms are read:
//!
//! * **The flat dump** `ethtool -m DEV hex on` prints (ethtool falls back to the legacy
//!   `ETHTOOL_GMODULEEEPROM` ioctl for a whole-EEPROM dump, even where it speaks netlink):
//!   `Offset\t\tValues`, `------\t\t------`, then lines `0x0000:\t\t03 04 07 ...` of 16
//!   bytes (ethtool's `dump_hex()`). The layout is the kernel's legacy one
//!   (`fallback_set_params()` in `net/ethtool/eeprom.c`): for SFF-8472, A0h at 0–255 and
//!   A2h at 256–511; for SFF-8636 and CMIS, page 00h at 0–255 and the upper half of page
//!   N at `128 × (N + 1)`, so page 03h at 0x200 (the 640-byte `ETH_MODULE_SFF_8636_MAX_LEN`
//!   dump).
//! * **Per-page dumps** of `ethtool -m DEV page N [bank B] [i2c A] [offset O] [length L]
//!   hex on` (netlink, ethtool ≥ 5.13), each the same `dump_hex()` block with the offsets
//!   within the page. ethtool prints no page label, so each block must follow its command
//!   line (`$ ethtool -m eth0 page 0x11 bank 1 hex on`) or a comment naming it
//!   (`# page 0x11 bank 1 i2c 0x50`); numbers are decimal or `0x` hex, as ethtool takes
//!   them. A block before any such line is a flat dump.
//! * **Raw bytes** (`ethtool -m DEV raw on > file`): the flat layout, unprinted.

use std::collections::BTreeMap;

use super::eeprom::{HALF_PAGE, I2C_HIGH, I2C_LOW, PageReader, PageRequest, ReadError};

/// The largest flat dump read: the legacy layout reaches page 0xFF's upper half at
/// `0x80 × 0x100 + 0x80`.
const MAX_FLAT: usize = 0x8080;

/// Which page a block of a capture holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    i2c: u8,
    page: u8,
    bank: u8,
}

/// Module memory from a capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capture {
    pages: BTreeMap<Key, Vec<Option<u8>>>,
}

/// Why a capture could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {detail}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub detail: String,
}

fn number(text: &str) -> Option<u32> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The page a command or comment line names: `page`, `bank` and `i2c` words followed by a
/// number.
fn page_line(line: &str) -> Option<Key> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let is_command = words.iter().any(|w| w.contains("ethtool"))
        && words
            .iter()
            .any(|w| matches!(*w, "-m" | "--module-info" | "--dump-module-eeprom"));
    if !is_command && !line.trim_start().starts_with('#') {
        return None;
    }
    let value = |name: &str| -> Option<u32> {
        let at = words.iter().position(|w| *w == name)?;
        number(words.get(at + 1)?)
    };
    let page = value("page");
    if page.is_none() && value("bank").is_none() && value("i2c").is_none() {
        return None;
    }
    Some(Key {
        i2c: u8::try_from(value("i2c").unwrap_or(u32::from(I2C_LOW))).ok()?,
        page: u8::try_from(page.unwrap_or(0)).ok()?,
        bank: u8::try_from(value("bank").unwrap_or(0)).ok()?,
    })
}

impl Capture {
    /// Parses the text `ethtool -m ... hex on` printed (one flat dump or per-page dumps).
    pub fn parse(text: &str) -> Result<Capture, ParseError> {
        let mut flat: Vec<Option<u8>> = Vec::new();
        let mut capture = Capture::default();
        let mut current: Option<Key> = None;
        let mut any = false;
        for (n, line) in text.lines().enumerate() {
            let err = |detail: String| ParseError {
                line: n + 1,
                detail,
            };
            if let Some(key) = page_line(line) {
                current = Some(key);
                continue;
            }
            let trimmed = line.trim();
            let Some((offset, values)) = trimmed.split_once(':') else {
                continue; // headers, decoded text, prompts
            };
            if !offset.starts_with("0x") {
                continue;
            }
            let Some(offset) = number(offset) else {
                return Err(err(format!("offset {offset:?} is not a hex number")));
            };
            let mut bytes = Vec::new();
            for word in values.split_whitespace() {
                let byte = u8::from_str_radix(word, 16)
                    .ok()
                    .filter(|_| word.len() == 2)
                    .ok_or_else(|| err(format!("{word:?} is not a hex byte")))?;
                bytes.push(byte);
            }
            any = true;
            let offset = offset as usize;
            match current {
                None => {
                    if offset + bytes.len() > MAX_FLAT {
                        return Err(err(format!(
                            "offset {offset:#x} is past the {MAX_FLAT:#x} bytes a flat dump can hold"
                        )));
                    }
                    if flat.len() < offset + bytes.len() {
                        flat.resize(offset + bytes.len(), None);
                    }
                    for (i, b) in bytes.into_iter().enumerate() {
                        flat[offset + i] = Some(b);
                    }
                }
                Some(key) => {
                    if offset + bytes.len() > 256 {
                        return Err(err(format!(
                            "offset {offset:#x} + {} bytes is past the page's 256",
                            bytes.len()
                        )));
                    }
                    let page = capture.pages.entry(key).or_insert_with(|| vec![None; 256]);
                    for (i, b) in bytes.into_iter().enumerate() {
                        page[offset + i] = Some(b);
                    }
                }
            }
        }
        if !any {
            return Err(ParseError {
                line: 0,
                detail: "no `0xNNNN:` lines of hex bytes".into(),
            });
        }
        capture.add_flat(&flat);
        Ok(capture)
    }

    /// A capture of raw bytes in the flat (legacy) layout.
    pub fn from_raw(bytes: &[u8]) -> Capture {
        let mut capture = Capture::default();
        let flat: Vec<Option<u8>> = bytes.iter().copied().map(Some).collect();
        capture.add_flat(&flat);
        capture
    }

    /// Adds the pages of a flat dump laid out as the kernel's legacy fallback lays them.
    fn add_flat(&mut self, flat: &[Option<u8>]) {
        let Some(Some(identifier)) = flat.first().copied() else {
            return;
        };
        let half = HALF_PAGE as usize;
        let sff8472 = identifier == 0x03;
        for (at, byte) in flat.iter().enumerate() {
            let Some(byte) = byte else { continue };
            let (key, offset) = if at < 2 * half {
                (
                    Key {
                        i2c: I2C_LOW,
                        page: 0,
                        bank: 0,
                    },
                    at,
                )
            } else if sff8472 {
                if at >= 4 * half {
                    continue;
                }
                (
                    Key {
                        i2c: I2C_HIGH,
                        page: 0,
                        bank: 0,
                    },
                    at - 2 * half,
                )
            } else {
                let Ok(page) = u8::try_from(at / half - 1) else {
                    continue;
                };
                (
                    Key {
                        i2c: I2C_LOW,
                        page,
                        bank: 0,
                    },
                    half + at % half,
                )
            };
            let page = self.pages.entry(key).or_insert_with(|| vec![None; 256]);
            page[offset] = page[offset].or(Some(*byte));
        }
    }

    /// The pages the capture holds bytes of: `(i2c, page, bank)`.
    pub fn pages(&self) -> Vec<(u8, u8, u8)> {
        self.pages.keys().map(|k| (k.i2c, k.page, k.bank)).collect()
    }
}

impl PageReader for Capture {
    fn read(&mut self, request: PageRequest) -> Result<Vec<u8>, ReadError> {
        let key = Key {
            i2c: request.i2c_address,
            page: request.page,
            bank: request.bank,
        };
        let page = self
            .pages
            .get(&key)
            .ok_or_else(|| ReadError::Other(format!("{request}: the capture has no such page")))?;
        let start = usize::from(request.offset);
        page.get(start..start + usize::from(request.length))
            .and_then(|bytes| bytes.iter().copied().collect::<Option<Vec<u8>>>())
            .ok_or_else(|| {
                ReadError::Other(format!("{request}: the capture lacks some of these bytes"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(offset: usize, bytes: &[u8]) -> String {
        let mut out = String::from("Offset\t\tValues\n------\t\t------");
        for (i, b) in bytes.iter().enumerate() {
            if i % 16 == 0 {
                out.push_str(&format!("\n0x{:04x}:\t\t", i + offset));
            }
            out.push_str(&format!("{b:02x} "));
        }
        out.push('\n');
        out
    }

    #[test]
    fn a_flat_qsfp_dump_puts_page_3_at_0x200() {
        let mut bytes = vec![0u8; 640];
        bytes[0] = 0x11;
        bytes[0x200] = 0x4b; // page 03h byte 128
        bytes[0x27f] = 0x99; // page 03h byte 255
        let mut c = Capture::parse(&dump(0, &bytes)).unwrap();
        assert_eq!(
            c.read(PageRequest::upper(3, 0, 128, 1).unwrap()).unwrap(),
            [0x4b]
        );
        assert_eq!(
            c.read(PageRequest::upper(3, 0, 255, 1).unwrap()).unwrap(),
            [0x99]
        );
        assert_eq!(
            c.pages(),
            [(0x50, 0, 0), (0x50, 1, 0), (0x50, 2, 0), (0x50, 3, 0)]
        );
        assert!(
            c.read(PageRequest::upper(0x11, 0, 128, 1).unwrap())
                .is_err()
        );
    }

    #[test]
    fn a_flat_sfp_dump_puts_a2h_at_256() {
        let mut bytes = vec![0u8; 512];
        bytes[0] = 0x03;
        bytes[256 + 96] = 0x1a;
        let mut c = Capture::from_raw(&bytes);
        assert_eq!(
            c.read(PageRequest::lower(0x51, 96, 1).unwrap()).unwrap(),
            [0x1a]
        );
        assert_eq!(c.pages(), [(0x50, 0, 0), (0x51, 0, 0)]);
    }

    #[test]
    fn per_page_blocks_follow_their_command_line() {
        let text = format!(
            "$ ethtool -m eth0 page 0x11 bank 1 offset 128 length 16 hex on\n{}\n# page 2\n{}",
            dump(128, &[7; 16]),
            dump(128, &[9; 128])
        );
        let mut c = Capture::parse(&text).unwrap();
        assert_eq!(
            c.read(PageRequest::upper(0x11, 1, 130, 2).unwrap())
                .unwrap(),
            [7, 7]
        );
        assert_eq!(
            c.read(PageRequest::upper(2, 0, 255, 1).unwrap()).unwrap(),
            [9]
        );
        // Bytes the capture lacks are an error, not zeros.
        assert!(
            c.read(PageRequest::upper(0x11, 1, 140, 8).unwrap())
                .is_err()
        );
    }

    #[test]
    fn garbage_is_refused_with_its_line() {
        let err = Capture::parse("Offset\t\tValues\n0x0000:\t\t03 zz\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(Capture::parse("nothing here\n").is_err());
        // An offset no module has is refused, not allocated.
        assert!(Capture::parse("0xffffffff:\t\t03\n").is_err());
    }
}
