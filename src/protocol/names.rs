//! The naming rules of PROTOCOL.md ("Names"), shared by the Worker and the engine.

/// Longest room, topic, id or state key, in characters.
pub const MAX_NAME: usize = 64;

/// A room name: 1-64 chars of `A-Z a-z 0-9 . _ : -`, and not `.` or `..`
/// (a name that a URL path would treat as a directory step).
pub fn valid_room(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// A session id: 8-64 chars of `A-Z a-z 0-9 _ -`.
pub fn valid_session(session: &str) -> bool {
    (8..=MAX_NAME).contains(&session.len())
        && session.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// A topic: 1-64 chars, not starting with `$` (reserved for the room itself).
pub fn valid_topic(topic: &str) -> bool {
    bounded(topic) && !topic.starts_with('$')
}

/// A client message id or a state key: 1-64 chars.
pub fn bounded(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= MAX_NAME
}

/// An epoch as a client echoes it back: 1-64 chars of `A-Z a-z 0-9 _ -`.
pub fn valid_epoch(epoch: &str) -> bool {
    (1..=MAX_NAME).contains(&epoch.len())
        && epoch.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_names() {
        assert!(valid_room("r1"));
        assert!(valid_room("team.a:b_c-d"));
        assert!(valid_room(&"a".repeat(64)));
        assert!(!valid_room(&"a".repeat(65)));
        assert!(!valid_room(""));
        assert!(!valid_room("a/b"));
        assert!(!valid_room(".."));
        assert!(!valid_room("ünï"));
        assert!(!valid_room("a b"));
    }

    #[test]
    fn sessions_topics_ids() {
        assert!(valid_session("s-abc123"));
        assert!(!valid_session("short"));
        assert!(!valid_session("has.dot.in.it"));
        assert!(valid_topic("chat"));
        assert!(!valid_topic("$state"));
        assert!(!valid_topic(""));
        assert!(bounded(&"é".repeat(64)));
        assert!(!bounded(&"é".repeat(65)));
    }
}
