//! The report as text (grouped by step, colour on a terminal) or JSON.

use std::fmt::Write as _;

use serde_json::json;

use super::Report;
use super::checks::Severity;

/// The RUNBOOK anchor of an alert: its name in lower case.
pub(crate) fn runbook(alert: &str) -> String {
    format!("RUNBOOK.md#{}", alert.to_ascii_lowercase())
}

fn paint(color: bool, severity: Severity, text: &str) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match severity {
        Severity::Critical => "1;31",
        Severity::Warning => "1;33",
        Severity::Ok => "32",
        Severity::Skip => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

fn tally(report: &Report) -> [(Severity, usize); 4] {
    let mut counts = [
        (Severity::Critical, 0),
        (Severity::Warning, 0),
        (Severity::Ok, 0),
        (Severity::Skip, 0),
    ];
    for f in report.steps.iter().flat_map(|s| &s.findings) {
        for (s, n) in counts.iter_mut() {
            if *s == f.severity {
                *n += 1;
            }
        }
    }
    counts
}

/// The text report.
pub(crate) fn text(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "railscope doctor: {}", report.source);
    for (n, step) in report.steps.iter().enumerate() {
        let worst = step
            .findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Skip);
        let _ = writeln!(
            out,
            "\n{} {}. {}",
            paint(color, worst, &format!("[{:<8}]", worst.as_str())),
            n + 1,
            step.title
        );
        for f in &step.findings {
            let _ = writeln!(
                out,
                "  {} {}",
                paint(color, f.severity, &format!("{:<8}", f.severity.as_str())),
                f.summary
            );
            if f.severity <= Severity::Ok {
                for e in &f.evidence {
                    let _ = writeln!(out, "           {}: {}", e.what, e.value);
                }
                continue;
            }
            for e in &f.evidence {
                let _ = writeln!(out, "           {}: {}  [{}]", e.what, e.value, e.source);
            }
            if !f.meaning.is_empty() {
                let _ = writeln!(out, "           means: {}", f.meaning);
            }
            if !f.fix.is_empty() {
                let _ = writeln!(out, "           fix:   {}", f.fix);
            }
            if let Some(alert) = f.alert {
                let _ = writeln!(out, "           see:   {} ({alert})", runbook(alert));
            }
        }
    }
    let _ = writeln!(out, "\nNCCL settings for this node:");
    if report.hints.settings.is_empty() {
        let _ = writeln!(out, "  (none: no ACTIVE RDMA port to derive them from)");
    }
    for (name, value, why) in &report.hints.settings {
        let _ = writeln!(out, "  export {name}={value}");
        let _ = writeln!(out, "      # {why}");
    }
    let counts = tally(report);
    let code = report.exit_code();
    let _ = writeln!(
        out,
        "\n{}: {} critical, {} warning, {} ok, {} skipped; exit status {code}",
        paint(color, report.worst(), "summary"),
        counts[0].1,
        counts[1].1,
        counts[2].1,
        counts[3].1
    );
    out
}

/// The JSON report: one object, stable keys.
pub(crate) fn json(report: &Report) -> String {
    let steps: Vec<_> = report
        .steps
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "title": s.title,
                "severity": s.findings.iter().map(|f| f.severity).max().unwrap_or(Severity::Skip).as_str(),
                "findings": s.findings.iter().map(|f| json!({
                    "severity": f.severity.as_str(),
                    "check": f.check,
                    "subject": f.subject,
                    "summary": f.summary,
                    "evidence": f.evidence.iter().map(|e| json!({
                        "what": e.what,
                        "value": e.value,
                        "source": e.source,
                    })).collect::<Vec<_>>(),
                    "meaning": f.meaning,
                    "fix": f.fix,
                    "alert": f.alert,
                    "runbook": f.alert.map(runbook),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let counts = tally(report);
    let value = json!({
        "source": report.source,
        "exit_code": report.exit_code(),
        "summary": {
            "critical": counts[0].1,
            "warning": counts[1].1,
            "ok": counts[2].1,
            "skip": counts[3].1,
        },
        "steps": steps,
        "nccl": report.hints.settings.iter().map(|(n, v, why)| json!({
            "name": n,
            "value": v,
            "why": why,
        })).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}
