//! The manual's links resolve: every relative link and every `#anchor` in README.md and
//! docs/, and in the other documents that point into them (the runbook, SECURITY.md, the
//! packaging and fixture READMEs), names a file that exists, relative to the linking file,
//! and a heading of that file, slugged the way GitHub slugs headings. Every page of docs/ is
//! linked from somewhere, so none is left behind when the manual is reorganized.
//!
//! Links inside code (fenced blocks and code spans) are not links; links with a scheme
//! (`https:`, `mailto:`) leave the repository and are not checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use railscope_tests::workspace;

/// Every `.md` file under `dir`, recursively, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            // `file_type` does not follow symbolic links.
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The documents whose links are checked, relative to the workspace.
fn documents() -> Vec<PathBuf> {
    let root = workspace();
    let mut out: Vec<PathBuf> = [
        "README.md",
        "alerts/RUNBOOK.md",
        "SECURITY.md",
        "packaging/README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    out.extend(markdown_under(&root.join("docs")));
    // The fixture READMEs: the one over the trees and one in each (the trees themselves are
    // large and full of symbolic links, so they are not walked).
    let fixtures = root.join("tests/fixtures");
    out.push(fixtures.join("README.md"));
    let mut trees: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path().join("README.md"))
        .filter(|p| p.is_file())
        .collect();
    trees.sort();
    out.extend(trees);
    out
}

/// The lines of `text` that are not inside a fenced code block, with their line numbers, and
/// with code spans blanked out.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = marker {
            let run = trimmed.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match fence {
                    None => {
                        fence = Some((c, run));
                        continue;
                    }
                    Some((open, len)) if open == c && run >= len => {
                        fence = None;
                        continue;
                    }
                    Some(_) => {}
                }
            }
        }
        if fence.is_none() {
            out.push((n + 1, without_code_spans(line)));
        }
    }
    out
}

/// `line` with every code span (`` `...` ``, ``` ``...`` ```) replaced by spaces.
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        // The closing run: the next run of exactly as many backticks.
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let r = chars[j..].iter().take_while(|c| **c == '`').count();
                if r == run {
                    close = Some(j + r);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.extend(std::iter::repeat_n(' ', end - i));
                i = end;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The link targets on one line of prose: inline links and images (`[text](target)`,
/// `![alt](target)`) and reference definitions (`[label]: target`).
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some(end) = trimmed.find("]:")
        && !trimmed[..end].contains('(')
        && let Some(t) = trimmed[end + 2..].split_whitespace().next()
    {
        out.push(t.trim_matches(['<', '>']).to_owned());
    }
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        // The target ends at the parenthesis that closes the one after `]`.
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = k;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let inside = after[..end].trim();
        // `(target "title")`: the target is the first word.
        let target = if let Some(t) = inside.strip_prefix('<') {
            t.split('>').next().unwrap_or("")
        } else {
            inside.split_whitespace().next().unwrap_or("")
        };
        out.push(target.to_owned());
        rest = &after[end.min(after.len())..];
    }
    out
}

/// Whether a target leaves the repository (`https://...`, `mailto:...`).
fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !scheme.contains('/')
        }
        None => false,
    }
}

/// A heading's anchor as GitHub makes it: the text as rendered (code spans keep their
/// content, links their text), lower case, every character that is not a letter, a digit,
/// a space, `-` or `_` removed, spaces to `-`.
fn slug(heading: &str) -> String {
    // Links: `[text](url)` renders as `text`.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](") {
            Some(mid) => {
                let close = rest[open + mid..].find(')').map(|c| open + mid + c);
                match close {
                    Some(close) => {
                        text.push_str(&rest[..open]);
                        text.push_str(&rest[open + 1..open + mid]);
                        rest = &rest[close + 1..];
                    }
                    None => break,
                }
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings, duplicates numbered as GitHub numbers them
/// (`name`, `name-1`, `name-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(c) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') {
            let run = trimmed.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match fence {
                    None => fence = Some((c, run)),
                    Some((open, len)) if open == c && run >= len => fence = None,
                    Some(_) => {}
                }
                continue;
            }
        }
        if fence.is_some() || line.starts_with("    ") {
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !trimmed[hashes..].starts_with([' ', '\t']) {
            continue;
        }
        let title = trimmed[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(title);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// `path` with `.` and `..` resolved lexically.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with each link of `doc`, and the files it links to.
fn check(doc: &Path, problems: &mut Vec<String>, linked: &mut BTreeSet<PathBuf>) -> usize {
    let root = workspace();
    let text = std::fs::read_to_string(doc).unwrap();
    let name = doc.strip_prefix(&root).unwrap().display().to_string();
    let mut checked = 0;
    for (n, line) in prose_lines(&text) {
        for target in targets(&line) {
            if target.is_empty() {
                problems.push(format!("{name}:{n}: a link without a target"));
                continue;
            }
            if has_scheme(&target) {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            if path.starts_with('/') {
                problems.push(format!(
                    "{name}:{n}: {target}: an absolute path (links are relative to the file)"
                ));
                continue;
            }
            let file = if path.is_empty() {
                doc.to_path_buf()
            } else {
                normal(&doc.parent().unwrap().join(path))
            };
            if !file.exists() {
                problems.push(format!(
                    "{name}:{n}: {target}: {} does not exist",
                    file.strip_prefix(&root).unwrap_or(&file).display()
                ));
                continue;
            }
            linked.insert(file.clone());
            let Some(anchor) = anchor else { continue };
            if file.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let headings = anchors(&std::fs::read_to_string(&file).unwrap());
            if !headings.contains(anchor) {
                problems.push(format!(
                    "{name}:{n}: {target}: no heading of {} has the anchor #{anchor}",
                    file.strip_prefix(&root).unwrap_or(&file).display()
                ));
            }
        }
    }
    checked
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut problems = Vec::new();
    let mut linked = BTreeSet::new();
    let mut checked = 0;
    for doc in documents() {
        checked += check(&doc, &mut problems, &mut linked);
    }
    assert!(
        problems.is_empty(),
        "{} broken links:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    assert!(
        checked > 100,
        "only {checked} links checked: is the parser blind?"
    );
    let unlinked: Vec<String> = markdown_under(&workspace().join("docs"))
        .into_iter()
        .filter(|p| !linked.contains(p))
        .map(|p| p.strip_prefix(workspace()).unwrap().display().to_string())
        .collect();
    assert!(
        unlinked.is_empty(),
        "pages no document links to: {unlinked:?}"
    );
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("Kernel log (`kmsg` collector)"),
        "kernel-log-kmsg-collector"
    );
    assert_eq!(
        slug("Diagnosing a node: `railscope doctor`"),
        "diagnosing-a-node-railscope-doctor"
    );
    assert_eq!(slug("GPU↔NIC distance"), "gpunic-distance");
    assert_eq!(slug("Whose job is it?"), "whose-job-is-it");
    assert_eq!(
        slug("railscope_gpu_info and [links](x.md)"),
        "railscope_gpu_info-and-links"
    );
    assert_eq!(slug("What it costs, measured"), "what-it-costs-measured");
    let a = anchors("# Labels\n## Labels\n```\n# Labels\n```\n### Labels\n");
    assert_eq!(
        a,
        ["labels", "labels-1", "labels-2"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

#[test]
fn links_in_code_are_not_links() {
    let lines =
        prose_lines("a [x](one.md) `[y](two.md)`\n```\n[z](three.md)\n```\n``b [w](four.md)``\n");
    let found: Vec<String> = lines.iter().flat_map(|(_, l)| targets(l)).collect();
    assert_eq!(found, ["one.md"]);
    assert_eq!(
        targets("see [t](a.md#b \"title\") and ![p](c.png)"),
        ["a.md#b", "c.png"]
    );
    assert!(has_scheme("https://example.org/x"));
    assert!(!has_scheme("docs/a.md#b:c"));
}
