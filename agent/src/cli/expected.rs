//! What the node must have: the config file's `expected` section (no flags: it describes
//! a kind of node, which belongs in a file). The inventory maps it to series next to what
//! was found; doctor checks it.

use clap::ArgMatches;
use serde_json::Value as Json;

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
    /// Per rail, the regular expression its ports' neighbour (the switch's LLDP System Name
    /// or IB NodeDescription) must match, in rail order; each compiles (checked at start-up).
    pub(crate) rail_neighbours: Vec<(u32, String)>,
}

/// The config file's key of the expected neighbour per rail.
pub(crate) const RAIL_NEIGHBOURS: &str = "expected.rail-neighbours";

/// `expected.rail-neighbours`: a map from rail number to a regular expression the neighbour
/// of that rail's ports must match (`{"0": "^leaf-0[1-4]", "3": "^leaf-a3-"}`). A key that is
/// not a rail number, a value that is not text or does not compile, is an error naming it.
fn rail_neighbours(value: Option<Json>) -> Result<Vec<(u32, String)>, ConfigError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Json::Object(map) = value else {
        return Err(ConfigError::new(
            RAIL_NEIGHBOURS,
            "expected a map from rail number to a regular expression, such as {\"0\": \"^leaf-0[1-4]-\"}",
        ));
    };
    let mut out = Vec::new();
    for (rail, pattern) in map {
        let field = format!("{RAIL_NEIGHBOURS}.{rail}");
        let number = rail.trim().parse::<u32>().map_err(|_| {
            ConfigError::new(
                &field,
                format!("{rail:?} is not a rail number (the rail label of railscope_rail_info: 0, 1, ...)"),
            )
        })?;
        let Json::String(pattern) = pattern else {
            return Err(ConfigError::new(
                &field,
                "expected a regular expression in quotes",
            ));
        };
        if pattern.is_empty() {
            return Err(ConfigError::new(
                &field,
                "expected a regular expression (leave the rail out to check nothing)",
            ));
        }
        regex::Regex::new(&pattern).map_err(|e| {
            ConfigError::new(
                &field,
                format!("{pattern:?}: not a regular expression: {e}"),
            )
        })?;
        if out.iter().any(|(r, _)| *r == number) {
            return Err(ConfigError::new(
                &field,
                format!("rail {number} is given twice"),
            ));
        }
        out.push((number, pattern));
    }
    out.sort();
    Ok(out)
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
        rail_neighbours: rail_neighbours(file.take(RAIL_NEIGHBOURS))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `expected` section of `yaml` as the agent reads its config file.
    fn inventory(yaml: &str) -> Result<Inventory, ConfigError> {
        let root = match serde_saphyr::from_str::<Json>(yaml) {
            Ok(Json::Object(root)) => root,
            other => panic!("{yaml}: {other:?}"),
        };
        let mut file = File::new(root);
        let matches = clap::Command::new("railscope").get_matches_from(["railscope"]);
        let inventory = from_matches(&matches, &mut file)?;
        file.finish()?;
        Ok(inventory)
    }

    #[test]
    fn rail_neighbours_take_rail_numbers_as_yaml_writes_them() {
        let got = inventory(
            "expected:\n  rail-neighbours:\n    3: \"^leaf-a3-\"\n    \"0\": \"^leaf-0[1-4]\"\n",
        )
        .unwrap();
        assert_eq!(
            got.rail_neighbours,
            [(0, "^leaf-0[1-4]".to_owned()), (3, "^leaf-a3-".to_owned())]
        );
        assert_eq!(
            inventory("expected:\n  gpus: 8\n").unwrap().rail_neighbours,
            []
        );
    }

    #[test]
    fn bad_rail_neighbours_name_the_field() {
        for (yaml, field, reason) in [
            (
                "expected:\n  rail-neighbours: \"^leaf\"\n",
                "expected.rail-neighbours",
                "expected a map from rail number",
            ),
            (
                "expected:\n  rail-neighbours:\n    rail0: \"^leaf\"\n",
                "expected.rail-neighbours.rail0",
                "is not a rail number",
            ),
            (
                "expected:\n  rail-neighbours:\n    1: \"^leaf-(\"\n",
                "expected.rail-neighbours.1",
                "not a regular expression",
            ),
            (
                "expected:\n  rail-neighbours:\n    1: 7\n",
                "expected.rail-neighbours.1",
                "expected a regular expression in quotes",
            ),
            (
                "expected:\n  rail-neighbours:\n    1: \"\"\n",
                "expected.rail-neighbours.1",
                "leave the rail out",
            ),
            (
                "expected:\n  rail-neighbours:\n    \"01\": \"^a\"\n    1: \"^b\"\n",
                "expected.rail-neighbours.",
                "rail 1 is given twice",
            ),
        ] {
            let err = inventory(yaml).unwrap_err().to_string();
            assert!(err.contains(field) && err.contains(reason), "{yaml}: {err}");
        }
    }
}
