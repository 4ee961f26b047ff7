//! Refusals before the upgrade, over raw HTTP: 426 for a plain GET, 400 with a JSON `{error, message}` body for bad rooms, sessions and params; the 64-char room boundary upgrades.

use std::time::Duration;

use crate::harness::{shared, Spec};
use crate::http;
use crate::support::{Ctx, R};

const T: Duration = Duration::from_secs(10);

pub fn trials() -> Vec<Spec> {
    vec![
        shared("refusals::plain_get_is_426", plain_get),
        shared("refusals::bad_names_and_params_are_400", bad_requests),
    ]
}

fn check_error(
    what: &str,
    resp: &http::Response,
    status: &[u16],
    code: Option<&str>,
) -> Result<(), String> {
    if !status.contains(&resp.status) {
        return Err(format!(
            "{what}: status {} (expected {status:?}), body {}",
            resp.status, resp.body
        ));
    }
    if let Some(code) = code {
        let Some(body) = resp.json() else {
            return Err(format!("{what}: body is not JSON: {:?}", resp.body));
        };
        if body["error"] != code || !body["message"].is_string() {
            return Err(format!(
                "{what}: body should be {{\"error\":\"{code}\",\"message\":..}}, got {body}"
            ));
        }
    }
    Ok(())
}

async fn plain_get(ctx: Ctx) -> R {
    let resp = http::get(ctx.port, "/rooms/lobby/ws?session=abcdefgh12", &[], T).await?;
    check_error("GET without Upgrade", &resp, &[426], Some("upgrade_required"))
}

async fn bad_requests(ctx: Ctx) -> R {
    let long_room = "r".repeat(65);
    let ok_room = "r".repeat(64);
    let good = "session=abcdefgh12";
    let cases: Vec<(String, String, Vec<u16>, Option<&str>)> = vec![
        // (what, path, allowed statuses, error code)
        (
            "room with a slash".into(),
            format!("/rooms/a%2Fb/ws?{good}"),
            vec![400],
            Some("bad_room"),
        ),
        (
            "room with unicode".into(),
            format!("/rooms/caf%C3%A9/ws?{good}"),
            vec![400],
            Some("bad_room"),
        ),
        (
            "room with a space".into(),
            format!("/rooms/a%20b/ws?{good}"),
            vec![400],
            Some("bad_room"),
        ),
        (
            "room of 65 chars".into(),
            format!("/rooms/{long_room}/ws?{good}"),
            vec![400],
            Some("bad_room"),
        ),
        // URL parsing resolves `..` before the Worker sees it: any refusal is fine.
        ("room `..`".into(), format!("/rooms/../ws?{good}"), vec![400, 404], None),
        (
            "session too short".into(),
            "/rooms/lobby/ws?session=abc".into(),
            vec![400],
            Some("bad_session"),
        ),
        ("session missing".into(), "/rooms/lobby/ws".into(), vec![400], Some("bad_session")),
        (
            "session with a bad char".into(),
            "/rooms/lobby/ws?session=abcdefgh%21".into(),
            vec![400],
            Some("bad_session"),
        ),
        (
            "session of 65 chars".into(),
            format!("/rooms/lobby/ws?session={}", "s".repeat(65)),
            vec![400],
            Some("bad_session"),
        ),
        (
            "since not a number".into(),
            format!("/rooms/lobby/ws?{good}&since=abc&epoch=e1"),
            vec![400],
            Some("bad_param"),
        ),
        (
            "since negative".into(),
            format!("/rooms/lobby/ws?{good}&since=-1&epoch=e1"),
            vec![400],
            Some("bad_param"),
        ),
    ];
    let mut failures = Vec::new();
    for (what, path, statuses, code) in &cases {
        match http::get_upgrade(ctx.port, path, T).await {
            Ok(resp) => {
                if let Err(e) = check_error(&format!("{what} ({path})"), &resp, statuses, *code) {
                    failures.push(e);
                }
            }
            Err(e) => failures.push(format!("{what} ({path}): {e}")),
        }
    }
    // The boundary: 64 chars of every allowed character class upgrades.
    let resp = http::get_upgrade(ctx.port, &format!("/rooms/{ok_room}/ws?{good}"), T).await?;
    if resp.status != 101 {
        failures.push(format!("a 64-char room should upgrade, got {} {}", resp.status, resp.body));
    }
    let resp =
        http::get_upgrade(ctx.port, &format!("/rooms/Az09._:-x/ws?session={}", "s".repeat(64)), T)
            .await?;
    if resp.status != 101 {
        failures.push(format!(
            "room `Az09._:-x` with a 64-char session should upgrade, got {} {}",
            resp.status, resp.body
        ));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}
