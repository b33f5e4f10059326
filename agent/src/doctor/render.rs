//! The report as text (grouped by step, colour on a terminal) or JSON.

use std::fmt::Write as _;

use serde_json::json;

use super::Report;
use super::checks::{Severity, Table};

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
        if let Some(table) = step.table.as_ref().filter(|t| !t.rows.is_empty()) {
            out.push('\n');
            write_table(&mut out, table);
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

/// `table` with its columns padded to their widest cell, indented under the findings; an
/// empty cell prints as `-`.
fn write_table(out: &mut String, table: &Table) {
    let cell = |c: &str| {
        if c.is_empty() {
            "-".to_owned()
        } else {
            c.to_owned()
        }
    };
    let mut widths: Vec<usize> = table
        .columns
        .iter()
        .map(|(_, title)| title.chars().count())
        .collect();
    for row in &table.rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell(c).chars().count());
        }
    }
    let line = |out: &mut String, cells: Vec<String>| {
        let mut text = String::from("  ");
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(c);
            } else {
                text.push_str(c);
                text.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(
        out,
        table.columns.iter().map(|(_, t)| (*t).to_owned()).collect(),
    );
    for row in &table.rows {
        line(out, row.iter().map(|c| cell(c)).collect());
    }
}

/// A table as JSON: one object per row, keyed by the columns' keys.
fn table_json(table: &Table) -> serde_json::Value {
    json!({
        "columns": table.columns.iter().map(|(k, t)| json!({"key": k, "title": t})).collect::<Vec<_>>(),
        "rows": table.rows.iter().map(|row| {
            table
                .columns
                .iter()
                .zip(row)
                .map(|((k, _), c)| ((*k).to_owned(), json!(c)))
                .collect::<serde_json::Map<_, _>>()
        }).collect::<Vec<_>>(),
    })
}

/// The JSON report: one object, stable keys.
pub(crate) fn json(report: &Report) -> String {
    let steps: Vec<_> = report
        .steps
        .iter()
        .map(|s| {
            let mut step = json!({
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
            });
            if let (Some(table), Some(object)) = (&s.table, step.as_object_mut()) {
                object.insert("table".to_owned(), table_json(table));
            }
            step
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
