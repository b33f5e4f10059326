//! What the node must have: the config file's `expected` section (no flags: it describes
//! a kind of node, which belongs in a file). The inventory maps it to series next to what
//! was found; doctor checks it.

use clap::ArgMatches;

use super::error::ConfigError;
use super::value::{File, Setting};

const ABOVE_ZERO: &str = "expected a whole number above 0 (leave the key out to check nothing)";

const fn count(key: &'static str) -> Setting<u64> {
    Setting::new("", key, "", ABOVE_ZERO).check(|n| *n > 0)
}

const GPUS: Setting<u64> = count("expected.gpus");
const RDMA_PORTS: Setting<u64> = count("expected.rdma-ports");
const RDMA_PORT_RATE_GBPS: Setting<f64> = Setting::new(
    "",
    "expected.rdma-port-rate-gbps",
    "",
    "expected a rate in Gb/s above 0, such as 400",
)
.check(|r| r.is_finite() && *r > 0.0);
const RDMA_PORT_WIDTH: Setting<u64> = count("expected.rdma-port-width");
const NVLINKS_PER_GPU: Setting<u64> = count("expected.nvlinks-per-gpu");
const PCIE_GENERATION: Setting<u64> = Setting::new(
    "",
    "expected.pcie-generation",
    "",
    "expected a PCIe generation from 1 to 6",
);
const PCIE_WIDTH: Setting<u64> = count("expected.pcie-width");

/// What a node must have. Every field is optional; an empty inventory exports nothing.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Inventory {
    pub(crate) gpus: Option<u64>,
    pub(crate) rdma_ports: Option<u64>,
    /// Bytes per second (the config gives Gb/s).
    pub(crate) rdma_port_rate: Option<f64>,
    pub(crate) rdma_port_width: Option<u64>,
    pub(crate) nvlinks_per_gpu: Option<u64>,
    /// Transfers per second of the generation's link speed.
    pub(crate) pcie_speed: Option<f64>,
    pub(crate) pcie_width: Option<u64>,
}

/// A PCIe generation's link speed in transfers per second.
fn generation_speed(generation: u64) -> Option<f64> {
    Some(match generation {
        1 => 2.5e9,
        2 => 5e9,
        3 => 8e9,
        4 => 16e9,
        5 => 32e9,
        6 => 64e9,
        _ => return None,
    })
}

/// The `expected` section; a bad value names its key.
pub(crate) fn from_matches(
    matches: &ArgMatches,
    file: &mut File,
) -> Result<Inventory, ConfigError> {
    let pcie_speed = match PCIE_GENERATION.get_opt(matches, file)? {
        None => None,
        Some(g) => Some(generation_speed(g).ok_or_else(|| {
            ConfigError::new(
                PCIE_GENERATION.field(),
                format!("{g}: expected a PCIe generation from 1 to 6"),
            )
        })?),
    };
    Ok(Inventory {
        gpus: GPUS.get_opt(matches, file)?,
        rdma_ports: RDMA_PORTS.get_opt(matches, file)?,
        rdma_port_rate: RDMA_PORT_RATE_GBPS
            .get_opt(matches, file)?
            .map(|g| g * 1e9 / 8.0),
        rdma_port_width: RDMA_PORT_WIDTH.get_opt(matches, file)?,
        nvlinks_per_gpu: NVLINKS_PER_GPU.get_opt(matches, file)?,
        pcie_speed,
        pcie_width: PCIE_WIDTH.get_opt(matches, file)?,
    })
}
