//! The `netdev` source: traffic counters, MTU, operstate, carrier and speed of the netdevs
//! behind the RDMA ports (and the physical ones), chosen by [`NetdevFilter`].
//!
//! Kernel interfaces:
//! * rtnetlink `RTM_GETLINK` dump (`NETLINK_ROUTE`; `include/uapi/linux/if_link.h`), decoded
//!   with `netlink-packet-route`: `IFLA_STATS64` (64-bit bytes, packets, errors, drops per
//!   direction), `IFLA_MTU`, `IFLA_OPERSTATE`, `IFLA_CARRIER`, `IFLA_CARRIER_CHANGES` (or
//!   `IFLA_CARRIER_UP_COUNT` + `IFLA_CARRIER_DOWN_COUNT`). One dump, one socket, a receive
//!   timeout; no privilege needed.
//! * sysfs `class/net/<netdev>/` (`Documentation/ABI/testing/sysfs-class-net`): `speed` (Mb/s;
//!   `-1` or `EINVAL` when unknown or the link is down), the `device/driver` link, and
//!   `ifindex`/`address` to check that the rtnetlink link is the same netdev.
//!
//! **rtnetlink or sysfs.** rtnetlink answers for the agent's own network namespace, while
//! the netdevs are chosen from `--path.sysfs`. The two agree on a host (and in a container
//! with host networking and the host's `/sys`). When they do not — a fixture tree, or a
//! container that sees the host's `/sys` but has its own network namespace — a selected
//! netdev has no rtnetlink link with the same name, `ifindex` and `address`, and is read
//! from sysfs instead: `mtu`, `operstate`, `carrier`, `carrier_changes` (or
//! `carrier_up_count` + `carrier_down_count`) and `statistics/{rx,tx}_{bytes,packets,errors,dropped}`.
//! Each netdev says where its values came from ([`Origin`]). When the dump itself fails,
//! the error is counted and every netdev falls back to sysfs.
//!
//! Failure semantics: a missing sysfs file is "not provided"; `EINVAL` from `speed` or
//! `carrier` is "unknown" (the kernel's answer for a link that is down); any other failed
//! read costs that value and is a [`CollectError`]. A netdev that disappears between
//! selection and reading is dropped with one error.
//!
//! Nothing of a netdev outlives it: the source keeps no state per netdev, and the files kept
//! open for a netdev that left the selection are closed in the next collection
//! ([`crate::netdevs::let_go`]).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{CollectError, ErrorKind};
use crate::fs::attr::{self, Attrs};
use crate::fs::{Fs, Roots};
use crate::netdevs::{Departures, FILTER_OPTIONS, NetdevFilter, is_same_netdev, let_go};
use crate::netlink::rtnl::{Link, RtnlSocket, getlink_error};
use crate::run::{Run, gather, standalone};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "netdev",
    help: "Netdev traffic counters, MTU, operstate, carrier and speed over rtnetlink (RTM_GETLINK), with sysfs class/net as fallback.",
    default_enabled: true,
    options: &FILTER_OPTIONS,
};

/// How long one rtnetlink receive may wait.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// What the source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The selected netdevs, sorted by name.
    pub netdevs: Vec<Netdev>,
}

/// Where a netdev's values came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Origin {
    /// The rtnetlink link dump (plus `speed` and the driver from sysfs).
    #[default]
    Rtnetlink,
    /// sysfs `class/net/<netdev>/` only: the netdev is not in the agent's network namespace.
    Sysfs,
}

impl Origin {
    /// `rtnetlink` or `sysfs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Rtnetlink => "rtnetlink",
            Origin::Sysfs => "sysfs",
        }
    }
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes.
    pub bytes: Option<u64>,
    /// Packets.
    pub packets: Option<u64>,
    /// Packets with errors (`rx_errors`/`tx_errors`).
    pub errors: Option<u64>,
    /// Packets dropped (`rx_dropped`/`tx_dropped`).
    pub dropped: Option<u64>,
}

/// One netdev.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Netdev {
    /// The netdev's name (`ens1f0np0`).
    pub name: String,
    /// Where its values came from.
    pub origin: Origin,
    /// Its PCI (or other bus) driver (`mlx5_core`), from the `device/driver` link; `None` for
    /// virtual netdevs.
    pub driver: Option<String>,
    /// Hardware address as sysfs prints it.
    pub address: Option<String>,
    /// RFC 2863 operational state as sysfs names it: `up`, `down`, `lowerlayerdown`,
    /// `dormant`, `testing`, `notpresent`, `unknown`.
    pub operstate: Option<String>,
    /// Whether the link has carrier; `None` when unknown (an administratively down netdev).
    pub carrier: Option<bool>,
    /// MTU in bytes.
    pub mtu: Option<u64>,
    /// Link speed in Mb/s; `None` when unknown (`-1`, `EINVAL`, no `speed`).
    pub speed_mbps: Option<u64>,
    /// Carrier changes since the netdev was created.
    pub carrier_changes: Option<u64>,
    /// Received.
    pub rx: Traffic,
    /// Transmitted.
    pub tx: Traffic,
}

/// Reads the selected netdevs. Cloning it is cheap (shared handles), so each netdev's unit of
/// work owns one.
#[derive(Debug, Clone)]
pub struct NetdevSource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
    /// The netdevs of the last collection.
    departures: Arc<Departures>,
}

impl NetdevSource {
    /// A source over `roots` reading through `fs` the netdevs `filter` selects.
    pub fn new(roots: &Roots, fs: Arc<dyn Fs>, filter: NetdevFilter) -> Self {
        NetdevSource {
            fs,
            sysfs: roots.sysfs.clone(),
            filter,
            departures: Arc::default(),
        }
    }

    /// Reads every selected netdev; `links` is the rtnetlink dump, or its failure.
    pub(crate) fn read_with(
        &self,
        run: &Run<'_>,
        links: io::Result<Vec<Link>>,
    ) -> Report<Snapshot> {
        let mut errors = Vec::new();
        let links = match links {
            Ok(links) => links,
            Err(err) => {
                errors.push(getlink_error(&err));
                Vec::new()
            }
        };
        let names = self.filter.select(self.fs.as_ref(), &self.sysfs);
        let departed = self.departures.update(&names);
        let_go(self.fs.as_ref(), &self.sysfs, &departed);
        let (src, links) = (self.clone(), Arc::new(links));
        let units = run.each(names, 1, move |name| {
            let mut errors = Vec::new();
            let netdev = src.read_netdev(name, &links, &mut errors);
            (netdev, errors)
        });
        let netdevs = gather(units, &mut errors);
        Report::new(Snapshot { netdevs }, errors)
    }

    /// Reads one netdev: from its rtnetlink link where the dump has it, else from sysfs.
    fn read_netdev(
        &self,
        name: &str,
        links: &[Link],
        errors: &mut Vec<CollectError>,
    ) -> Option<Netdev> {
        let mut reader = SysfsReader {
            fs: self.fs.as_ref(),
            name,
            dir: self.sysfs.join("class/net").join(name),
            errors,
        };
        if !reader.fs.exists(&reader.dir) {
            let dir = reader.dir.clone();
            reader.errors.push(CollectError::new(
                Some(name),
                &dir,
                ErrorKind::Vanished,
                "the netdev disappeared before it was read",
            ));
            return None;
        }
        let link = links
            .iter()
            .find(|link| is_same_netdev(reader.fs, &self.sysfs, name, link, reader.errors))
            .cloned();
        let mut netdev = match link {
            Some(link) => from_link(name, link),
            None => reader.read_netdev(),
        };
        netdev.speed_mbps = reader.speed();
        netdev.driver = reader.driver();
        Some(netdev)
    }

    /// Reads the node once, with a deadline of five seconds.
    pub fn read(&self) -> Report<Snapshot> {
        standalone(SPEC.name, |run| self.read_in(run))
    }

    /// Reads the node once, one unit of `run` per netdev.
    pub fn read_in(&self, run: &Run<'_>) -> Report<Snapshot> {
        let class = self.sysfs.join("class/net");
        if !self.fs.exists(&class) {
            return Report {
                data: Some(Snapshot::default()),
                errors: Vec::new(),
                absent: Some(format!("{} does not exist", class.display())),
            };
        }
        let links = RtnlSocket::open(RECEIVE_TIMEOUT).and_then(|mut s| s.dump_links());
        self.read_with(run, links)
    }
}

impl Source for NetdevSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs, options) = (from.roots, Arc::clone(&from.fs), from.options);
        Ok(NetdevSource::new(
            roots,
            fs,
            NetdevFilter::from_options(options)?,
        ))
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}

/// A netdev from its rtnetlink link.
fn from_link(name: &str, link: Link) -> Netdev {
    let carrier_changes = link
        .carrier_changes
        .map(u64::from)
        .or_else(|| Some(u64::from(link.carrier_up_count?) + u64::from(link.carrier_down_count?)));
    let (rx, tx) = match link.stats {
        Some(s) => (
            Traffic {
                bytes: Some(s.rx_bytes),
                packets: Some(s.rx_packets),
                errors: Some(s.rx_errors),
                dropped: Some(s.rx_dropped),
            },
            Traffic {
                bytes: Some(s.tx_bytes),
                packets: Some(s.tx_packets),
                errors: Some(s.tx_errors),
                dropped: Some(s.tx_dropped),
            },
        ),
        None => Default::default(),
    };
    Netdev {
        name: name.to_owned(),
        origin: Origin::Rtnetlink,
        driver: None,
        address: link.address,
        operstate: link.operstate.map(str::to_owned),
        carrier: link.carrier,
        mtu: link.mtu.map(u64::from),
        speed_mbps: None,
        carrier_changes,
        rx,
        tx,
    }
}

/// Reads one netdev's sysfs attributes, collecting errors.
struct SysfsReader<'a> {
    fs: &'a dyn Fs,
    name: &'a str,
    dir: PathBuf,
    errors: &'a mut Vec<CollectError>,
}

impl SysfsReader<'_> {
    fn attrs(&mut self) -> Attrs<'_> {
        Attrs::new(self.fs, Some(self.name), self.errors)
    }

    /// An attribute's value; `None` when missing (quietly) or failed (with an error).
    fn text(&mut self, rel: &str) -> Option<String> {
        let path = self.dir.join(rel);
        self.attrs().string(&path)
    }

    /// A numeric attribute; text that is not a number is a parse error.
    fn number<T: std::str::FromStr>(&mut self, rel: &str) -> Option<T> {
        let path = self.dir.join(rel);
        self.attrs().number(&path)
    }

    /// Link speed: `-1` (and any negative value) or `EINVAL` mean unknown.
    fn speed(&mut self) -> Option<u64> {
        let path = self.dir.join("speed");
        let speed: i64 = self
            .attrs()
            .unknown_on(&[libc::EINVAL, libc::EOPNOTSUPP])
            .number(&path)?;
        u64::try_from(speed).ok()
    }

    /// The driver bound to the netdev's device, `None` for virtual netdevs.
    fn driver(&mut self) -> Option<String> {
        attr::peek_link(self.fs, &self.dir.join("device/driver"))
    }

    /// The netdev from sysfs alone.
    fn read_netdev(&mut self) -> Netdev {
        let carrier_path = self.dir.join("carrier");
        let carrier: Option<u8> = self
            .attrs()
            .unknown_on(&[libc::EINVAL])
            .number(&carrier_path);
        let carrier_changes = self.number("carrier_changes").or_else(|| {
            let up: u64 = self.number("carrier_up_count")?;
            let down: u64 = self.number("carrier_down_count")?;
            Some(up + down)
        });
        let mut traffic = |dir: &str| Traffic {
            bytes: self.number(&format!("statistics/{dir}_bytes")),
            packets: self.number(&format!("statistics/{dir}_packets")),
            errors: self.number(&format!("statistics/{dir}_errors")),
            dropped: self.number(&format!("statistics/{dir}_dropped")),
        };
        let rx = traffic("rx");
        let tx = traffic("tx");
        Netdev {
            name: self.name.to_owned(),
            origin: Origin::Sysfs,
            driver: None,
            address: self.text("address"),
            operstate: self.text("operstate"),
            carrier: carrier.map(|c| c != 0),
            mtu: self.number("mtu"),
            speed_mbps: None,
            carrier_changes,
            rx,
            tx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fault, FaultFs, RealFs};
    use crate::netlink::rtnl;
    use std::fs;
    use std::path::Path;

    fn write(root: &Path, rel: &str, content: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// A sysfs tree with one physical netdev (with statistics) and one virtual one.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        let nd = "devices/pci0000:3a/0000:3b:00.0/net/ens1f0np0";
        for (rel, value) in [
            ("ifindex", "2\n"),
            ("address", "0c:42:a1:78:91:f4\n"),
            ("mtu", "4200\n"),
            ("operstate", "up\n"),
            ("carrier", "1\n"),
            ("carrier_changes", "3\n"),
            ("speed", "100000\n"),
            ("statistics/rx_bytes", "123456789012\n"),
            ("statistics/tx_bytes", "987654321098\n"),
            ("statistics/rx_packets", "1000\n"),
            ("statistics/tx_packets", "2000\n"),
            ("statistics/rx_errors", "1\n"),
            ("statistics/tx_errors", "0\n"),
            ("statistics/rx_dropped", "5\n"),
            ("statistics/tx_dropped", "0\n"),
        ] {
            write(sys, &format!("{nd}/{rel}"), value);
        }
        fs::create_dir_all(sys.join("bus/pci/drivers/mlx5_core")).unwrap();
        std::os::unix::fs::symlink(
            "../../../bus/pci/drivers/mlx5_core",
            sys.join("devices/pci0000:3a/0000:3b:00.0/driver"),
        )
        .unwrap();
        std::os::unix::fs::symlink("../../../0000:3b:00.0", sys.join(format!("{nd}/device")))
            .unwrap();
        let veth = "devices/virtual/net/veth9";
        for (rel, value) in [
            ("ifindex", "9\n"),
            ("mtu", "1500\n"),
            ("operstate", "down\n"),
            ("speed", "-1\n"),
            ("carrier_up_count", "2\n"),
            ("carrier_down_count", "3\n"),
        ] {
            write(sys, &format!("{veth}/{rel}"), value);
        }
        fs::create_dir_all(sys.join("class/net")).unwrap();
        std::os::unix::fs::symlink(format!("../../{nd}"), sys.join("class/net/ens1f0np0")).unwrap();
        std::os::unix::fs::symlink(format!("../../{veth}"), sys.join("class/net/veth9")).unwrap();
        dir
    }

    fn source(sys: &Path, fs: Arc<dyn Fs>, include: Option<&str>) -> NetdevSource {
        let roots = Roots {
            sysfs: sys.to_path_buf(),
            procfs: sys.join("proc"),
        };
        NetdevSource::new(
            &roots,
            fs,
            NetdevFilter {
                include: include.map(|p| regex::Regex::new(p).unwrap()),
                exclude: None,
            },
        )
    }

    fn snapshot(report: &Report<Snapshot>) -> &Snapshot {
        report.data.as_ref().expect("data")
    }

    #[test]
    fn sysfs_fallback_when_rtnetlink_does_not_know_the_netdev() {
        let dir = tree();
        let src = source(dir.path(), Arc::new(RealFs), Some("."));
        // rtnetlink has an `ens1f0np0` too, but with another ifindex: not the same netdev.
        let other = Link {
            index: 5,
            name: Some("ens1f0np0".into()),
            mtu: Some(9000),
            ..Link::default()
        };
        let report = standalone("netdev", |run| src.read_with(run, Ok(vec![other])));
        assert_eq!(report.errors, vec![]);
        let s = snapshot(&report);
        assert_eq!(s.netdevs.len(), 2);
        let nd = &s.netdevs[0];
        assert_eq!(
            *nd,
            Netdev {
                name: "ens1f0np0".into(),
                origin: Origin::Sysfs,
                driver: Some("mlx5_core".into()),
                address: Some("0c:42:a1:78:91:f4".into()),
                operstate: Some("up".into()),
                carrier: Some(true),
                mtu: Some(4200),
                speed_mbps: Some(100_000),
                carrier_changes: Some(3),
                rx: Traffic {
                    bytes: Some(123_456_789_012),
                    packets: Some(1000),
                    errors: Some(1),
                    dropped: Some(5),
                },
                tx: Traffic {
                    bytes: Some(987_654_321_098),
                    packets: Some(2000),
                    errors: Some(0),
                    dropped: Some(0),
                },
            }
        );
        let veth = &s.netdevs[1];
        assert_eq!(veth.name, "veth9");
        assert_eq!(veth.speed_mbps, None, "-1 is unknown");
        assert_eq!(veth.carrier_changes, Some(5), "up + down counts");
        assert_eq!(veth.driver, None);
        assert_eq!(veth.rx, Traffic::default());
    }

    #[test]
    fn rtnetlink_link_wins_when_it_is_the_same_netdev() {
        let dir = tree();
        let src = source(dir.path(), Arc::new(RealFs), Some("ens"));
        let link = Link {
            index: 2,
            name: Some("ens1f0np0".into()),
            address: Some("0c:42:a1:78:91:f4".into()),
            mtu: Some(9000),
            operstate: Some("lowerlayerdown"),
            carrier: Some(false),
            carrier_changes: Some(7),
            stats: Some(rtnl::LinkStats {
                rx_bytes: 1,
                tx_bytes: 2,
                rx_packets: 3,
                tx_packets: 4,
                ..Default::default()
            }),
            ..Link::default()
        };
        let report = standalone("netdev", |run| src.read_with(run, Ok(vec![link])));
        assert_eq!(report.errors, vec![]);
        let nd = &snapshot(&report).netdevs[0];
        assert_eq!(nd.origin, Origin::Rtnetlink);
        assert_eq!(nd.mtu, Some(9000));
        assert_eq!(nd.operstate.as_deref(), Some("lowerlayerdown"));
        assert_eq!(nd.carrier_changes, Some(7));
        assert_eq!(nd.rx.bytes, Some(1));
        assert_eq!(nd.tx.packets, Some(4));
        // speed and driver still come from sysfs.
        assert_eq!(nd.speed_mbps, Some(100_000));
        assert_eq!(nd.driver.as_deref(), Some("mlx5_core"));
    }

    #[test]
    fn a_failed_dump_falls_back_to_sysfs_with_one_error() {
        let dir = tree();
        let src = source(dir.path(), Arc::new(RealFs), Some("ens"));
        let report = standalone("netdev", |run| {
            src.read_with(run, Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)))
        });
        assert_eq!(report.errors.len(), 1);
        assert_eq!(
            report.errors[0].origin,
            crate::error::Origin::netlink("rtnetlink", "RTM_GETLINK")
        );
        assert_eq!(report.errors[0].errno, Some(libc::ETIMEDOUT));
        let nd = &snapshot(&report).netdevs[0];
        assert_eq!(nd.origin, Origin::Sysfs);
        assert_eq!(nd.mtu, Some(4200));
    }

    #[test]
    fn einval_speed_is_unknown_but_eio_is_an_error() {
        let dir = tree();
        let class = dir.path().join("class/net/ens1f0np0");
        let fs = FaultFs::new()
            .fault(class.join("speed"), Fault::Errno(libc::EINVAL))
            .fault(class.join("carrier"), Fault::Errno(libc::EINVAL))
            .fault(class.join("statistics/rx_bytes"), Fault::Errno(libc::EIO))
            .fault(class.join("mtu"), Fault::Content(b"lots\n".to_vec()));
        let src = source(dir.path(), Arc::new(fs), Some("ens"));
        let report = standalone("netdev", |run| src.read_with(run, Ok(vec![])));
        let nd = &snapshot(&report).netdevs[0];
        assert_eq!(nd.speed_mbps, None);
        assert_eq!(nd.carrier, None);
        assert_eq!(nd.rx.bytes, None);
        assert_eq!(nd.rx.packets, Some(1000));
        assert_eq!(nd.mtu, None);
        let kinds: Vec<(ErrorKind, Option<i32>)> =
            report.errors.iter().map(|e| (e.kind, e.errno)).collect();
        assert_eq!(
            kinds,
            vec![(ErrorKind::Io, Some(libc::EIO)), (ErrorKind::Parse, None)]
        );
    }

    #[test]
    fn a_netdev_that_vanishes_is_dropped_with_one_error() {
        let dir = tree();
        let class = dir.path().join("class/net");
        let victim = class.join("veth9");
        let fs = FaultFs::new().hook(move |path| {
            // Remove veth9 while ens1f0np0, listed before it, is being read.
            if path == class.join("ens1f0np0/carrier") {
                let _ = std::fs::remove_file(&victim);
            }
        });
        let src = source(dir.path(), Arc::new(fs), Some("."));
        let report = standalone("netdev", |run| src.read_with(run, Ok(vec![])));
        assert_eq!(snapshot(&report).netdevs.len(), 1);
        assert_eq!(report.errors.len(), 1);
        assert_eq!(report.errors[0].kind, ErrorKind::Vanished);
    }

    /// A file system that keeps every file it read successfully, and drops one when a read
    /// of it fails, as the agent's kept-open file system does with a removed netdev's files.
    #[derive(Debug, Default)]
    struct Keeping {
        kept: std::sync::Mutex<std::collections::BTreeSet<PathBuf>>,
    }

    impl Keeping {
        fn kept_under(&self, dir: &Path) -> Vec<PathBuf> {
            let kept = self.kept.lock().unwrap();
            kept.iter()
                .filter(|p| p.starts_with(dir))
                .cloned()
                .collect()
        }
    }

    impl Fs for Keeping {
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            let read = RealFs.read(path);
            let mut kept = self.kept.lock().unwrap();
            match &read {
                Ok(_) => kept.insert(path.to_path_buf()),
                Err(_) => kept.remove(path),
            };
            read
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<crate::fs::DirEntry>> {
            RealFs.read_dir(path)
        }
        fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
            RealFs.read_link(path)
        }
        fn exists(&self, path: &Path) -> bool {
            RealFs.exists(path)
        }
        fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
            RealFs.canonicalize(path)
        }
        fn release(&self, dir: &Path) {
            self.kept.lock().unwrap().retain(|p| !p.starts_with(dir));
        }
    }

    #[test]
    fn the_files_kept_for_a_netdev_that_leaves_are_let_go() {
        let dir = tree();
        let class = dir.path().join("class/net");
        let fs = Arc::new(Keeping::default());
        let src = source(dir.path(), fs.clone(), Some("."));
        // ens1f0np0 over rtnetlink (identity and speed), veth9 from sysfs.
        let link = Link {
            index: 2,
            name: Some("ens1f0np0".into()),
            address: Some("0c:42:a1:78:91:f4".into()),
            ..Link::default()
        };
        let report = standalone("netdev", |run| src.read_with(run, Ok(vec![link.clone()])));
        assert_eq!(snapshot(&report).netdevs.len(), 2);
        assert_eq!(fs.kept_under(&class.join("ens1f0np0")).len(), 3);
        assert_eq!(fs.kept_under(&class.join("veth9")).len(), 5);
        // Both go away (veth9's device directory with its class link).
        std::fs::remove_dir_all(dir.path().join("devices/virtual/net/veth9")).unwrap();
        std::fs::remove_file(class.join("veth9")).unwrap();
        std::fs::remove_file(class.join("ens1f0np0")).unwrap();
        let report = standalone("netdev", |run| src.read_with(run, Ok(vec![link.clone()])));
        assert_eq!(report.errors, vec![]);
        assert!(snapshot(&report).netdevs.is_empty());
        assert_eq!(fs.kept_under(&class), Vec::<PathBuf>::new());
        // Nothing is read for them again.
        let before = fs.kept.lock().unwrap().len();
        standalone("netdev", |run| src.read_with(run, Ok(vec![link])));
        assert_eq!(fs.kept.lock().unwrap().len(), before);
    }

    #[test]
    fn no_class_net_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path(), Arc::new(RealFs), None);
        let report = src.read();
        assert!(report.absent.is_some());
        assert!(report.errors.is_empty());
    }
}
