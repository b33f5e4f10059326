//! The ground the read path stands on: where the kernel's file systems are mounted
//! ([`Roots`]), the device a path belongs to ([`device_key`]), the one test of a PCI address
//! ([`is_pci_address`]), maps and orders over paths and names, and the coarse clock every
//! layer stamps its work with. It imports nothing of the crate, so every layer above
//! ([`crate::fs`]) and every source may use it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// Where the kernel's pseudo file systems are mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// The sysfs mount point (`--path.sysfs`).
    pub sysfs: PathBuf,
    /// The procfs mount point (`--path.procfs`).
    pub procfs: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sysfs: PathBuf::from(DEFAULT_SYSFS),
            procfs: PathBuf::from(DEFAULT_PROCFS),
        }
    }
}

/// The default sysfs mount point.
pub const DEFAULT_SYSFS: &str = "/sys";
/// The default procfs mount point.
pub const DEFAULT_PROCFS: &str = "/proc";

/// The monotonic clock at the kernel's tick resolution (`CLOCK_MONOTONIC_COARSE`: a few
/// milliseconds, and a fraction of the cost of the precise clock). Every guarded operation
/// stamps its start, and a blocked one is measured in seconds.
#[allow(unsafe_code)]
pub(crate) fn coarse_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_COARSE exists on every
    // Linux kernel this runs on (since 2.6.32), and the call cannot fail otherwise.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Class directories whose entries are devices, under `class/` and inside `devices/` paths.
const DEVICE_CLASSES: &[&str] = &["infiniband", "infiniband_verbs", "net", "nvme", "hwmon"];

/// The directory of the device `path` belongs to: `class/<class>/<name>`,
/// `bus/<bus>/devices/<name>`, or under `devices/` the class entry or the deepest PCI function.
/// Paths under procfs map to their first two components; other paths to their parent.
pub fn device_key(roots: &Roots, path: &Path) -> PathBuf {
    device_prefix(roots, path).into_owned()
}

/// [`device_key`] without allocating where the device directory is a prefix of `path` (every
/// path the sources build): the guard computes it for every read.
pub fn device_prefix<'a>(roots: &Roots, path: &'a Path) -> Cow<'a, Path> {
    let (root, rel) = if let Ok(rel) = path.strip_prefix(&roots.sysfs) {
        (&roots.sysfs, rel)
    } else if let Ok(rel) = path.strip_prefix(&roots.procfs) {
        return take_components(&roots.procfs, path, rel, 2);
    } else {
        return Cow::Borrowed(path.parent().unwrap_or(path));
    };
    let mut parts = normal(rel);
    let take = match parts.next() {
        Some("class") => 3,
        Some("bus") if parts.nth(1) == Some("devices") => 4,
        Some("devices") => {
            let parts: Vec<&str> = normal(rel).collect();
            let class = parts
                .iter()
                .position(|p| DEVICE_CLASSES.contains(p))
                .filter(|&i| i + 1 < parts.len());
            match class {
                Some(i) => i + 2,
                None => parts
                    .iter()
                    .rposition(|p| is_pci_address(p))
                    .map_or(2, |i| i + 1),
            }
        }
        _ => 3,
    };
    take_components(root, path, rel, take)
}

/// `root` joined with the first `take` normal components of `rel` (`path` = `root`/`rel`):
/// a slice of `path` when `rel` is plain (no `.`, `..` or doubled separators), else built.
fn take_components<'a>(root: &Path, path: &'a Path, rel: &Path, take: usize) -> Cow<'a, Path> {
    let bytes = rel.as_os_str().as_bytes();
    let plain = !bytes.starts_with(b"/")
        && bytes
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..");
    if plain {
        let end = bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| i)
            .nth(take.saturating_sub(1))
            .unwrap_or(bytes.len());
        let whole = path.as_os_str().as_bytes();
        let cut = whole.len() - bytes.len() + end;
        if take > 0 {
            return Cow::Borrowed(Path::new(std::ffi::OsStr::from_bytes(&whole[..cut])));
        }
    }
    Cow::Owned(
        normal(rel)
            .take(take)
            .fold(root.to_path_buf(), |p, c| p.join(c)),
    )
}

fn normal(path: &Path) -> impl Iterator<Item = &str> {
    path.components().filter_map(|c| match c {
        Component::Normal(s) => s.to_str(),
        _ => None,
    })
}

/// Whether `name` is a PCI address in sysfs form (`0000:18:00.0`; domains behind Intel VMD
/// have five digits, `10000:01:00.0`).
pub fn is_pci_address(name: &str) -> bool {
    let hex = |s: &str, n: std::ops::RangeInclusive<usize>| {
        n.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_hexdigit())
    };
    let mut parts = name.split(':');
    let (Some(domain), Some(bus), Some(devfn), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return false;
    };
    hex(domain, 4..=5)
        && hex(bus, 2..=2)
        && hex(dev, 2..=2)
        && func.len() == 1
        && (b'0'..=b'7').contains(&func.as_bytes()[0])
}

/// FxHash (rustc's hasher) over a path's bytes, for maps looked up on every read: `Path`'s own
/// `Hash` walks its components through SipHash.
#[derive(Debug, Default, Clone, Copy)]
pub struct PathHasher(u64);

impl Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by path, hashed over the path's bytes ([`PathHasher`]): two spellings of one
/// path are two keys, which is right for paths a source builds the same way every time.
#[derive(Debug, Clone)]
pub struct PathMap<V> {
    map: HashMap<Box<[u8]>, V, BuildHasherDefault<PathHasher>>,
}

impl<V> Default for PathMap<V> {
    fn default() -> Self {
        PathMap {
            map: HashMap::default(),
        }
    }
}

impl<V> PathMap<V> {
    /// The value of `path`.
    pub fn get(&self, path: &Path) -> Option<&V> {
        self.map.get(path.as_os_str().as_bytes())
    }

    /// Sets the value of `path`.
    pub fn insert(&mut self, path: &Path, value: V) -> Option<V> {
        self.map.insert(path.as_os_str().as_bytes().into(), value)
    }

    /// Removes `path`.
    pub fn remove(&mut self, path: &Path) -> Option<V> {
        self.map.remove(path.as_os_str().as_bytes())
    }

    /// Keeps the entries `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&Path, &mut V) -> bool) {
        self.map
            .retain(|k, v| keep(Path::new(std::ffi::OsStr::from_bytes(k)), v));
    }

    /// Moves every entry of `other` in, replacing entries of the same path.
    pub fn extend(&mut self, other: PathMap<V>) {
        self.map.extend(other.map);
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many entries it has.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// A directory's path with one name after it, changed without parsing the path again
/// (`PathBuf::push` and `pop` walk the components each time): for reading every file of a
/// directory.
#[derive(Debug)]
pub struct ChildPath {
    buf: Vec<u8>,
    base: usize,
}

impl ChildPath {
    /// Paths under `dir`.
    pub fn new(dir: &Path) -> Self {
        let mut buf = Vec::with_capacity(dir.as_os_str().len() + 48);
        buf.extend_from_slice(dir.as_os_str().as_bytes());
        if buf.last() != Some(&b'/') {
            buf.push(b'/');
        }
        ChildPath {
            base: buf.len(),
            buf,
        }
    }

    /// `dir/name`.
    pub fn of(&mut self, name: &str) -> &Path {
        self.buf.truncate(self.base);
        self.buf.extend_from_slice(name.as_bytes());
        Path::new(std::ffi::OsStr::from_bytes(&self.buf))
    }
}

/// Compares names so that runs of digits compare by value: `mlx5_2 < mlx5_10`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                let ord = na
                    .len()
                    .cmp(&nb.len())
                    .then_with(|| na.cmp(nb))
                    .then(da.cmp(&db));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[zeros..]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn roots() -> Roots {
        Roots {
            sysfs: PathBuf::from("/s"),
            procfs: PathBuf::from("/p"),
        }
    }

    #[test]
    fn device_keys() {
        let r = roots();
        let key = |p: &str| device_key(&r, Path::new(p)).display().to_string();
        assert_eq!(
            key("/s/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"),
            "/s/class/infiniband/mlx5_0"
        );
        assert_eq!(key("/s/class/infiniband"), "/s/class/infiniband");
        assert_eq!(
            key("/s/bus/pci/devices/0000:17:00.0/current_link_speed"),
            "/s/bus/pci/devices/0000:17:00.0"
        );
        assert_eq!(
            key("/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0/infiniband/mlx5_0/ports/1/state"),
            "/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0/infiniband/mlx5_0"
        );
        assert_eq!(
            key("/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0/aer_dev_correctable"),
            "/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0"
        );
        assert_eq!(
            key("/s/devices/system/node/node0/cpulist"),
            "/s/devices/system"
        );
        assert_eq!(key("/p/net/dev"), "/p/net/dev");
        assert_eq!(key("/elsewhere/file"), "/elsewhere");
        assert_eq!(key("/s/bus/pci"), "/s/bus/pci");
        // Unusual spellings give the same device, built rather than sliced.
        assert_eq!(
            key("/s/class//infiniband/./mlx5_0/ports/1/state"),
            "/s/class/infiniband/mlx5_0"
        );
        assert!(matches!(
            device_prefix(&r, Path::new("/s/class/net/eth0/statistics/rx_bytes")),
            Cow::Borrowed(p) if p == Path::new("/s/class/net/eth0")
        ));
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:18:00.0"));
        assert!(is_pci_address("0000:af:00.1"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:18:00.8"));
        assert!(is_pci_address("10000:01:00.0"));
        assert!(!is_pci_address("0000:18:00"));
        assert!(!is_pci_address("0000:18:00.0:1"));
    }

    #[test]
    fn natural_order_sorts_numbers_by_value() {
        let mut names = vec!["mlx5_10", "mlx5_2", "mlx5_1", "irdma0", "mlx5_0", "gid"];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            ["gid", "irdma0", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"]
        );
    }

    proptest! {
        #![proptest_config(crate::strategies::config(1024))]

        #[test]
        fn pci_addresses_are_recognized(
            domain in 0u32..0x20000,
            bus in any::<u8>(),
            dev in 0u8..32,
            func in 0u8..8,
        ) {
            let address = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}");
            prop_assert!(is_pci_address(&address), "{}", address);
            let longer = format!("{address}0");
            let bad_function = format!("{domain:04x}:{bus:02x}:{dev:02x}.8");
            prop_assert!(!is_pci_address(&longer));
            prop_assert!(!is_pci_address(&bad_function));
        }
    }
}
