//! Every setting a deployment gives homeroom (`[vars]` in `wrangler.toml`, or secrets),
//! declared once: its name, its default and what it means. The room's are declared with their
//! fields in `room/config.rs` ([`crate::room::ROOM_VARIABLES`]); the edge's are here. The
//! README's table of variables and the client's defaults are checked against these
//! (`tests/settings.rs`), and both adapters read a setting the same way (`read`, wasm32).

/// A setting's default as the README shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Number(u64),
    Text(&'static str),
}

/// One deployment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    pub default: Shown,
    pub meaning: &'static str,
}

const fn text(name: &'static str, default: &'static str, meaning: &'static str) -> Variable {
    Variable { name, default: Shown::Text(default), meaning }
}

/// `REGIONS`: the region table ([`crate::edge::regions`]).
pub const REGIONS: Variable = text(
    "REGIONS",
    "continent codes",
    "JSON `{\"colo\":{..},\"country\":{..},\"continent\":{..}}` mapping cf values to region names (colo wins over country over continent); 1-32 chars of `A-Za-z0-9_-`",
);
/// `HOME`: where new rooms are placed.
pub const HOME: Variable = text(
    "HOME",
    "caller's continent",
    "location hint for new rooms (`wnam enam sam weur eeur apac oc afr me`)",
);
/// `ROOM_HOMES`: where given rooms are placed.
pub const ROOM_HOMES: Variable =
    text("ROOM_HOMES", "none", "JSON `{\"room\": \"hint\"}`, wins over `HOME`");
/// `CANARY_ROOM`: the health canary's room.
pub const CANARY_ROOM: Variable =
    text("CANARY_ROOM", "`homeroom-canary`", "the room `/health` and the cron canary use");
/// `LOG_CONNECTIONS`: the per-connection log lines.
pub const LOG_CONNECTIONS: Variable = text(
    "LOG_CONNECTIONS",
    "on",
    "`off` (or `false`, `0`, `no`) drops the per-connection `connect` and `close` log lines",
);
/// `TOKEN_MAX_TTL_SECS`: the longest token lifetime.
pub const TOKEN_MAX_TTL_SECS: Variable = Variable {
    name: "TOKEN_MAX_TTL_SECS",
    default: Shown::Number(crate::auth::DEFAULT_MAX_TTL_SECS),
    meaning: "a token whose `exp` is further ahead is refused (`token_lifetime`)",
};
/// `TOKEN_AUDIENCE`: the audience tokens must name.
pub const TOKEN_AUDIENCE: Variable = text(
    "TOKEN_AUDIENCE",
    "unset",
    "when set, every token must carry an `aud` naming it; when unset, a token that names any audience is refused (`token_audience`)",
);
/// `ALLOW_TOKENS_WITHOUT_KIND`: the kind transition.
pub const ALLOW_TOKENS_WITHOUT_KIND: Variable = text(
    "ALLOW_TOKENS_WITHOUT_KIND",
    "unset",
    "`true` (a transition, logged as a `config_warning`): a token without a `kind` claim opens every kind of room; unset, it opens none (`token_wrong_kind`)",
);
/// `AUTH_SECRET_KID`: the key id of `AUTH_SECRET`.
pub const AUTH_SECRET_KID: Variable = text(
    "AUTH_SECRET_KID",
    "unset",
    "key id of `AUTH_SECRET`: a token whose header names a `kid` is checked with that secret only (unknown: `token_unknown_kid`); one without a `kid` with both secrets",
);
/// `AUTH_SECRET_PREVIOUS_KID`: the key id of `AUTH_SECRET_PREVIOUS`.
pub const AUTH_SECRET_PREVIOUS_KID: Variable =
    text("AUTH_SECRET_PREVIOUS_KID", "unset", "key id of `AUTH_SECRET_PREVIOUS`, the same way");
/// `CORS_ORIGINS`: the pages that may call the HTTP room routes.
pub const CORS_ORIGINS: Variable = text(
    "CORS_ORIGINS",
    "unset",
    "comma-separated origins (`https://app.example.com`) whose pages may call the HTTP room routes, or `*`; see [CORS](#cors)",
);
/// `ANONYMOUS_DEV`: rooms without a secret, locally.
pub const ANONYMOUS_DEV: Variable = text(
    "ANONYMOUS_DEV",
    "unset",
    "`true` allows rooms without `AUTH_SECRET`, for loopback requests only",
);
/// `ANONYMOUS_DEV_ALLOW_REMOTE`: anonymous dev mode for anyone.
pub const ANONYMOUS_DEV_ALLOW_REMOTE: Variable = text(
    "ANONYMOUS_DEV_ALLOW_REMOTE",
    "unset",
    "`true` also serves non-loopback requests in anonymous dev mode (an open deployment: never in production)",
);

/// `RELAY_ABOVE`: when a room of a kind with relays uses them.
pub const RELAY_ABOVE: Variable = Variable {
    name: "RELAY_ABOVE",
    default: Shown::Number(DEFAULT_RELAY_ABOVE),
    meaning: "for a kind with relays: at this many members a room takes its new connects through regional relays, and goes back to direct below half of it; `0`: always through relays (see [Relays](#relays-rooms-bigger-than-one-object))",
};
/// The default of [`RELAY_ABOVE`].
pub const DEFAULT_RELAY_ABOVE: u64 = 1000;
/// `RELAY_SHARDS`: relays per region of a relayed room.
pub const RELAY_SHARDS: Variable = Variable {
    name: "RELAY_SHARDS",
    default: Shown::Number(1),
    meaning: "relays per region of a relayed room (1-64); a session always lands on the same one",
};

/// `LINK_DELAY_MS`: a test-only distance between a relay and its home.
pub const LINK_DELAY_MS: Variable = Variable {
    name: "LINK_DELAY_MS",
    default: Shown::Number(0),
    meaning: "benchmarks only: each link message waits this long each way, as if the relay were an ocean from its home (`bench/run`'s WAN rows); read only where no `AUTH_SECRET` is set, so a deployment with tokens never waits",
};

/// `AUTH_SECRET`: the secret tokens are signed with (a secret, not a variable).
pub const AUTH_SECRET: &str = "AUTH_SECRET";
/// `AUTH_SECRET_PREVIOUS`: the secret being retired during a rotation.
pub const AUTH_SECRET_PREVIOUS: &str = "AUTH_SECRET_PREVIOUS";
/// `ADMIN_KEY`: the bearer key of the admin routes.
pub const ADMIN_KEY: &str = "ADMIN_KEY";
/// The secrets, as the README's table of secrets names them.
pub const SECRETS: &[&str] = &[AUTH_SECRET, AUTH_SECRET_PREVIOUS, ADMIN_KEY];

/// The edge's variables (the room's are [`crate::room::ROOM_VARIABLES`]).
pub const EDGE_VARIABLES: &[Variable] = &[
    REGIONS,
    HOME,
    ROOM_HOMES,
    CANARY_ROOM,
    LOG_CONNECTIONS,
    TOKEN_MAX_TTL_SECS,
    TOKEN_AUDIENCE,
    ALLOW_TOKENS_WITHOUT_KIND,
    AUTH_SECRET_KID,
    AUTH_SECRET_PREVIOUS_KID,
    CORS_ORIGINS,
    ANONYMOUS_DEV,
    ANONYMOUS_DEV_ALLOW_REMOTE,
    RELAY_ABOVE,
    RELAY_SHARDS,
    LINK_DELAY_MS,
];

/// Every deployment variable: the room's, then the edge's.
pub fn variables() -> impl Iterator<Item = &'static Variable> {
    crate::room::ROOM_VARIABLES.iter().chain(EDGE_VARIABLES).chain(DOC_VARIABLES)
}

/// `DOC_MAX_BYTES`: the largest document of a document kind (crate feature `documents`).
pub const DOC_MAX_BYTES: Variable = Variable {
    name: "DOC_MAX_BYTES",
    default: Shown::Number(DEFAULT_DOC_MAX_BYTES),
    meaning: "the largest document a document kind's room stores (bytes, the whole document encoded once; 65536 to 67108864); an update that would pass it is refused (`document_too_large`)",
};
/// [`DOC_MAX_BYTES`]'s default: 4 MiB.
pub const DEFAULT_DOC_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The document kinds' variables.
pub const DOC_VARIABLES: &[Variable] = &[DOC_MAX_BYTES];

/// A deployment setting as the Worker and the room object both read it: a secret, else a
/// variable; blank counts as unset. Read from the environment once per isolate (a deploy, a
/// new secret or a changed variable makes a new one): a connect reads a few settings, and
/// each lookup that finds nothing costs a failed binding lookup in JavaScript.
#[cfg(target_arch = "wasm32")]
pub fn read(env: &worker::Env, name: &str) -> Option<String> {
    thread_local! {
        static READ: std::cell::RefCell<std::collections::HashMap<String, Option<String>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if let Some(known) = READ.with(|r| r.borrow().get(name).cloned()) {
        return known;
    }
    let value = env
        .secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
        .filter(|v| !v.trim().is_empty());
    READ.with(|r| r.borrow_mut().insert(name.to_owned(), value.clone()));
    value
}
