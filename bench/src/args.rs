//! The command line: `--name value` pairs and bare `--flag`s, read by name
//! with a default, and a check that nothing unknown was passed.

use std::collections::BTreeMap;
use std::str::FromStr;

#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
    used: std::cell::RefCell<Vec<String>>,
}

impl Args {
    /// `--a 1 --b --c x` → a=1, b=true, c=x.
    pub fn parse(items: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut values = BTreeMap::new();
        let mut items = items.into_iter().peekable();
        while let Some(item) = items.next() {
            let Some(name) = item.strip_prefix("--") else {
                return Err(format!("unexpected argument {item:?} (flags are --name value)"));
            };
            let value = match items.peek() {
                Some(next) if !next.starts_with("--") => items.next().unwrap(),
                _ => "true".to_owned(),
            };
            values.insert(name.to_owned(), value);
        }
        Ok(Args { values, used: Default::default() })
    }

    /// The value of `--name`, or `default` when absent.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        self.used.borrow_mut().push(name.to_owned());
        match self.values.get(name) {
            None => Ok(default),
            Some(text) => text.parse().map_err(|_| format!("--{name}: cannot read {text:?}")),
        }
    }

    pub fn get_str(&self, name: &str) -> Option<String> {
        self.used.borrow_mut().push(name.to_owned());
        self.values.get(name).cloned()
    }

    /// Fails on a flag no `get` asked about (a typo would silently use a default).
    pub fn finish(&self) -> Result<(), String> {
        let used = self.used.borrow();
        match self.values.keys().find(|k| !used.contains(k)) {
            Some(k) => Err(format!("unknown flag --{k}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Args {
        Args::parse(s.split_whitespace().map(str::to_owned)).unwrap()
    }

    #[test]
    fn pairs_flags_and_unknowns() {
        let a = args("--clients 10 --storm --rate 2.5");
        assert_eq!(a.get("clients", 1usize).unwrap(), 10);
        assert!(a.get("storm", false).unwrap());
        assert_eq!(a.get("rate", 0.0f64).unwrap(), 2.5);
        assert_eq!(a.get("missing", 7u32).unwrap(), 7);
        assert!(a.finish().is_ok());
        let b = args("--typo 1");
        assert!(b.finish().unwrap_err().contains("typo"));
        assert!(Args::parse(["x".to_owned()]).is_err());
    }
}
