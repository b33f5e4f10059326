//! End-to-end test of the `neighbour` source's LLDP receiver against the real lldpd (Debian's
//! `lldpd` package; missing, it is a failure that names the package).
//!
//! Two network namespaces joined by a veth pair: lldpd runs in the peer's namespace on its end
//! (`-I`, a private control socket, `tx-interval 1`, so its TTL is 4 s), configured with
//! `lldpcli` to call itself `leaf-07` and to send a PFC Configuration TLV (priority 3) and a
//! Maximum Frame Size TLV as custom TLVs (lldpd 1.0.16 never sends the MFS TLV of its own). The
//! agent runs in the other namespace with the veth selected (`device-include`) and a 3 s LLDP
//! timeout; a second veth there hears nothing. The test asserts the neighbour's identity, frame
//! size and PFC; renames the system (the series is replaced, `changes_total` 1); sends a
//! malformed LLDPDU from the peer's namespace with a Python `AF_PACKET` socket (one counted
//! error, the neighbour stays, the agent serves on); stops lldpd, whose shutdown LLDPDU (TTL 0)
//! makes the neighbour go at once (`no_frames`, no info series, TTL 0).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use railscope_tests::netns::Netns;
use railscope_tests::{Agent, Sample, find, parse_samples, promtool_check_metrics, value};

/// The MTU of the veths, and the Maximum Frame Size the peer announces: MTU + Ethernet header
/// (14) + FCS (4).
const MTU: u32 = 9000;
const FRAME: u32 = MTU + 18;

/// lldpd in `ns`, on `ifname`, with its control socket in the namespace's scratch directory;
/// stopped (SIGTERM, so it sends its shutdown LLDPDU) and reaped when dropped.
struct Lldpd {
    child: Child,
    ctl: std::path::PathBuf,
}

impl Lldpd {
    fn start(ns: &Netns, ifname: &str) -> Lldpd {
        Lldpd::start_with(ns, ifname, "lldpd", &[])
    }

    /// lldpd with extra arguments (`-r`: receive only), its control socket named `tag`.
    fn start_with(ns: &Netns, ifname: &str, tag: &str, extra: &[&str]) -> Lldpd {
        // Not `railscope_tests::require`: lldpd has no `--version`, and `lldpd version` would
        // start a daemon (it takes no arguments and ignores them).
        let lldpd = "lldpd";
        let runs = Command::new(lldpd)
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            railscope_tests::missing_tool(lldpd, "the Debian package lldpd");
        }
        let ctl = ns.dir().join(format!("{tag}.ctl"));
        let conf = ns.dir().join("none.conf");
        std::fs::write(&conf, "").unwrap();
        let child = ns
            .command(lldpd)
            .args(["-d", "-k", "-i", "-u"])
            .arg(&ctl)
            .arg("-O")
            .arg(&conf)
            .args(["-I", ifname])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run lldpd ({e}): install the Debian package lldpd"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ctl.exists() {
            assert!(Instant::now() < deadline, "lldpd made no control socket");
            std::thread::sleep(Duration::from_millis(50));
        }
        Lldpd { child, ctl }
    }

    fn cli(&self, ns: &Netns, args: &str) -> String {
        let mut command = vec!["lldpcli", "-u", self.ctl.to_str().unwrap()];
        command.extend(args.split(' '));
        String::from_utf8_lossy(&ns.exec(&command).stdout).into_owned()
    }

    /// Stops lldpd with SIGTERM (its shutdown LLDPDU goes out) and waits for it.
    fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Lldpd {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

/// The MAC address of `ifname` in `ns`.
fn mac(ns: &Netns, ifname: &str) -> String {
    let out = ns.ip(&["-br", "link", "show", ifname]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.split_whitespace().nth(2).unwrap().to_owned()
}

fn scrape(agent: &Agent) -> Vec<Sample> {
    let text = agent.scrape();
    promtool_check_metrics(&text);
    parse_samples(&text)
}

/// Scrapes until `done` holds, for at most `within`; the last scrape.
fn until(
    agent: &Agent,
    within: Duration,
    what: &str,
    done: impl Fn(&[Sample]) -> bool,
) -> Vec<Sample> {
    let deadline = Instant::now() + within;
    loop {
        let s = scrape(agent);
        if done(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {within:?}; last scrape: {:#?}\nagent log: {}",
            find(&s, "railscope_neighbour_info", &[]),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn status(s: &[Sample], netdev: &str) -> Option<String> {
    find(s, "railscope_neighbour_status", &[("netdev", netdev)])
        .iter()
        .find(|x| x.value == 1.0)
        .map(|x| x.labels["status"].clone())
}

/// A malformed LLDPDU (a System Name TLV whose length runs past the end of the frame), sent on
/// `ifname` in `ns` from a Python `AF_PACKET` socket.
fn send_malformed(ns: &Netns, ifname: &str) {
    let program = format!(
        r#"
import socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("{ifname}", 0))
du = bytes.fromhex("0207040242a1000001" "04050573777031" "06020078" "0a40") + b"x"
s.send(bytes.fromhex("0180c200000e0242a100000188cc") + du)
"#
    );
    ns.exec(&["python3", "-c", &program]);
}

#[test]
fn lldpd_on_the_far_end_of_a_veth() {
    let started = Instant::now();
    let peer = Netns::new("lldp-peer");
    let host = Netns::new("lldp-host");
    let (ours, theirs, quiet, quiet_peer) = ("nbh0", "nbp0", "nbh1", "nbp1");
    for (a, b) in [(ours, theirs), (quiet, quiet_peer)] {
        host.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
        host.ip(&["link", "set", b, "netns", peer.name()]);
        host.ip(&["link", "set", a, "mtu", &MTU.to_string(), "up"]);
        peer.ip(&["link", "set", b, "mtu", &MTU.to_string(), "up"]);
    }
    let mut lldpd = Lldpd::start(&peer, theirs);
    lldpd.cli(&peer, "configure system hostname leaf-07");
    lldpd.cli(&peer, "configure lldp tx-interval 1");
    lldpd.cli(
        &peer,
        "configure lldp custom-tlv oui 00,80,c2 subtype 11 oui-info 08,08",
    );
    let [hi, lo] = (FRAME as u16).to_be_bytes();
    lldpd.cli(
        &peer,
        &format!("configure lldp custom-tlv oui 00,12,0f subtype 4 oui-info {hi:02x},{lo:02x}"),
    );
    let agent = Agent::in_netns(
        &host,
        &[
            "--path.sysfs",
            "/sys",
            "--collector.disable-defaults",
            "--collector.neighbour",
            "--collector.netdev",
            "--collector.netdev.device-include",
            &format!("^{ours}$"),
            "--collector.neighbour.device-include",
            &format!("^({ours}|{quiet})$"),
            "--collector.neighbour.lldp-timeout",
            "3s",
        ],
    );
    let peer_mac = mac(&peer, theirs);

    // The neighbour, its frame size and PFC.
    let s = until(&agent, Duration::from_secs(15), "leaf-07 with PFC", |s| {
        !find(
            s,
            "railscope_neighbour_info",
            &[("netdev", ours), ("neighbour", "leaf-07")],
        )
        .is_empty()
            && !find(s, "railscope_neighbour_pfc_enabled", &[("netdev", ours)]).is_empty()
            && !find(
                s,
                "railscope_neighbour_max_frame_size_bytes",
                &[("netdev", ours)],
            )
            .is_empty()
    });
    let info = find(&s, "railscope_neighbour_info", &[("netdev", ours)]);
    assert_eq!(info.len(), 1, "{info:#?}");
    // The receiver joined the LLDP group on the netdev (PACKET_ADD_MEMBERSHIP).
    let maddr = host.ip(&["maddr", "show", "dev", ours]);
    assert!(
        String::from_utf8_lossy(&maddr.stdout).contains("01:80:c2:00:00:0e"),
        "{}",
        String::from_utf8_lossy(&maddr.stdout)
    );
    let l = &info[0].labels;
    assert_eq!(l["protocol"], "lldp");
    assert_eq!((l["device"].as_str(), l["port"].as_str()), ("", ""));
    assert_eq!(l["neighbour_id"], peer_mac);
    assert_eq!(l["neighbour_port"], peer_mac);
    assert_eq!(l["neighbour_port_description"], theirs);
    let ours_l = [("netdev", ours)];
    assert_eq!(
        value(&s, "railscope_neighbour_max_frame_size_bytes", &ours_l),
        f64::from(FRAME)
    );
    assert_eq!(
        value(&s, "railscope_neighbour_max_frame_size_bytes", &ours_l),
        value(&s, "railscope_netdev_mtu_bytes", &ours_l) + 18.0
    );
    let enabled: Vec<String> = find(&s, "railscope_neighbour_pfc_enabled", &ours_l)
        .iter()
        .filter(|x| x.value == 1.0)
        .map(|x| x.labels["priority"].clone())
        .collect();
    assert_eq!(enabled, ["3"]);
    assert_eq!(value(&s, "railscope_neighbour_pfc_willing", &ours_l), 0.0);
    assert_eq!(value(&s, "railscope_neighbour_ttl_seconds", &ours_l), 4.0);
    assert_eq!(status(&s, ours).as_deref(), Some("ok"));
    assert_eq!(value(&s, "railscope_neighbour_changes_total", &ours_l), 0.0);
    let last_seen = value(
        &s,
        "railscope_neighbour_last_seen_timestamp_seconds",
        &ours_l,
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - last_seen).abs() < 30.0,
        "last seen {last_seen}, now {now}"
    );

    // The quiet veth: no_frames once the 3 s timeout passed.
    until(
        &agent,
        Duration::from_secs(10),
        "no_frames on the quiet veth",
        |s| status(s, quiet).as_deref() == Some("no_frames"),
    );

    // A new system name: the series is replaced, one change.
    lldpd.cli(&peer, "configure system hostname leaf-08");
    let s = until(&agent, Duration::from_secs(10), "leaf-08", |s| {
        !find(
            s,
            "railscope_neighbour_info",
            &[("netdev", ours), ("neighbour", "leaf-08")],
        )
        .is_empty()
    });
    assert_eq!(find(&s, "railscope_neighbour_info", &ours_l).len(), 1);
    assert_eq!(value(&s, "railscope_neighbour_changes_total", &ours_l), 1.0);

    // A malformed LLDPDU: a counted error; the neighbour stays; the agent serves on.
    let errors = |s: &[Sample]| {
        value(
            s,
            "railscope_collector_errors_total",
            &[("collector", "neighbour")],
        )
    };
    let before = errors(&s);
    send_malformed(&peer, theirs);
    let s = until(
        &agent,
        Duration::from_secs(10),
        "the malformed LLDPDU counted",
        |s| errors(s) > before,
    );
    assert_eq!(status(&s, ours).as_deref(), Some("ok"));
    assert!(agent.log().contains("malformed LLDPDU"), "{}", agent.log());

    // lldpd stops: its shutdown LLDPDU makes the neighbour go at once.
    lldpd.stop();
    let s = until(&agent, Duration::from_secs(3), "the neighbour gone", |s| {
        status(s, ours).as_deref() == Some("no_frames")
    });
    assert!(find(&s, "railscope_neighbour_info", &ours_l).is_empty());
    assert_eq!(value(&s, "railscope_neighbour_ttl_seconds", &ours_l), 0.0);
    assert!(find(&s, "railscope_neighbour_pfc_enabled", &ours_l).is_empty());
    assert_eq!(value(&s, "railscope_neighbour_changes_total", &ours_l), 1.0);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "took {:?}",
        started.elapsed()
    );
}

/// A veth pair in the test's own network namespace, deleted when dropped.
struct HostVeth(String);

impl Drop for HostVeth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

#[test]
fn without_cap_net_raw_the_status_is_no_permission_said_once() {
    let setpriv = railscope_tests::tool("setpriv");
    let name = format!("rsnb{}", std::process::id() % 100_000);
    let peer = format!("{name}p");
    railscope_tests::netns::ip(&["link", "add", &name, "type", "veth", "peer", "name", &peer]);
    let _veth = HostVeth(name.clone());
    let mut cmd = Command::new(&setpriv);
    cmd.args(["--inh-caps=-net_raw", "--bounding-set=-net_raw", "--"])
        .arg(railscope_tests::binary());
    let include = format!("^{name}$");
    let mut agent = Agent::wrapped(
        cmd,
        &[
            "--collector.disable-defaults",
            "--collector.neighbour",
            "--collector.neighbour.device-include",
            &include,
        ],
        &[],
    );
    agent.wait_ready();
    let s = until(&agent, Duration::from_secs(10), "no_permission", |s| {
        status(s, &name).as_deref() == Some("no_permission")
    });
    // Said once, never an error.
    for _ in 0..3 {
        let _ = scrape(&agent);
    }
    assert_eq!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "neighbour")]
        ),
        0.0
    );
    let log = agent.log();
    assert_eq!(log.matches("no CAP_NET_RAW").count(), 1, "{log}");
}

#[test]
fn with_lldp_lldpd_the_neighbours_of_a_running_lldpd_are_read() {
    let peer = Netns::new("lldpd-peer");
    let host = Netns::new("lldpd-host");
    let (ours, theirs) = ("nbd0", "nbd1");
    host.ip(&["link", "add", ours, "type", "veth", "peer", "name", theirs]);
    host.ip(&["link", "set", theirs, "netns", peer.name()]);
    host.ip(&["link", "set", ours, "up"]);
    peer.ip(&["link", "set", theirs, "up"]);
    let sender = Lldpd::start(&peer, theirs);
    sender.cli(&peer, "configure system hostname leaf-09");
    sender.cli(&peer, "configure lldp tx-interval 1");
    sender.cli(
        &peer,
        "configure lldp custom-tlv oui 00,80,c2 subtype 11 oui-info 08,18",
    );
    let receiver = Lldpd::start_with(&host, ours, "receiver", &["-r"]);
    // Start the agent once the receiving lldpd knows the neighbour (it asks every 10 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    while !receiver
        .cli(&host, "-f json0 show neighbors details")
        .contains("08,18")
    {
        assert!(
            Instant::now() < deadline,
            "the receiving lldpd learned nothing"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let agent = Agent::in_netns(
        &host,
        &[
            "--path.sysfs",
            "/sys",
            "--collector.disable-defaults",
            "--collector.neighbour",
            "--collector.neighbour.device-include",
            &format!("^{ours}$"),
            "--collector.neighbour.lldp",
            "lldpd",
            "--collector.neighbour.lldpd-socket",
            receiver.ctl.to_str().unwrap(),
        ],
    );
    let s = until(&agent, Duration::from_secs(15), "leaf-09 from lldpd", |s| {
        !find(
            s,
            "railscope_neighbour_info",
            &[
                ("netdev", ours),
                ("neighbour", "leaf-09"),
                ("protocol", "lldpd"),
            ],
        )
        .is_empty()
    });
    let l = [("netdev", ours), ("protocol", "lldpd")];
    let enabled: Vec<String> = find(&s, "railscope_neighbour_pfc_enabled", &l)
        .iter()
        .filter(|x| x.value == 1.0)
        .map(|x| x.labels["priority"].clone())
        .collect();
    assert_eq!(enabled, ["3", "4"]);
    assert_eq!(status(&s, ours).as_deref(), Some("ok"));
    assert_eq!(
        find(&s, "railscope_neighbour_info", &[("netdev", ours)])[0].labels["neighbour_id"],
        mac(&peer, theirs)
    );
}
