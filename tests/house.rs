//! The house rules of the code, checked (issue 18): every relative link in every Markdown
//! file of the repository resolves (a file that exists; a `#section` one of its headings), no
//! source file is over 1,500 lines, and no library function is over 80 lines.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const MAX_FILE_LINES: usize = 1_500;
const MAX_FN_LINES: usize = 80;

/// The repository's files (what git tracks, or would: the untracked ones that are not ignored),
/// but for the crate it vendors (`vendor/yrs`, upstream's code with a fix: vendor/README.md).
fn files() -> Vec<PathBuf> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(ROOT)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("vendor/yrs/"))
        .map(|l| Path::new(ROOT).join(l))
        .filter(|p| p.is_file())
        .collect()
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    let text = heading.trim().trim_start_matches('#').trim();
    let mut out = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            out.extend(c.to_lowercase());
        } else if c == ' ' {
            out.push('-');
        }
    }
    out
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line));
        }
    }
    out
}

/// The targets of the `[text](target)` links of a Markdown text, outside code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans are not links.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_markdown_link_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for md in files().into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")) {
        let text = std::fs::read_to_string(&md).expect("markdown is text");
        for target in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() { md.clone() } else { md.parent().unwrap().join(path) };
            let rel = md.strip_prefix(ROOT).unwrap_or(&md).display().to_string();
            if !file.exists() {
                broken.push(format!("{rel}: ({target}): no such file"));
                continue;
            }
            if let Some(anchor) = anchor.filter(|_| file.extension().is_some_and(|e| e == "md")) {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&text).contains(anchor) {
                    broken.push(format!("{rel}: ({target}): no heading #{anchor}"));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} links found: the scan is broken");
    assert!(broken.is_empty(), "{} broken links:\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn no_source_file_is_over_1500_lines() {
    let long: Vec<String> = files()
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "rs" || e == "ts" || e == "tsx" || e == "mjs")
        })
        .filter_map(|p| {
            let n = std::fs::read_to_string(&p).ok()?.lines().count();
            let rel = p.strip_prefix(ROOT).ok()?.display().to_string();
            (n > MAX_FILE_LINES).then(|| format!("{rel}: {n} lines"))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_FILE_LINES} lines:\n{}", long.join("\n"));
}

/// The functions of a rustfmt-formatted file, as (name, first line, lines), up to its tests.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            break; // the test module is at the end
        }
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let head = t
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .trim_start_matches("const ")
            .trim_start_matches("async ");
        let Some(name) = head.strip_prefix("fn ") else { continue };
        let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // A declaration without a body (a trait's) ends with `;` before any `{`.
        let opens = lines[i..].iter().position(|l| l.contains('{') || l.trim_end().ends_with(';'));
        if opens.is_none_or(|k| !lines[i + k].contains('{')) {
            continue;
        }
        // One line (`fn f() -> u64 { 1 }`), or up to the brace at the fn's own indent.
        if line.trim_end().ends_with('}') && line.contains('{') {
            out.push((name, i + 1, 1));
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        if let Some(k) = lines[i..].iter().position(|l| *l == close) {
            out.push((name, i + 1, k + 1));
        }
    }
    out
}

#[test]
fn no_library_function_is_over_80_lines() {
    let library = Path::new(ROOT).join("src");
    let tests = library.join("room/tests");
    let mut long = Vec::new();
    let mut seen = 0;
    for p in files() {
        if !p.starts_with(&library)
            || p.starts_with(&tests)
            || p.extension().is_none_or(|e| e != "rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("source is text");
        for (name, line, n) in functions(&text) {
            seen += 1;
            if n > MAX_FN_LINES {
                let rel = p.strip_prefix(ROOT).unwrap().display();
                long.push(format!("{rel}:{line} fn {name}: {n} lines"));
            }
        }
    }
    assert!(seen > 300, "only {seen} functions found: the scan is broken");
    assert!(long.is_empty(), "library functions over {MAX_FN_LINES} lines:\n{}", long.join("\n"));
}
