//! `railscope doctor`'s own settings: the subcommand, its output, and where its facts come
//! from (`--from` a running agent, with that agent's TLS and basic auth). The agent's
//! collection flags apply to doctor too; its serving flags are accepted and hidden.

use std::io::IsTerminal;
use std::time::Duration;

use clap::{ArgMatches, Command};
use serde_json::Value as Json;

use super::error::ConfigError;
use super::value::{File, Rejected, Setting, Value, choice, positive, reject, text_from_file};

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Text,
    Json,
}

/// A running agent to read instead of collecting here, as the flags give it; doctor checks
/// and loads it when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct From {
    pub(crate) url: String,
    pub(crate) ca_file: Option<String>,
    pub(crate) cert_file: Option<String>,
    pub(crate) key_file: Option<String>,
    pub(crate) username: Option<String>,
    pub(crate) password_file: Option<String>,
    pub(crate) timeout: Duration,
}

/// Doctor's own flags.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) output: Output,
    pub(crate) color: bool,
    pub(crate) from: Option<From>,
}

/// The subcommand's name.
pub(crate) const NAME: &str = "doctor";

const ABOUT: &str = "Diagnose this node once, hardware first, the way an expert works through a node whose NCCL bandwidth is low, and print the NCCL settings that fit it.";

const LONG_ABOUT: &str = "\
Diagnose this node once, hardware first, and print the NCCL settings that fit it.

Steps, in order: devices and ports present and up; link rate and width against the ports'
peers; PCIe links of NICs and GPUs; the MTU end to end (a RoCE netdev at 1500 gives an active
MTU of 1024); RoCE v2 GIDs and the index NCCL must use; PFC and ECN; GPUDirect RDMA
(nvidia_peermem or dma-buf, IOMMU passthrough, ACS, memlock); GPU↔NIC distance; NVLink; GPU
health (XIDs, ECC, row remapping, throttling); the kernel log. Each finding has a severity
(ok, warning, critical), its evidence (device, port, value, and the file or call it came
from), what it means, the fix, and the RUNBOOK entry of the alert that watches it: the
checks are the alerts' conditions, read once.

NCCL hints: NCCL_IB_HCA (the ACTIVE ports on the GPUs' rails, in rail order),
NCCL_SOCKET_IFNAME (the front-end NICs' netdevs), NCCL_IB_GID_INDEX (the RoCE v2 GID of the
ports' IPv4 address) and NCCL_NET_GDR_LEVEL (from the GPU↔NIC distances). NCCL_* variables
in doctor's environment that contradict the node are findings.

Input: without --from, doctor runs the agent's sources once, with the same flags as the
agent (--path.sysfs, --collector.*, --config.file); run it as the agent's user or root.
With --from URL it reads a running agent's metrics instead (the same checks, the same
findings; the NCCL environment is not compared, since it is not the node's).

Exit status: 0 all well, 1 warnings, 2 critical findings, 3 the diagnosis could not run.";

const EXAMPLES: &str = "\
Examples:
  railscope doctor
      Diagnose this node with the agent's default sources.
  railscope doctor --config.file /etc/railscope/railscope.yml --output json
      The same with the agent's config (its expected inventory included), for a tool.
  railscope doctor --from https://gpu-17:9477/metrics --from.ca-file ca.pem \\
      --from.username oncall --from.password-file ~/.railscope-password
      Diagnose gpu-17 from its running agent, behind TLS and basic auth.
  railscope doctor >/dev/null; [ $? -lt 2 ] || exit 1
      A job prologue that refuses a node with a critical finding (or that could not
      be diagnosed), and accepts one with warnings.

Exit status: 0 all well, 1 warnings, 2 critical findings, 3 the diagnosis could not run.";

/// The `doctor` subcommand: `agent` is a command holding the agent's flags, whose serving
/// flags are hidden here; doctor's own are added.
pub(crate) fn command(agent: Command, serving: &[&str]) -> Command {
    let mut cmd = agent;
    for id in serving {
        cmd = cmd.mut_arg(*id, |a| a.hide(true));
    }
    cmd.name(NAME)
        .bin_name("railscope doctor")
        .about(ABOUT)
        .long_about(LONG_ABOUT)
        .after_help("Exit status: 0 all well, 1 warnings, 2 critical findings, 3 the diagnosis could not run.")
        .after_long_help(EXAMPLES)
        .arg(OUTPUT.arg().value_name("FORMAT"))
        .arg(COLOR.arg().value_name("WHEN"))
        .arg(FROM.arg().value_name("URL"))
        .arg(FROM_CA_FILE.arg().value_name("PATH"))
        .arg(FROM_CERT_FILE.arg().value_name("PATH"))
        .arg(FROM_KEY_FILE.arg().value_name("PATH"))
        .arg(FROM_USERNAME.arg().value_name("NAME"))
        .arg(FROM_PASSWORD_FILE.arg().value_name("PATH"))
        .arg(FROM_TIMEOUT.arg().value_name("DURATION"))
}

/// When to colour the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

impl Value for Output {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        choice(text, &[("text", Output::Text), ("json", Output::Json)])
            .map_err(|_| reject(format!("{text:?}: expected text or json")))
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        text_from_file(value)
    }
}

impl Value for Color {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        choice(
            text,
            &[
                ("auto", Color::Auto),
                ("always", Color::Always),
                ("never", Color::Never),
            ],
        )
        .map_err(|_| reject(format!("{text:?}: expected auto, always or never")))
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        text_from_file(value)
    }
}

const OUTPUT: Setting<Output> = Setting::new(
    "output",
    "",
    "text (grouped by step, colour on a terminal) or json (for tools)",
    "expected text or json",
)
.default("text");
const COLOR: Setting<Color> = Setting::new(
    "color",
    "",
    "auto (on a terminal, unless NO_COLOR is set), always, never",
    "expected auto, always or never",
)
.default("auto");
const FROM: Setting<String> = Setting::new(
    "from",
    "",
    "Diagnose from a running agent's metrics (http:// or https://, path defaults to /metrics) instead of collecting here",
    "expected a URL",
);
const FROM_CA_FILE: Setting<String> = Setting::new(
    "from.ca-file",
    "",
    "CA certificates (PEM) that signed the agent's certificate; required for https://",
    "expected a path",
);
const FROM_CERT_FILE: Setting<String> = Setting::new(
    "from.cert-file",
    "",
    "Client certificate (PEM) for an agent that asks for one",
    "expected a path",
);
const FROM_KEY_FILE: Setting<String> = Setting::new(
    "from.key-file",
    "",
    "Private key (PEM) of --from.cert-file",
    "expected a path",
);
const FROM_USERNAME: Setting<String> = Setting::new(
    "from.username",
    "",
    "Basic-auth user for the agent's web config",
    "expected a name",
);
const FROM_PASSWORD_FILE: Setting<String> = Setting::new(
    "from.password-file",
    "",
    "File holding the basic-auth password (its first line)",
    "expected a path",
);
const FROM_TIMEOUT: Setting<Duration> = Setting::new(
    "from.timeout",
    "",
    "How long to wait for the agent's answer",
    "expected a positive duration such as 30s",
)
.default("30s")
.check(positive);

/// Doctor's flags from the parsed subcommand; an invalid one is named.
pub(crate) fn options(m: &ArgMatches) -> Result<Options, ConfigError> {
    // Doctor's flags have no config-file keys.
    let file = &mut File::default();
    let output = OUTPUT.get(m, file)?;
    let color = match COLOR.get(m, file)? {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let timeout = FROM_TIMEOUT.get(m, file)?;
    let ca_file = FROM_CA_FILE.get_opt(m, file)?;
    let cert_file = FROM_CERT_FILE.get_opt(m, file)?;
    let key_file = FROM_KEY_FILE.get_opt(m, file)?;
    let username = FROM_USERNAME.get_opt(m, file)?;
    let password_file = FROM_PASSWORD_FILE.get_opt(m, file)?;
    let from = match FROM.get_opt(m, file)? {
        None => {
            let needs_from = [
                (&FROM_CA_FILE, ca_file.is_some()),
                (&FROM_CERT_FILE, cert_file.is_some()),
                (&FROM_KEY_FILE, key_file.is_some()),
                (&FROM_USERNAME, username.is_some()),
                (&FROM_PASSWORD_FILE, password_file.is_some()),
            ];
            if let Some((setting, _)) = needs_from.iter().find(|(_, given)| *given) {
                return Err(ConfigError::new(setting.field(), "needs --from"));
            }
            None
        }
        Some(url) => Some(From {
            url,
            ca_file,
            cert_file,
            key_file,
            username,
            password_file,
            timeout,
        }),
    };
    Ok(Options {
        output,
        color,
        from,
    })
}
