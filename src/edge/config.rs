//! What the deployment is configured with: auth mode, admin key, canary room
//! and room placement, read from Worker secrets and vars.

use std::cell::RefCell;
use std::rc::Rc;

use worker::Env;

use crate::auth;
use crate::settings::{self, read};

/// How connections are authorized.
#[derive(Clone)]
pub enum AuthMode {
    /// Tokens signed with `AUTH_SECRET` (or, during a rotation,
    /// `AUTH_SECRET_PREVIOUS`) are required, checked as the verifier says
    /// (`TOKEN_AUDIENCE`, `TOKEN_MAX_TTL_SECS`, `ALLOW_TOKENS_WITHOUT_KIND`).
    Tokens(auth::Verifier),
    /// `ANONYMOUS_DEV=true` and no secret: the user is the session. Served
    /// to local requests only (the Worker's own URL is a loopback address),
    /// unless `ANONYMOUS_DEV_ALLOW_REMOTE=true` says the risk is known.
    Anonymous { remote: bool },
    /// Neither: room routes refuse with 503 so that a deployment never runs
    /// open by accident.
    Unconfigured,
    /// `AUTH_SECRET` is shorter than [`auth::MIN_SECRET_BYTES`]: room routes
    /// refuse with 503 rather than accept tokens anyone could forge.
    WeakSecret,
}

/// The deployment's settings, the same for every request an isolate serves.
pub struct Deployment {
    pub auth: AuthMode,
    /// `ADMIN_KEY`: the bearer key of the admin routes; none disables them.
    pub admin_key: Option<String>,
    /// `ADMIN_KEY` is shorter than [`auth::MIN_SECRET_BYTES`]: the admin
    /// routes refuse (503) rather than take a key anyone could guess.
    pub admin_key_weak: bool,
    /// The room `/health` and the cron canary connect to.
    pub canary_room: String,
    /// `LOG_CONNECTIONS`: a `connect` line per accepted upgrade.
    pub log_connections: bool,
    /// The kinds of room the Worker serves; the canary uses the first.
    pub kinds: &'static [super::Kind],
    /// `CORS_ORIGINS`: the origins whose pages may call the HTTP room routes.
    pub cors: super::origins::Origins,
    /// `RELAY_ABOVE`: members at which a room of a kind with relays uses them (0: always).
    pub relay_above: u64,
    /// `RELAY_SHARDS`: relays per region (1-64).
    pub relay_shards: u64,
}

impl Deployment {
    /// The kind of room the canary room is of.
    pub fn canary_kind(&self) -> &'static super::Kind {
        &self.kinds[0]
    }
}

thread_local! {
    /// Read once per isolate: secrets and vars cannot change under a running
    /// isolate (a new secret or deploy starts new ones), and reading them
    /// costs a failed secret lookup per variable on every request.
    static CURRENT: RefCell<Option<Rc<Deployment>>> = const { RefCell::new(None) };
}

impl Deployment {
    /// The deployment's settings, read on the isolate's first request.
    pub fn current(env: &Env, kinds: &'static [super::Kind]) -> Rc<Deployment> {
        if let Some(dep) = CURRENT.with(|c| c.borrow().clone()) {
            return dep;
        }
        let dep = Rc::new(Deployment::read(env, kinds));
        CURRENT.with(|c| *c.borrow_mut() = Some(Rc::clone(&dep)));
        dep
    }

    fn read(env: &Env, kinds: &'static [super::Kind]) -> Deployment {
        let text = |name: &str| read(env, name);
        let yes = |name: &str| text(name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let key =
            |secret: String, kid: &str| auth::Key { secret: secret.into_bytes(), kid: text(kid) };
        let strong = |s: &String| s.len() >= auth::MIN_SECRET_BYTES;
        let number = |name: &str| text(name).and_then(|v| v.trim().parse::<u64>().ok());
        let previous = text(settings::AUTH_SECRET_PREVIOUS);
        let max_ttl_secs = text(settings::TOKEN_MAX_TTL_SECS.name)
            .and_then(|v| v.trim().parse().ok())
            .filter(|n: &u64| *n > 0)
            .unwrap_or(auth::DEFAULT_MAX_TTL_SECS);
        let auth = match text(settings::AUTH_SECRET) {
            Some(secret) if strong(&secret) && previous.as_ref().is_none_or(strong) => {
                let keys = auth::Keys {
                    current: key(secret, settings::AUTH_SECRET_KID.name),
                    previous: previous.map(|p| key(p, settings::AUTH_SECRET_PREVIOUS_KID.name)),
                };
                AuthMode::Tokens(auth::Verifier {
                    audience: text(settings::TOKEN_AUDIENCE.name).map(|a| a.trim().to_owned()),
                    kindless: yes(settings::ALLOW_TOKENS_WITHOUT_KIND.name),
                    max_ttl_secs,
                    ..auth::Verifier::new(keys)
                })
            }
            Some(_) => AuthMode::WeakSecret,
            None if yes(settings::ANONYMOUS_DEV.name) => {
                AuthMode::Anonymous { remote: yes(settings::ANONYMOUS_DEV_ALLOW_REMOTE.name) }
            }
            None => AuthMode::Unconfigured,
        };
        log_auth_mode(&auth);
        let admin_key = text(settings::ADMIN_KEY);
        let admin_key_weak = admin_key.as_ref().is_some_and(|k| k.len() < auth::MIN_SECRET_BYTES);
        if admin_key_weak {
            super::log(
                "config_error",
                serde_json::json!({"problem": format!(
                    "ADMIN_KEY is shorter than {} bytes: refusing the admin routes (set a long random key with `wrangler secret put ADMIN_KEY`)",
                    auth::MIN_SECRET_BYTES
                )}),
            );
        }
        let (cors, not_origins) =
            super::origins::Origins::parse(text(settings::CORS_ORIGINS.name).as_deref());
        if !not_origins.is_empty() {
            super::log(
                "config_error",
                serde_json::json!({"problem": format!(
                    "CORS_ORIGINS entries that are not origins (scheme://host[:port]) are ignored: {}",
                    not_origins.join(", ")
                )}),
            );
        }
        Deployment {
            auth,
            admin_key,
            admin_key_weak,
            canary_room: text(settings::CANARY_ROOM.name)
                .unwrap_or_else(|| "homeroom-canary".into()),
            log_connections: crate::logline::connections_logged(text(
                settings::LOG_CONNECTIONS.name,
            )),
            kinds,
            cors,
            relay_above: number(settings::RELAY_ABOVE.name)
                .unwrap_or(settings::DEFAULT_RELAY_ABOVE),
            relay_shards: number(settings::RELAY_SHARDS.name).unwrap_or(1).clamp(1, 64),
        }
    }
}

/// The first request of each isolate says how it runs: a deployment that is
/// open, or refusing everyone, or taking tokens without a kind, must be
/// impossible to miss.
fn log_auth_mode(auth: &AuthMode) {
    match auth {
        AuthMode::Tokens(verifier) => {
            super::log(
                "auth_mode",
                serde_json::json!({"mode": "tokens", "rotating": verifier.keys.previous.is_some(),
                    "audience": verifier.audience, "tokens_without_kind": verifier.kindless}),
            );
            // A loosening of what a token opens must not go unnoticed.
            if verifier.kindless {
                worker::console_warn!(
                    "{}",
                    serde_json::json!({"event": "config_warning", "warning":
                        "ALLOW_TOKENS_WITHOUT_KIND=true: a token without a `kind` claim opens EVERY kind of room of this Worker. Mint tokens with `kind` and remove the variable."})
                );
            }
        }
        AuthMode::Anonymous { remote } => worker::console_warn!(
            "{}",
            serde_json::json!({"event": "auth_mode", "mode": "anonymous", "remote": remote,
            "warning": if *remote {
                "ANONYMOUS DEV MODE OPEN TO REMOTE CALLERS (ANONYMOUS_DEV_ALLOW_REMOTE=true): anyone can join any room as any session. Never deploy this."
            } else {
                "ANONYMOUS DEV MODE: no AUTH_SECRET; rooms are open to local requests (127.0.0.1, localhost) only."
            }})
        ),
        AuthMode::WeakSecret => super::log(
            "config_error",
            serde_json::json!({"problem": format!(
                "AUTH_SECRET (or AUTH_SECRET_PREVIOUS) is shorter than {} bytes: refusing room routes (set a long random secret with `wrangler secret put AUTH_SECRET`)",
                auth::MIN_SECRET_BYTES
            )}),
        ),
        AuthMode::Unconfigured => worker::console_error!(
            "{}",
            serde_json::json!({"event": "auth_mode", "mode": "unconfigured",
                "error": "no AUTH_SECRET (wrangler secret put AUTH_SECRET) and ANONYMOUS_DEV is not true: refusing room connections"})
        ),
    }
}
