//! Reading JSON text without recursion: how deep a value nests, and which
//! frame types a server text carries. Both walk the bytes with a counter, so
//! no input can exhaust the stack or hit a parser's depth limit.

/// How deeply `text` nests arrays and objects: `1` is `1`, `[1]` is 1,
/// `{"a":[1]}` is 2. Brackets inside strings do not count. The text is
/// assumed to be JSON already (serde validated it); on anything else the
/// answer is still a bound on the brackets seen.
///
/// ```
/// use homeroom::protocol::json::depth;
/// assert_eq!(depth("7"), 0);
/// assert_eq!(depth(r#"{"a":[1,{"b":"[[["}]}"#), 3);
/// ```
pub fn depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'"' => skip_string(&mut bytes),
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whether the value `text` nests deeper than `max` (stops early).
pub fn deeper_than(text: &str, max: usize) -> bool {
    let mut depth = 0usize;
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'"' => skip_string(&mut bytes),
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// What makes a value one that not every JSON reader takes (RFC 7493,
/// I-JSON): browsers read it, strict readers (serde_json, Go, Python with
/// `parse_constant` checks) refuse the whole frame that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unportable {
    /// A `\u` escape of half a surrogate pair, without its other half.
    LoneSurrogate,
    /// A number beyond the range of a 64-bit float (`1e999`).
    NumberOutOfRange,
}

/// The first reason `text`, a JSON value (already validated), is not
/// portable, if any; one pass over its bytes, no recursion.
///
/// ```
/// use homeroom::protocol::json::{unportable, Unportable};
/// assert_eq!(unportable(r#"{"a":"\ud83d\ude00","n":1e300}"#), None);
/// assert_eq!(unportable(r#"["\ud800x"]"#), Some(Unportable::LoneSurrogate));
/// assert_eq!(unportable(r#"{"n":-1e999}"#), Some(Unportable::NumberOutOfRange));
/// ```
pub fn unportable(text: &str) -> Option<Unportable> {
    let b = text.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let digits = b.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] != b'\\' {
                        i += 1;
                        continue;
                    }
                    if b.get(i + 1) != Some(&b'u') {
                        i += 2;
                        continue;
                    }
                    let unit = hex(i + 2).unwrap_or(0);
                    match unit {
                        0xD800..=0xDBFF => {
                            let low =
                                (b.get(i + 6..i + 8) == Some(b"\\u")).then(|| hex(i + 8)).flatten();
                            if !low.is_some_and(|l| (0xDC00..=0xDFFF).contains(&l)) {
                                return Some(Unportable::LoneSurrogate);
                            }
                            i += 12;
                        }
                        0xDC00..=0xDFFF => return Some(Unportable::LoneSurrogate),
                        _ => i += 6,
                    }
                }
                i += 1; // the closing quote
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let number = &text[start..i];
                // Only an exponent or many digits can leave a double's range.
                if (number.len() > 300 || number.contains(['e', 'E']))
                    && !number.parse::<f64>().is_ok_and(f64::is_finite)
                {
                    return Some(Unportable::NumberOutOfRange);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Moves past the rest of a string whose opening quote was just read.
fn skip_string(bytes: &mut std::str::Bytes<'_>) {
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => {
                bytes.next();
            }
            b'"' => return,
            _ => {}
        }
    }
}

/// The `type` of a server frame and, for a `batch`, of each frame inside
/// it, read from the text at depths 1 and 2 only: whatever the frames carry
/// (a member's presence state, a message's data) is skipped, never parsed.
/// Returns `None` when the text is not a JSON object.
pub fn frame_types(text: &str) -> Option<Vec<String>> {
    let mut s = Scanner { b: text.as_bytes(), i: 0 };
    let mut kind = None;
    let mut inner = Vec::new();
    s.object(|s, key| match key {
        "type" => kind = s.string(),
        "frames" => {
            s.array(|s| {
                let mut t = None;
                s.object(|s, key| {
                    if key == "type" {
                        t = s.string();
                    } else {
                        s.skip_value();
                    }
                });
                inner.extend(t);
            });
        }
        _ => s.skip_value(),
    })?;
    let kind = kind?;
    if kind == "batch" {
        Some(inner)
    } else {
        Some(vec![kind])
    }
}

/// A cursor over JSON bytes that reads only what it is asked for.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Reads a string value (escapes decoded only as far as a frame type
    /// needs: a type with escapes is returned raw, and matches nothing).
    fn string(&mut self) -> Option<String> {
        self.ws();
        if self.b.get(self.i) != Some(&b'"') {
            self.skip_value();
            return None;
        }
        let start = self.i + 1;
        let mut j = start;
        while j < self.b.len() {
            match self.b[j] {
                b'\\' => j += 2,
                b'"' => {
                    self.i = j + 1;
                    return std::str::from_utf8(&self.b[start..j]).ok().map(str::to_owned);
                }
                _ => j += 1,
            }
        }
        self.i = self.b.len();
        None
    }

    /// Calls `field` with each key of an object; `field` must consume the value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &str)) -> Option<()> {
        if !self.eat(b'{') {
            self.skip_value();
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if !self.eat(b':') {
                return None;
            }
            field(self, &key);
            if self.eat(b',') {
                continue;
            }
            return self.eat(b'}').then_some(());
        }
    }

    /// Calls `item` for each element of an array; `item` must consume it.
    fn array(&mut self, mut item: impl FnMut(&mut Self)) {
        if !self.eat(b'[') {
            self.skip_value();
            return;
        }
        if self.eat(b']') {
            return;
        }
        loop {
            let before = self.i;
            item(self);
            if self.i == before {
                return; // not progressing: malformed
            }
            if !self.eat(b',') {
                self.eat(b']');
                return;
            }
        }
    }

    /// Skips one value of any depth with a counter, not recursion.
    fn skip_value(&mut self) {
        self.ws();
        let mut depth = 0usize;
        while self.i < self.b.len() {
            let c = self.b[self.i];
            match c {
                b'"' => {
                    self.i += 1;
                    while self.i < self.b.len() {
                        match self.b[self.i] {
                            b'\\' => self.i += 2,
                            b'"' => break,
                            _ => self.i += 1,
                        }
                    }
                    self.i += 1;
                    if depth == 0 {
                        return;
                    }
                    continue;
                }
                b'[' | b'{' => depth += 1,
                b']' | b'}' => {
                    if depth == 0 {
                        return; // the end of the enclosing value
                    }
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return;
                    }
                }
                b',' if depth == 0 => return,
                _ => {}
            }
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(depth("null"), 0);
        assert_eq!(depth("[]"), 1);
        assert_eq!(depth(r#"[[1],{"a":{"b":[]}}]"#), 4);
        assert_eq!(depth(r#"{"s":"[[[[\"]]]]"}"#), 1);
        let deep = "[".repeat(30_000) + &"]".repeat(30_000);
        assert_eq!(depth(&deep), 30_000);
        assert!(deeper_than(&deep, 32));
        assert!(!deeper_than(&("[".repeat(32) + &"]".repeat(32)), 32));
        assert!(deeper_than(&("[".repeat(33) + &"]".repeat(33)), 32));
    }

    #[test]
    fn frame_types_reads_only_the_top_two_levels() {
        assert_eq!(frame_types(r#"{"type":"pong"}"#), Some(vec!["pong".to_string()]));
        let batch = r#"{"type":"batch","frames":[{"type":"message","data":{"type":"pong"}},{"x":[1,"]"],"type":"pong"}]}"#;
        assert_eq!(frame_types(batch), Some(vec!["message".to_string(), "pong".to_string()]));
        // Data nested far past any parser's limit is skipped, not parsed.
        let deep = "[".repeat(50_000) + &"]".repeat(50_000);
        let welcome = format!(
            r#"{{"type":"welcome","presence":{{"members":{{"s":{{"state":{{"x":{deep}}}}}}}}}}}"#
        );
        assert_eq!(frame_types(&welcome), Some(vec!["welcome".to_string()]));
        assert_eq!(frame_types("not json"), None);
        assert_eq!(frame_types("[1]"), None);
        assert_eq!(frame_types(r#"{"frames":[]}"#), None);
        assert_eq!(frame_types(r#"{"type":"batch","frames":[]}"#), Some(vec![]));
    }
}
