//! Region names from where a client connected (PROTOCOL.md "Regions").
//!
//! The Worker passes the request's `cf` `colo`, `country` and `continent`
//! (as Cloudflare gives them: upper case, e.g. `SYD`, `NZ`, `OC`) to
//! [`RegionTable::region`]. A deployment may configure a table in the
//! `REGIONS` variable of `wrangler.toml`, a JSON string:
//!
//! ```toml
//! [vars]
//! REGIONS = '{"colo":{"SYD":"oc-syd"},"country":{"NZ":"oc-syd","GB":"eu-west"},"continent":{"EU":"eu-central"}}'
//! ```
//!
//! The first match wins: colo, then country, then continent; with no match the
//! region is the continent code (`AF AN AS EU NA OC SA`), or `XX` when the
//! continent is absent or not one of those. All three sections are optional;
//! `{}` and an unset variable are the default table.
//!
//! Pure: builds natively and for wasm32.

use std::collections::BTreeMap;

use serde_json::Value;

/// The region of a request whose continent is unknown.
pub const UNKNOWN: &str = "XX";

/// The continent codes Cloudflare gives, each its own default region.
pub const CONTINENTS: [&str; 7] = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"];

/// Longest region name, in characters.
pub const MAX_REGION: usize = 32;

/// A region name a table may map to: 1-32 chars of `A-Z a-z 0-9 _ -`.
pub fn valid_region(name: &str) -> bool {
    (1..=MAX_REGION).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The deployment's mapping from `cf` location to region name.
/// [`Default`] is the empty table: every request gets its continent code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionTable {
    colo: BTreeMap<String, String>,
    country: BTreeMap<String, String>,
    continent: BTreeMap<String, String>,
}

/// One section of the table: its name and the rule its keys follow.
struct Section {
    name: &'static str,
    key_ok: fn(&str) -> bool,
    key_rule: &'static str,
}

const SECTIONS: [Section; 3] = [
    Section {
        name: "colo",
        key_ok: |k| {
            (1..=8).contains(&k.len())
                && k.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        },
        key_rule: "an upper-case colo code such as SYD",
    },
    Section {
        name: "country",
        key_ok: |k| k.len() == 2 && k.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()),
        key_rule: "an upper-case two-letter country code such as NZ",
    },
    Section {
        name: "continent",
        key_ok: |k| CONTINENTS.contains(&k),
        key_rule: "one of AF AN AS EU NA OC SA",
    },
];

impl RegionTable {
    /// Parses the `REGIONS` JSON: an object with optional `colo`, `country`
    /// and `continent` objects mapping codes to region names.
    ///
    /// The table is refused as a whole on any problem (not JSON, an unknown
    /// section, a key Cloudflare would never send such as lower case `syd`,
    /// a region name that is not 1-32 chars of `A-Z a-z 0-9 _ -`), with a
    /// message listing every problem, so the Worker can log it and fall back
    /// to [`RegionTable::default`].
    pub fn parse(json: &str) -> Result<RegionTable, String> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("REGIONS is not valid JSON: {e}"))?;
        let Value::Object(top) = value else {
            return Err(format!(
                "REGIONS must be a JSON object with optional \"colo\", \"country\" and \
                 \"continent\" objects, not {}",
                kind(&value)
            ));
        };
        let mut problems = Vec::new();
        for key in top.keys() {
            if !SECTIONS.iter().any(|s| s.name == key) {
                problems.push(format!(
                    "unknown section {key:?} (expected \"colo\", \"country\" or \"continent\")"
                ));
            }
        }
        let mut table = RegionTable::default();
        for section in &SECTIONS {
            let Some(entries) = top.get(section.name) else {
                continue;
            };
            let Value::Object(entries) = entries else {
                problems.push(format!(
                    "{:?} must be an object of code → region name, not {}",
                    section.name,
                    kind(entries)
                ));
                continue;
            };
            let map = match section.name {
                "colo" => &mut table.colo,
                "country" => &mut table.country,
                _ => &mut table.continent,
            };
            for (code, region) in entries {
                if !(section.key_ok)(code) {
                    problems.push(format!(
                        "{}: key {code:?} is not {} (keys are matched exactly as Cloudflare sends them)",
                        section.name, section.key_rule
                    ));
                }
                match region {
                    Value::String(name) if valid_region(name) => {
                        map.insert(code.clone(), name.clone());
                    }
                    Value::String(name) => problems.push(format!(
                        "{}.{code}: region name {name:?} is not 1-{MAX_REGION} characters of \
                         A-Z a-z 0-9 _ -",
                        section.name
                    )),
                    other => problems.push(format!(
                        "{}.{code}: region name must be a string, not {}",
                        section.name,
                        kind(other)
                    )),
                }
            }
        }
        if problems.is_empty() {
            Ok(table)
        } else {
            Err(format!("invalid REGIONS table: {}", problems.join("; ")))
        }
    }

    /// The table for the `REGIONS` variable's value: unset or blank → the
    /// default table; invalid → the default table and the reason, for the
    /// Worker to log.
    pub fn from_var(raw: Option<&str>) -> (RegionTable, Option<String>) {
        match raw.map(str::trim).filter(|s| !s.is_empty()) {
            None => (RegionTable::default(), None),
            Some(json) => match RegionTable::parse(json) {
                Ok(table) => (table, None),
                Err(e) => (RegionTable::default(), Some(e)),
            },
        }
    }

    /// Whether the table maps nothing (every request gets its continent code).
    pub fn is_empty(&self) -> bool {
        self.colo.is_empty() && self.country.is_empty() && self.continent.is_empty()
    }

    /// The region of a request from its `cf` values (absent or empty values
    /// are skipped): the table's colo entry, else its country entry, else its
    /// continent entry, else the continent code, else [`UNKNOWN`]. Lookups are
    /// case-sensitive. The result is always a [`valid_region`] name.
    pub fn region(
        &self,
        colo: Option<&str>,
        country: Option<&str>,
        continent: Option<&str>,
    ) -> String {
        fn lookup<'a>(map: &'a BTreeMap<String, String>, key: Option<&str>) -> Option<&'a String> {
            key.filter(|k| !k.is_empty()).and_then(|k| map.get(k))
        }
        lookup(&self.colo, colo)
            .or_else(|| lookup(&self.country, country))
            .or_else(|| lookup(&self.continent, continent))
            .map(String::as_str)
            .or_else(|| continent.filter(|c| CONTINENTS.contains(c)))
            .unwrap_or(UNKNOWN)
            .to_owned()
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{"colo":{"SYD":"oc-syd"},"country":{"NZ":"oc-syd","GB":"eu-west"},"continent":{"EU":"eu-central"}}"#;

    #[test]
    fn default_is_continent_code() {
        let t = RegionTable::default();
        assert!(t.is_empty());
        for c in CONTINENTS {
            assert_eq!(t.region(Some("SYD"), Some("AU"), Some(c)), c);
        }
        assert_eq!(t.region(Some("SYD"), Some("AU"), None), "XX");
        assert_eq!(t.region(None, None, None), "XX");
        assert_eq!(t.region(None, None, Some("")), "XX");
        // Not a continent code as Cloudflare gives them: unknown.
        assert_eq!(t.region(None, None, Some("oc")), "XX");
        assert_eq!(t.region(None, None, Some("T1")), "XX");
        assert_eq!(t.region(None, None, Some("<b>")), "XX");
    }

    #[test]
    fn precedence_colo_country_continent_default() {
        let t = RegionTable::parse(EXAMPLE).unwrap();
        // colo beats country and continent
        assert_eq!(t.region(Some("SYD"), Some("GB"), Some("EU")), "oc-syd");
        // country beats continent
        assert_eq!(t.region(Some("LHR"), Some("GB"), Some("EU")), "eu-west");
        assert_eq!(t.region(Some("AKL"), Some("NZ"), Some("OC")), "oc-syd");
        // continent beats the default
        assert_eq!(t.region(Some("FRA"), Some("DE"), Some("EU")), "eu-central");
        // nothing matches: the continent code
        assert_eq!(t.region(Some("MEL"), Some("AU"), Some("OC")), "OC");
        assert_eq!(t.region(Some("NRT"), Some("JP"), Some("AS")), "AS");
        assert_eq!(t.region(Some("NRT"), Some("JP"), None), "XX");
        // missing values fall through
        assert_eq!(t.region(None, Some("GB"), None), "eu-west");
        assert_eq!(t.region(Some(""), Some("GB"), Some("EU")), "eu-west");
        assert_eq!(t.region(None, None, Some("EU")), "eu-central");
        // case-sensitive
        assert_eq!(t.region(Some("syd"), Some("gb"), Some("OC")), "OC");
    }

    #[test]
    fn sections_are_optional() {
        assert_eq!(RegionTable::parse("{}").unwrap(), RegionTable::default());
        let t = RegionTable::parse(r#"{"country":{"T1":"tor","XX":"nowhere"}}"#).unwrap();
        assert_eq!(t.region(Some("SYD"), Some("T1"), Some("OC")), "tor");
        assert_eq!(t.region(None, Some("XX"), None), "nowhere");
        assert_eq!(t.region(None, Some("AU"), Some("OC")), "OC");
        let t = RegionTable::parse(
            r#" { "colo" : { "SYD" : "A_b-9", "LAX": "us-west" }, "continent": {} } "#,
        )
        .unwrap();
        assert_eq!(t.region(Some("LAX"), None, Some("NA")), "us-west");
        let long = "r".repeat(32);
        let t = RegionTable::parse(&format!(r#"{{"continent":{{"AN":"{long}"}}}}"#)).unwrap();
        assert_eq!(t.region(None, None, Some("AN")), long);
    }

    fn refused(json: &str) -> String {
        RegionTable::parse(json).expect_err(json)
    }

    #[test]
    fn bad_tables_are_refused_whole_with_every_problem() {
        let e = refused(
            r#"{"colo":{"SYD":"oc-syd","syd":"oc-syd","MEL":"oc mel"},"country":{"NZ":7},"continents":{}}"#,
        );
        assert!(e.starts_with("invalid REGIONS table: "), "{e}");
        for part in [
            r#"unknown section "continents""#,
            r#"colo: key "syd""#,
            r#"colo.MEL: region name "oc mel""#,
            "country.NZ: region name must be a string, not a number",
        ] {
            assert!(e.contains(part), "{part:?} not in {e}");
        }

        assert!(refused("").contains("not valid JSON"));
        assert!(refused("{").contains("not valid JSON"));
        assert!(refused(r#"{"colo":{"SYD":"a"}"#).contains("not valid JSON"));
        assert!(refused("[]").contains("not an array"));
        assert!(refused(r#""{}""#).contains("not a string"));
        assert!(refused(r#"{"colo":["SYD"]}"#).contains(r#""colo" must be an object"#));
        assert!(refused(r#"{"colo":null}"#).contains("not null"));
        assert!(refused(r#"{"country":{"NZL":"x"}}"#).contains("two-letter"));
        assert!(refused(r#"{"country":{"nz":"x"}}"#).contains("two-letter"));
        assert!(refused(r#"{"continent":{"EUROPE":"x"}}"#).contains("AF AN AS EU NA OC SA"));
        assert!(refused(r#"{"continent":{"eu":"x"}}"#).contains("AF AN AS EU NA OC SA"));
        assert!(refused(r#"{"colo":{"":"x"}}"#).contains("colo code"));
        for bad_name in ["", "a/b", "ünï", "a.b", "<script>", &"r".repeat(33)] {
            let e = refused(&format!(r#"{{"colo":{{"SYD":"{bad_name}"}}}}"#));
            assert!(e.contains("region name"), "{bad_name:?}: {e}");
        }
    }

    #[test]
    fn from_var_falls_back_to_default() {
        assert_eq!(RegionTable::from_var(None), (RegionTable::default(), None));
        assert_eq!(RegionTable::from_var(Some("  ")), (RegionTable::default(), None));
        let (t, err) = RegionTable::from_var(Some(EXAMPLE));
        assert!(err.is_none());
        assert_eq!(t, RegionTable::parse(EXAMPLE).unwrap());
        let (t, err) = RegionTable::from_var(Some(r#"{"colo":{"SYD":"bad name"}}"#));
        assert!(t.is_empty());
        assert!(err.unwrap().contains("bad name"));
    }

    #[test]
    fn every_result_is_a_valid_region() {
        let t = RegionTable::parse(EXAMPLE).unwrap();
        for colo in [None, Some(""), Some("SYD"), Some("x y")] {
            for country in [None, Some("GB"), Some("??")] {
                for continent in [None, Some("EU"), Some("NA"), Some("bad value")] {
                    let r = t.region(colo, country, continent);
                    assert!(valid_region(&r), "{r}");
                }
            }
        }
    }
}
