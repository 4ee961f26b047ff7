//! What the deployment is configured with: auth mode, admin key, canary room
//! and room placement, read from Worker secrets and vars.

use std::cell::RefCell;
use std::rc::Rc;

use worker::Env;

/// How connections are authorized.
#[derive(Clone)]
pub enum AuthMode {
    /// Tokens signed with `AUTH_SECRET` are required.
    Tokens(String),
    /// `ANONYMOUS_DEV=true` and no secret: the user is the session. Local
    /// development only; announced loudly.
    Anonymous,
    /// Neither: room routes refuse with 503 so that a deployment never runs
    /// open by accident.
    Unconfigured,
}

/// The deployment's settings, the same for every request an isolate serves.
pub struct Deployment {
    pub auth: AuthMode,
    /// `ADMIN_KEY`: the bearer key of the admin routes; none disables them.
    pub admin_key: Option<String>,
    /// The room `/health` and the cron canary connect to.
    pub canary_room: String,
    /// `LOG_CONNECTIONS`: a `connect` line per accepted upgrade.
    pub log_connections: bool,
}

thread_local! {
    /// Read once per isolate: secrets and vars cannot change under a running
    /// isolate (a new secret or deploy starts new ones), and reading them
    /// costs a failed secret lookup per variable on every request.
    static CURRENT: RefCell<Option<Rc<Deployment>>> = const { RefCell::new(None) };
}

/// A deployment setting: a secret, else a variable; blank counts as unset.
/// The Worker and the room object read settings the same way.
pub fn setting(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
        .filter(|v| !v.trim().is_empty())
}

impl Deployment {
    /// The deployment's settings, read on the isolate's first request.
    pub fn current(env: &Env) -> Rc<Deployment> {
        if let Some(dep) = CURRENT.with(|c| c.borrow().clone()) {
            return dep;
        }
        let dep = Rc::new(Deployment::read(env));
        CURRENT.with(|c| *c.borrow_mut() = Some(Rc::clone(&dep)));
        dep
    }

    fn read(env: &Env) -> Deployment {
        let text = |name: &str| setting(env, name);
        let auth = match text("AUTH_SECRET") {
            Some(secret) => AuthMode::Tokens(secret),
            None if text("ANONYMOUS_DEV").is_some_and(|v| v.eq_ignore_ascii_case("true")) => {
                AuthMode::Anonymous
            }
            None => AuthMode::Unconfigured,
        };
        // The first request of each isolate says how it runs: a deployment
        // that is open, or refusing everyone, must be impossible to miss.
        match &auth {
            AuthMode::Tokens(_) => super::log("auth_mode", serde_json::json!({"mode": "tokens"})),
            AuthMode::Anonymous => worker::console_warn!(
                "{}",
                serde_json::json!({"event": "auth_mode", "mode": "anonymous",
                    "warning": "ANONYMOUS DEV MODE: no AUTH_SECRET; anyone can join any room as any session. Never deploy this."})
            ),
            AuthMode::Unconfigured => worker::console_error!(
                "{}",
                serde_json::json!({"event": "auth_mode", "mode": "unconfigured",
                    "error": "no AUTH_SECRET (wrangler secret put AUTH_SECRET) and ANONYMOUS_DEV is not true: refusing room connections"})
            ),
        }
        Deployment {
            auth,
            admin_key: text("ADMIN_KEY"),
            canary_room: text("CANARY_ROOM").unwrap_or_else(|| "homeroom-canary".into()),
            log_connections: crate::logline::connections_logged(text("LOG_CONNECTIONS")),
        }
    }
}
