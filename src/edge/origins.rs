//! The `CORS_ORIGINS` allow-list: which web origins' pages may call the
//! HTTP room routes (the Worker adds the headers, `edge::cors`). Pure, so it
//! builds and tests natively.

/// The origins `CORS_ORIGINS` allows: none (unset), any (`*`), or a list of
/// exact origins (`scheme://host[:port]`, comma-separated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Origins {
    #[default]
    None,
    Any,
    List(Vec<String>),
}

impl Origins {
    /// Parses `CORS_ORIGINS`. Entries that are not origins (a path, no
    /// scheme, a typo) are returned apart so the deployment can log them; the
    /// rest still apply. A trailing `/` is forgiven.
    ///
    /// ```
    /// use homeroom::edge::origins::Origins;
    /// let (o, bad) = Origins::parse(Some("https://app.example.com, http://localhost:5173/, app"));
    /// assert!(o.allows("http://localhost:5173") && !o.allows("https://evil.example"));
    /// assert_eq!(bad, ["app"]);
    /// ```
    pub fn parse(text: Option<&str>) -> (Origins, Vec<String>) {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            return (Origins::None, Vec::new());
        };
        if text == "*" {
            return (Origins::Any, Vec::new());
        }
        let (mut good, mut bad) = (Vec::new(), Vec::new());
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let origin = entry.strip_suffix('/').unwrap_or(entry);
            if is_origin(origin) {
                good.push(origin.to_ascii_lowercase());
            } else {
                bad.push(entry.to_owned());
            }
        }
        let origins = if good.is_empty() { Origins::None } else { Origins::List(good) };
        (origins, bad)
    }

    /// Whether a request's `Origin` header value is allowed. The opaque
    /// origin `null` (sandboxed frames, `file:` pages) never is, even with `*`.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            Origins::None => false,
            Origins::Any => is_origin(origin),
            Origins::List(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }
}

/// `http(s)://host[:port]` with nothing after: what a browser sends as `Origin`.
fn is_origin(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://")) else {
        return false;
    };
    !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_or_blank_allows_nothing() {
        for text in [None, Some(""), Some("  ")] {
            let (o, bad) = Origins::parse(text);
            assert_eq!(o, Origins::None);
            assert!(bad.is_empty());
            assert!(!o.allows("https://app.example.com"));
        }
    }

    #[test]
    fn a_list_allows_exactly_its_origins() {
        let (o, bad) = Origins::parse(Some("https://App.Example.com, http://127.0.0.1:5173/ ,,  "));
        assert!(bad.is_empty());
        assert!(o.allows("https://app.example.com"));
        assert!(o.allows("http://127.0.0.1:5173"));
        for other in [
            "http://app.example.com",       // another scheme
            "https://app.example.com:8443", // another port
            "https://evil.app.example.com", // a subdomain
            "https://app.example.com.evil", // a suffix
            "http://127.0.0.1:51730",       // a longer port
            "null",
            "",
        ] {
            assert!(!o.allows(other), "{other}");
        }
    }

    #[test]
    fn entries_that_are_not_origins_are_set_apart() {
        let (o, bad) = Origins::parse(Some(
            "app.example.com, https://ok.example, https://x.example/path, ftp://y",
        ));
        assert_eq!(o, Origins::List(vec!["https://ok.example".into()]));
        assert_eq!(bad, ["app.example.com", "https://x.example/path", "ftp://y"]);
        let (o, bad) = Origins::parse(Some("nonsense"));
        assert_eq!((o, bad.len()), (Origins::None, 1));
    }

    #[test]
    fn any_allows_every_real_origin_but_not_null() {
        let (o, _) = Origins::parse(Some(" * "));
        assert_eq!(o, Origins::Any);
        assert!(o.allows("https://anything.example") && o.allows("http://[::1]:8080"));
        assert!(!o.allows("null") && !o.allows("") && !o.allows("https://a.example/x"));
    }
}
