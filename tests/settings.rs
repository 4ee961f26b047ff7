//! Every setting is declared once (`src/settings.rs`, `src/room/config.rs`); this holds what
//! is written elsewhere to that declaration: the README's tables of variables and secrets, the
//! client's `DEFAULT_LIMITS` (what it assumes before a welcome, and what its test fake
//! enforces) and the fake's unannounced limits. A row, a default or a meaning that drifts
//! fails here, naming the setting.

use std::collections::BTreeMap;
use std::path::Path;

use homeroom::room::{Limits, RoomConfig, ROOM_VARIABLES};
use homeroom::settings::{self, Shown};

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the first Markdown table after the line starting with `intro`: each row's
/// cells, and one row per name where the first cell lists several (`A`, `B`).
fn table_after(markdown: &str, intro: &str) -> Vec<Vec<String>> {
    let mut lines = markdown.lines().skip_while(|l| !l.starts_with(intro));
    assert!(lines.next().is_some(), "README: no line starting {intro:?}");
    let rows: Vec<Vec<String>> = lines
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|l| {
            let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
            split_cells(inner)
        })
        .collect();
    assert!(!rows.is_empty(), "README: no table after {intro:?}");
    rows
}

/// Splits a row on `|`, except an escaped `\|` or one inside backticks.
fn split_cells(row: &str) -> Vec<String> {
    let (mut cells, mut cell, mut code, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in row.chars() {
        match c {
            '|' if !code && !escaped => cells.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => {
                if c == '`' {
                    code = !code;
                }
                cell.push(c);
            }
        }
        escaped = c == '\\';
    }
    cells.push(cell.trim().to_owned());
    cells
}

fn names(cell: &str) -> Vec<String> {
    cell.split(',').map(|n| n.trim().trim_matches('`').to_owned()).collect()
}

fn shown(default: &Shown) -> String {
    match default {
        Shown::Number(n) => n.to_string(),
        Shown::Text(t) => (*t).to_owned(),
    }
}

#[test]
fn the_readme_table_of_variables_is_the_declaration() {
    let readme = read("README.md");
    let mut written = BTreeMap::new();
    for row in table_after(&readme, "Variables (`[vars]`") {
        assert_eq!(row.len(), 3, "a variables row has three cells: {row:?}");
        for name in names(&row[0]) {
            let again = written.insert(name.clone(), (row[1].clone(), row[2].clone()));
            assert!(again.is_none(), "README: {name} has two rows");
        }
    }
    let mut declared = BTreeMap::new();
    for v in settings::variables() {
        let again = declared.insert(v.name.to_owned(), (shown(&v.default), v.meaning.to_owned()));
        assert!(again.is_none(), "{} is declared twice", v.name);
    }
    for (name, (default, meaning)) in &declared {
        let Some((readme_default, readme_meaning)) = written.get(name) else {
            panic!("README: no row for {name} (declared: default {default}, {meaning:?})");
        };
        assert_eq!(readme_default, default, "README: {name}'s default");
        assert_eq!(readme_meaning, meaning, "README: {name}'s meaning");
    }
    let undeclared: Vec<_> = written.keys().filter(|n| !declared.contains_key(*n)).collect();
    assert!(undeclared.is_empty(), "README rows no code reads: {undeclared:?}");
}

#[test]
fn the_readme_table_of_secrets_is_the_declaration() {
    let readme = read("README.md");
    let written: Vec<String> = table_after(&readme, "Secrets (`wrangler secret put")
        .iter()
        .flat_map(|row| names(&row[0]))
        .collect();
    assert_eq!(written, settings::SECRETS);
}

#[test]
fn every_room_variable_sets_its_field() {
    let default = format!("{:?}", RoomConfig::default());
    for v in ROOM_VARIABLES {
        let (config, problems) = RoomConfig::from_vars(|n| (n == v.name).then(|| "7".into()));
        assert!(problems.is_empty(), "{}=7: {problems:?}", v.name);
        // `finish` may raise a value again (a log below the replay limit), but never all of it.
        assert_ne!(format!("{config:?}"), default, "{}=7 changed nothing", v.name);
        let (_, problems) = RoomConfig::from_vars(|n| (n == v.name).then(|| "many".into()));
        assert_eq!(problems.len(), 1, "{}=many is reported", v.name);
        assert!(problems[0].starts_with(v.name), "{problems:?}");
    }
}

/// `name: 123,` lines of the object literal after `intro` in a TypeScript file.
fn numbers_after(ts: &str, intro: &str) -> BTreeMap<String, u64> {
    let lines = ts.lines().skip_while(|l| !l.contains(intro)).skip(1);
    let mut out = BTreeMap::new();
    for line in lines.take_while(|l| !l.trim_start().starts_with('}')) {
        let (key, value) = line.trim().trim_end_matches(',').split_once(':').expect(line);
        let value = value.trim().replace('_', "");
        out.insert(key.trim().to_owned(), value.parse().unwrap_or_else(|_| panic!("{line}")));
    }
    out
}

#[test]
fn the_clients_defaults_are_the_welcomes_limits() {
    let limits = serde_json::to_value(Limits::of(&RoomConfig::default())).unwrap();
    let server: BTreeMap<String, u64> =
        limits.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    let client = numbers_after(&read("client/src/protocol.ts"), "DEFAULT_LIMITS");
    assert_eq!(client, server, "client/src/protocol.ts DEFAULT_LIMITS");
    // The client's interface names every field, so the fake announces each one.
    let ts = read("client/src/protocol.ts");
    let interface: Vec<&str> = ts
        .lines()
        .skip_while(|l| !l.starts_with("export interface Limits"))
        .skip(1)
        .take_while(|l| !l.starts_with('}'))
        .filter_map(|l| l.trim().strip_suffix(": number;"))
        .collect();
    let mut interface = interface.into_iter().map(str::to_owned).collect::<Vec<_>>();
    interface.sort();
    assert_eq!(interface, server.keys().cloned().collect::<Vec<_>>(), "interface Limits");
}

#[test]
fn the_client_fake_enforces_the_rooms_limits() {
    let fake = read("client/test/fakeroom.ts");
    assert!(
        fake.contains("SERVER_LIMITS: RoomLimits = DEFAULT_LIMITS"),
        "the fake takes its limits from DEFAULT_LIMITS, not its own numbers"
    );
    let constant = |name: &str| -> u64 {
        let line = fake.lines().find(|l| l.contains(&format!("const {name} ="))).expect(name);
        line.split('=').nth(1).unwrap().trim().trim_end_matches(';').parse().expect(line)
    };
    let c = RoomConfig::default();
    assert_eq!(constant("ABUSE_LIMIT"), c.abuse_limit);
    assert_eq!(constant("ABUSE_DRAIN_PER_SEC"), c.abuse_drain_per_sec);
}
