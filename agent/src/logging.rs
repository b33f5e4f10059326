//! Log output: logfmt (`ts=... level=warn msg="..." key=value`, like Prometheus exporters) or
//! JSON, on standard error.

use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::cli::log::{LogFormat, LogLevel};

/// Installs the global logger. Calling it twice is harmless (the second call is ignored).
pub(crate) fn init(level: LogLevel, format: LogFormat) {
    let max = match level {
        LogLevel::Debug => Level::DEBUG,
        LogLevel::Info => Level::INFO,
        LogLevel::Warn => Level::WARN,
        LogLevel::Error => Level::ERROR,
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(max)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Logfmt => builder.event_format(Logfmt).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

/// The logfmt event format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Logfmt;

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = String::with_capacity(160);
        let _ = write!(
            line,
            "ts={} level={}",
            rfc3339_now(),
            event.metadata().level().as_str().to_ascii_lowercase()
        );
        let mut visitor = LogfmtVisitor {
            message: None,
            fields: String::new(),
        };
        event.record(&mut visitor);
        if let Some(message) = visitor.message {
            line.push_str(" msg=");
            quote(&mut line, &message);
        }
        line.push_str(&visitor.fields);
        writeln!(writer, "{line}")
    }
}

struct LogfmtVisitor {
    message: Option<String>,
    fields: String,
}

impl Visit for LogfmtVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_owned());
        } else {
            self.fields.push(' ');
            self.fields.push_str(field.name());
            self.fields.push('=');
            quote(&mut self.fields, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }
}

/// Writes `value` bare when it is a plain token, quoted and escaped otherwise.
fn quote(out: &mut String, value: &str) {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '=' && c != '\\');
    if plain {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The current UTC time as `2026-11-29T10:51:17.123Z`.
fn rfc3339_now() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(now.as_secs() as i64, now.subsec_millis())
}

fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_035_877, 42), "2026-11-30T10:51:17.042Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn quoting() {
        let mut out = String::new();
        for v in [
            "mlx5_0",
            "",
            "a b",
            "x=\"y\"",
            "/sys/class/infiniband/mlx5_0/ports/1/rate",
        ] {
            quote(&mut out, v);
            out.push('|');
        }
        assert_eq!(
            out,
            "mlx5_0|\"\"|\"a b\"|\"x=\\\"y\\\"\"|/sys/class/infiniband/mlx5_0/ports/1/rate|"
        );
    }
}
