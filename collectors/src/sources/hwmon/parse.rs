//! Pure parsing of hwmon attributes (`Documentation/hwmon/sysfs-interface.rst`).

use crate::fs::attr::Invalid;

/// The longest sensor name exported; longer labels are cut (label text is the driver's or the
/// firmware's, and a label value must stay bounded).
pub const MAX_SENSOR_NAME: usize = 32;

/// A temperature attribute (`temp<N>_input`, `_highest`, `_crit`): a signed decimal number of
/// millidegrees Celsius, converted to degrees.
pub fn millidegrees(text: &str) -> Result<f64, Invalid> {
    text.trim()
        .parse::<i64>()
        .map(|m| m as f64 / 1000.0)
        .map_err(|_| Invalid::expected("millidegrees Celsius", text))
}

/// Which attribute of which temperature channel a file of a hwmon directory is:
/// `temp2_input` gives (2, `input`). Other files (`name`, `temp2_reset_history`, fans,
/// voltages) give `None`.
pub fn temp_attribute(file: &str) -> Option<(u32, &str)> {
    let rest = file.strip_prefix("temp")?;
    let (index, attr) = rest.split_once('_')?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let channel = index.parse().ok()?;
    matches!(attr, "input" | "highest" | "crit" | "label").then_some((channel, attr))
}

/// A channel's sensor name as a label value: the `temp<N>_label` text lower-cased, every run
/// of characters other than ASCII letters and digits one `_`, no `_` at either end, at most
/// [`MAX_SENSOR_NAME`] characters (`Module 0` → `module_0`, `asic` → `asic`); `temp<N>` when
/// there is no label or nothing is left of it.
pub fn sensor_name(label: Option<&str>, channel: u32) -> String {
    let mut out = String::new();
    for c in label.unwrap_or_default().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    out.truncate(MAX_SENSOR_NAME);
    let name = out.trim_end_matches('_');
    if name.is_empty() {
        format!("temp{channel}")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millidegrees_are_degrees_over_a_thousand() {
        // mlx5 reports multiples of 125 (MTMP counts 0.125 degC).
        assert_eq!(millidegrees("65625"), Ok(65.625));
        assert_eq!(millidegrees("105000"), Ok(105.0));
        assert_eq!(millidegrees("  0 "), Ok(0.0));
        // Below zero is a temperature too (a module in a cold aisle at start-up).
        assert_eq!(millidegrees("-5250"), Ok(-5.25));
    }

    #[test]
    fn malformed_temperatures_are_refused_with_their_text() {
        for text in ["garbage", "", "65.5", "0x10", "65000 mC", "--1"] {
            let err = millidegrees(text).unwrap_err();
            assert!(err.detail.contains("millidegrees"), "{text:?}: {err:?}");
            assert!(
                err.detail.contains(&format!("{text:?}")),
                "{text:?}: {err:?}"
            );
        }
    }

    #[test]
    fn temperature_files_name_their_channel_and_attribute() {
        assert_eq!(temp_attribute("temp1_input"), Some((1, "input")));
        assert_eq!(temp_attribute("temp2_highest"), Some((2, "highest")));
        assert_eq!(temp_attribute("temp12_crit"), Some((12, "crit")));
        assert_eq!(temp_attribute("temp2_label"), Some((2, "label")));
        for other in [
            "name",
            "temp1_reset_history",
            "temp1_max",
            "temp_input",
            "tempx_input",
            "temp+1_input",
            "fan1_input",
            "in0_input",
            "device",
        ] {
            assert_eq!(temp_attribute(other), None, "{other}");
        }
    }

    #[test]
    fn labels_become_bounded_label_values() {
        assert_eq!(sensor_name(Some("asic"), 1), "asic");
        assert_eq!(sensor_name(Some("Module0"), 2), "module0");
        assert_eq!(sensor_name(Some("Module 0"), 2), "module_0");
        assert_eq!(sensor_name(Some("  PHY temp. "), 3), "phy_temp");
        assert_eq!(sensor_name(Some("sensor64"), 2), "sensor64");
        assert_eq!(sensor_name(None, 4), "temp4");
        assert_eq!(sensor_name(Some(" -- "), 5), "temp5");
        let long = sensor_name(Some(&"x".repeat(100)), 1);
        assert_eq!(long.len(), MAX_SENSOR_NAME);
    }
}
