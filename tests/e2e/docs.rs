//! The document kind (`/docs/{room}`) with stock Yjs editors: `y-websocket`'s provider from npm,
//! unmodified, in Node (tests/docs/editors.mjs runs each scenario of tests/docs/scenarios.mjs
//! and prints what its editors ended with; the checks are here; client/e2e/editor.test.ts
//! plays the same scenarios in Chromium). Converging, a late joiner, an offline edit, a read-only
//! member, a backend's edit, awareness of a killed tab, and a restart that loses nothing saved.

use std::time::Duration;

use homeroom::auth::{mint, Claims, Key};
use serde_json::{json, Value};

use crate::check;
use crate::edge_support::{
    bearer_admin, check_refusal, check_token_close, get, now_secs, on, token_for, ADMIN_KEY,
    SECRET, T, TOKENS,
};
use crate::harness::{alone, Spec};
use crate::runtime::Runtime;
use crate::support::{self, R};

pub fn trials() -> Vec<Spec> {
    vec![
        alone("docs::a_restart_loses_no_saved_edit", restart_loses_nothing_saved),
        on("docs::two_stock_editors_converge_and_a_late_joiner_gets_it_all", &TOKENS, converge),
        on("docs::an_offline_edit_merges_on_reconnect", &TOKENS, offline),
        on("docs::a_read_only_members_update_is_refused_and_changes_nothing", &TOKENS, read_only),
        on(
            "docs::types_nested_past_the_bound_are_refused_and_the_instance_stays_up",
            &TOKENS,
            deep,
        ),
        on("docs::a_member_holds_at_most_ten_sockets_of_a_document", &TOKENS, socket_cap),
        on(
            "docs::a_chain_of_twenty_thousand_clients_is_taken_and_the_instance_stays_up",
            &TOKENS,
            chain,
        ),
        on(
            "docs::sockets_that_stop_reading_or_answer_blind_are_closed_4013_and_readers_read_on",
            &TOKENS,
            hog,
        ),
        on("docs::a_backend_edit_reaches_every_editor", &TOKENS, server_edit),
        on("docs::a_killed_tabs_awareness_goes_for_the_others", &TOKENS, awareness_of_killed_tab),
        on("docs::strangers_are_refused_and_reads_create_nothing", &TOKENS, strangers),
        on(
            "docs::a_restored_version_holds_against_an_editor_with_the_newer_state",
            &TOKENS,
            versions,
        ),
        on("docs::our_provider_takes_a_new_token_and_says_saved_when_stored", &TOKENS, provider),
        on("docs::the_kinds_rules_refuse_edit_and_lock_a_note", &TOKENS, rules),
        on(
            "docs::our_provider_probes_the_endpoints_and_takes_the_one_that_answers",
            &TOKENS,
            regions,
        ),
    ]
}

/// Runs scenario `name` of tests/docs/editors.mjs; its last line of output, as JSON.
async fn editors(name: &str, args: Value) -> R<Value> {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = tokio::process::Command::new("node")
        .arg("tests/docs/editors.mjs")
        .arg(name)
        .arg(args.to_string())
        .current_dir(root)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .map_err(|_| format!("{name}: the editors took more than 60 s"))?
        .map_err(|e| format!("{name}: node: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    check!(
        out.status.success(),
        "{name}: the editors failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).map_err(|e| format!("{name}: no JSON result ({e}): {stdout}"))
}

/// A token for the document `room` (kind `docs`), read-only if `read_only`.
fn doc_token(room: &str, sub: &str, read_only: bool) -> String {
    kind_token("docs", room, sub, read_only)
}

fn kind_token(kind: &str, room: &str, sub: &str, read_only: bool) -> String {
    if !read_only {
        return token_for(kind, room, sub);
    }
    let info = serde_json::value::RawValue::from_string(r#"{"read_only":true}"#.into()).unwrap();
    let claims =
        Claims { info: Some(info), ..Claims::new(room, sub, now_secs() + 3600).with_kind(kind) };
    mint(&Key::new(SECRET.as_bytes()), &claims)
}

/// A token for the document `room` that expired a minute ago.
fn expired_token(room: &str, sub: &str) -> String {
    let claims = Claims::new(room, sub, now_secs() - 60).with_kind("docs");
    mint(&Key::new(SECRET.as_bytes()), &claims)
}

fn args_for(port: u16, room: &str) -> Value {
    args_for_kind(port, "docs", room)
}

/// The scenarios' arguments for a room of the document kind `kind`.
fn args_for_kind(port: u16, kind: &str, room: &str) -> Value {
    let tokens: serde_json::Map<String, Value> = ["ann", "bob", "cat"]
        .iter()
        .map(|u| (u.to_string(), Value::String(kind_token(kind, room, u, false))))
        .chain([("reader".to_string(), Value::String(kind_token(kind, room, "reader", true)))])
        .chain([("expired".to_string(), Value::String(expired_token(room, "ann")))])
        .collect();
    json!({"url": format!("ws://127.0.0.1:{port}/{kind}"), "room": room, "tokens": tokens, "admin": ADMIN_KEY})
}

async fn converge(ctx: support::Ctx) -> R {
    let room = support::room("doc-converge");
    let r = editors("converge", args_for(ctx.port, &room)).await?;
    let ann = r["ann"].as_str().unwrap_or_default();
    check!(ann.len() == 240, "ann ended with {ann:?}");
    for i in 0..20 {
        check!(ann.contains(&format!("ann{i:02};")), "ann's word {i} is there: {ann:?}");
        check!(ann.contains(&format!("bob{i:02};")), "bob's word {i} reached ann: {ann:?}");
    }
    check!(r["bob"] == r["ann"] && r["cat"] == r["ann"], "not converged: {r}");
    Ok(())
}

async fn offline(ctx: support::Ctx) -> R {
    let room = support::room("doc-offline");
    let r = editors("offline", args_for(ctx.port, &room)).await?;
    check!(r["apart"] == true, "bob's edit was offline, the texts differed: {r}");
    let ann = r["ann"].as_str().unwrap_or_default();
    check!(ann.contains("offline-bob ") && ann.contains("online-ann "), "both edits kept: {r}");
    check!(r["bob"] == r["ann"], "merged: {r}");
    Ok(())
}

/// A member's update nesting 5,000 maps is refused `too_deep` and the victim's socket never
/// drops (before the bound, the room's Wasm exhausted its stack deleting, collecting or reading
/// such a chain, and the reset took every room of the instance); a chain of exactly the bound is
/// taken, read as JSON and deleted without harm.
async fn deep(ctx: support::Ctx) -> R {
    let room = support::room("doc-deep");
    let mut args = args_for(ctx.port, &room);
    args["deep"] = json!(5_000);
    args["bound"] = json!(homeroom::doc::MAX_NESTING);
    let r = editors("deep", args).await?;
    check!(r["refused"] == json!([{"index": 2, "code": "too_deep"}]), "mallory was told {r}");
    check!(r["honestRefused"] == json!([]), "the honest chain was refused: {r}");
    check!(r["drops"] == json!(0), "the victim's socket dropped: {r}");
    check!(r["json_depth"] == json!(homeroom::doc::MAX_NESTING), "the backend read {r}");
    check!(r["victim"] == json!("before after!"), "the victim ended with {r}");
    Ok(())
}

/// A member opens sockets to one document: ten stay open (each gets the room's sync step 1),
/// the eleventh is closed 4429 `too_many_connections` at once. (Before the cap, sockets without
/// end held awareness and broadcasts without end.)
async fn socket_cap(ctx: support::Ctx) -> R {
    let room = support::room("doc-cap");
    let mut held = Vec::new();
    for n in 0..10 {
        // Each gets the room's first word to a socket it took: a sync step 1 (binary).
        held.push(doc_socket(ctx.port, &room, "mallory").await.map_err(|e| format!("#{n}: {e}"))?);
    }
    let path = format!("/docs/{room}?token={}", doc_token(&room, "mallory", false));
    let eleventh = crate::edge_support::upgrade_closed(ctx.port, &path).await?;
    check!(eleventh == (4429, "too_many_connections".into()), "the eleventh: {eleventh:?}");
    drop(held);
    Ok(())
}

/// An update of 20,000 Yjs clients, each typing a character after the one before's (by hand, as
/// `y-protocols` frames it; `src/doc/tests/chains.rs` builds the same).
fn chain_update(clients: u64) -> Vec<u8> {
    use homeroom::doc::yrs::encoding::write::Write;
    let mut u = Vec::new();
    u.write_var(clients);
    for client in 1..=clients {
        u.write_var(1u32);
        u.write_var(client);
        u.write_var(0u32);
        if client == 1 {
            u.write_u8(4); // a string with no origin: its parent, the root text, follows
            u.write_var(1u32);
            u.write_string("text");
        } else {
            u.write_u8(0x80 | 4); // a string after client - 1's
            u.write_var(client - 1);
            u.write_var(0u32);
        }
        u.write_string("x");
    }
    u.write_var(0u32);
    u
}

/// A document socket of `sub`, after the room's first word to it (its sync step 1, binary).
async fn doc_socket(
    port: u16,
    room: &str,
    sub: &str,
) -> R<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>>
{
    use futures_util::StreamExt;
    let url = format!("ws://127.0.0.1:{port}/docs/{room}?token={}", doc_token(room, sub, false));
    let (mut ws, _) = tokio::time::timeout(T, tokio_tungstenite::connect_async(url.as_str()))
        .await
        .map_err(|_| format!("{sub}: the upgrade timed out"))?
        .map_err(|e| format!("{sub}: {e}"))?;
    let first = tokio::time::timeout(T, ws.next()).await.map_err(|_| format!("{sub}: silent"))?;
    check!(
        matches!(first, Some(Ok(tokio_tungstenite::tungstenite::Message::Binary(_)))),
        "{sub} got {first:?}"
    );
    Ok(ws)
}

/// Mallory sends one update of a 20,000-client chain. yrs 0.28.1 recursed once per client as it
/// integrated it, past the Wasm's stack ("Maximum call stack size exceeded": the update lost
/// before it was stored, the room's memory rebuilt empty, every room of the instance at risk);
/// patched (vendor/README.md), the room takes it, a late joiner reads all of it, and a
/// bystander in another document never drops.
async fn chain(ctx: support::Ctx) -> R {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let room = support::room("doc-chain");
    let mut bystander = doc_socket(ctx.port, &support::room("doc-bystander"), "ann").await?;
    // A member of the document who reads along (the room hands her the update).
    let victim = doc_socket(ctx.port, &room, "ann").await?;
    let mut mallory = doc_socket(ctx.port, &room, "mallory").await?;
    let frame = homeroom::doc::wire::update(&chain_update(20_000));
    mallory.send(Message::Binary(frame.into())).await.map_err(|e| format!("send: {e}"))?;
    // Her own ask comes after her update on her socket: the room has taken it (or lost it) by
    // the time it answers.
    let hers = read_all(&mut mallory, "mallory").await?;
    check!(hers.len() == 20_000, "the room answered mallory {} characters, not 20,000", hers.len());
    // A late joiner asks for everything; the room answers with the chain.
    let mut late = doc_socket(ctx.port, &room, "bob").await?;
    let text = read_all(&mut late, "the late joiner").await?;
    check!(text.len() == 20_000, "the late joiner read {} characters, not 20,000", text.len());
    // The bystander's document still answers: its socket did not drop.
    read_all(&mut bystander, "the bystander").await?;
    drop((mallory, victim));
    Ok(())
}

/// Asks the room for the whole document on `ws` (a sync step 1 with an empty state vector) and
/// returns the text of its answer (the sync step 2), skipping whatever comes before it.
async fn read_all(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    who: &str,
) -> R<String> {
    use futures_util::{SinkExt, StreamExt};
    use homeroom::doc::wire::{self, Message as Y};
    use homeroom::doc::yrs::updates::decoder::Decode;
    use homeroom::doc::yrs::updates::encoder::Encode;
    use homeroom::doc::yrs::{Doc, GetString, StateVector, Transact, Update};
    use tokio_tungstenite::tungstenite::Message;
    let ask = wire::sync_step1(&StateVector::default().encode_v1());
    ws.send(Message::Binary(ask.into())).await.map_err(|e| format!("{who}: ask: {e}"))?;
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let next = tokio::time::timeout_at(deadline, ws.next())
            .await
            .map_err(|_| format!("{who}: no sync step 2"))?;
        let Some(Ok(Message::Binary(bytes))) = next else {
            return Err(format!("{who}'s socket: {next:?}"));
        };
        if let Ok(Y::Update { bytes, step2: true, .. }) = wire::decode(&bytes) {
            let doc = Doc::new();
            let update = Update::decode_v1(&bytes).map_err(|e| format!("{who}: {e}"))?;
            doc.transact_mut().apply_update(update).map_err(|e| format!("{who}: {e}"))?;
            let text = doc.get_or_insert_text("text");
            let s = text.get_string(&doc.transact());
            return Ok(s);
        }
    }
}

/// A socket that stops reading while another member writes 6 MB is closed 4013
/// `slow_reader` after at most its window (4 MiB) and a frame; the readers stay connected and
/// converge.
/// Two sockets that read nothing while another member writes 6 MB (tests/docs/scenarios.mjs,
/// `hog`): one answers nothing, and is closed `slow_reader` at its window; Mallory's answers as
/// if it read, knowing every block from a socket of hers that reads, and is closed
/// `mark_unread` at its first mark (before marks asked for what only a reader has, she was
/// handed everything, for the runtime to buffer). The readers answer every mark over text,
/// maps, pictures and XML.
async fn hog(ctx: support::Ctx) -> R {
    let room = support::room("doc-hog");
    let r = editors("hog", args_for(ctx.port, &room)).await?;
    check!(r["hog"]["close"] == json!({"code": 4013, "reason": "slow_reader"}), "the hog: {r}");
    check!(
        r["blind"]["close"] == json!({"code": 4013, "reason": "mark_unread"}),
        "the blind socket: {r}"
    );
    for who in ["hog", "blind"] {
        let received = r[who]["received"].as_u64().unwrap_or(u64::MAX);
        check!(received <= 4 * 1024 * 1024 + 64 * 1024, "{who} was handed {received} bytes: {r}");
    }
    check!(r["drops"] == json!(0) && r["same"] == json!(true), "the readers: {r}");
    Ok(())
}

async fn read_only(ctx: support::Ctx) -> R {
    let room = support::room("doc-readonly");
    let r = editors("readonly", args_for(ctx.port, &room)).await?;
    check!(r["writer"] == "kept ", "the writer saw nothing of the vandal: {r}");
    check!(r["fresh"] == "kept ", "nor did a fresh reader (nothing stored): {r}");
    // The stock provider keeps the refused change locally: it is the reader's own view.
    check!(r["reader"] == "kept vandal", "the reader's local view: {r}");
    let refused = r["refused"].as_array().cloned().unwrap_or_default();
    check!(refused.iter().all(|x| x["code"] == "read_only"), "refused read_only: {r}");
    Ok(())
}

async fn server_edit(ctx: support::Ctx) -> R {
    let room = support::room("doc-server");
    let r = editors("serveredit", args_for(ctx.port, &room)).await?;
    check!(r["status"] == 200, "POST update: {r}");
    let want = "by hand. by the assistant.";
    check!(r["ann"] == want && r["bob"] == want, "both editors: {r}");
    check!(r["json"]["text"] == want, "the backend reads it as JSON: {r}");
    Ok(())
}

async fn awareness_of_killed_tab(ctx: support::Ctx) -> R {
    let room = support::room("doc-awareness");
    let r = editors("awareness", args_for(ctx.port, &room)).await?;
    let ms = r["gone_ms"].as_u64().unwrap_or(u64::MAX);
    // The socket's close reaches the room at once when the process dies; the documented
    // bound for a socket that goes silent without closing is the 30 s timeout.
    check!(ms <= 5_000, "ann's state went {ms} ms after her process was killed: {r}");
    check!(r["names"] == json!(["bob"]), "only bob is left: {r}");
    Ok(())
}

async fn provider(ctx: support::Ctx) -> R {
    let room = support::room("doc-provider");
    let r = editors("provider", args_for(ctx.port, &room)).await?;
    check!(r["calls"].as_u64() >= Some(2), "a second token after the refused one: {r}");
    check!(r["savingAtOnce"] == true, "an edit is not saved when made: {r}");
    check!(r["saved"] == true && r["text"] == "stored, not merely sent", "then saved: {r}");
    let events = r["events"].as_array().cloned().unwrap_or_default();
    check!(events.contains(&json!(false)) && events.contains(&json!(true)), "heard both: {r}");
    let refusals = r["refusals"].as_array().cloned().unwrap_or_default();
    let told = !refusals.is_empty() && refusals.iter().all(|x| x["code"] == "read_only");
    check!(told, "the reader is told read_only: {r}");
    check!(r["reader"] == false, "and the reader's edit is not saved: {r}");
    Ok(())
}

/// The notes kind (examples/notes) under stock editors: its rules refuse a title past the
/// bound (nobody sees it), edit as the room from a backend route, and lock the note.
async fn rules(ctx: support::Ctx) -> R {
    let room = support::room("doc-rules");
    let r = editors("rules", args_for_kind(ctx.port, "notes", &room)).await?;
    check!(r["bobTitle"] == "Minutes", "bob never saw the long title: {r}");
    let refused = r["refused"].as_array().cloned().unwrap_or_default();
    check!(
        refused.len() == 1 && refused[0]["code"] == "title_too_long",
        "ann is told title_too_long: {r}"
    );
    check!(r["appended"] == 200 && r["locked"] == 200, "the backend's routes: {r}");
    let want =
        json!({"title": "Minutes", "body": "Written by the room.", "meta": {"locked": true}});
    check!(r["json"] == want, "stored: the room's edit, nothing refused: {r}");
    let outline = json!({"title": "Minutes", "body_chars": 20, "locked": true});
    check!(r["outline"] == outline, "a member reads the outline: {r}");
    Ok(())
}

/// `homeroom/yjs` given a dead endpoint first and the live one second: it connects, syncs and
/// saves through the live one, under the kind's path.
async fn regions(ctx: support::Ctx) -> R {
    let room = support::room("doc-regions");
    let r = editors("regions", args_for(ctx.port, &room)).await?;
    let want = format!("ws://127.0.0.1:{}/docs", ctx.port);
    check!(r["serverUrl"] == json!(want), "the endpoint that answered: {r}");
    check!(r["saved"] == true && r["text"] == "through the endpoint that answered", "{r}");
    Ok(())
}

async fn versions(ctx: support::Ctx) -> R {
    let room = support::room("doc-versions");
    let r = editors("versions", args_for(ctx.port, &room)).await?;
    check!(r["saved"] == 200 && r["restored"] == 200, "save and restore: {r}");
    check!(
        r["ann"] == "the first draft" && r["bob"] == "the first draft",
        "both read the version: {r}"
    );
    check!(
        r["versions"] == json!(["v1"]) && r["kept"] == "the first draft",
        "the version as kept: {r}"
    );
    // Past the bound of 20 names: refused, the others kept.
    let admin = bearer_admin();
    let headers = [("Authorization", admin.as_str())];
    for i in 0..25 {
        let path = format!("/docs/{room}/versions?name=n{i}");
        let resp = crate::http::post(ctx.port, &path, &headers, "", T).await?;
        let want = if i < 19 { 200 } else { 409 };
        check!(resp.status == want, "version {i}: {} {}", resp.status, resp.body);
    }
    Ok(())
}

/// A socket without a token, or with another kind's, is closed 4401 with the code; the
/// backend routes want the admin key; the rules' routes a token; reading a document that was
/// never created answers 404 and creates nothing (a second read still finds none).
async fn strangers(ctx: support::Ctx) -> R {
    let room = support::room("doc-strangers");
    check_token_close("no token", ctx.port, &format!("/docs/{room}"), "token_missing").await?;
    let rooms_token = token_for("rooms", &room, "ann");
    let path = format!("/docs/{room}?token={rooms_token}");
    check_token_close("a token for another kind", ctx.port, &path, "token_wrong_kind").await?;
    let json = format!("/docs/{room}/json?types=text:text");
    let member = format!("Bearer {}", doc_token(&room, "ann", false));
    check_refusal(
        "json as a member",
        &get(ctx.port, &json, &[("Authorization", &member)]).await?,
        401,
        "bad_admin_key",
    )?;
    for _ in 0..2 {
        let resp = get(ctx.port, &json, &[("Authorization", &bearer_admin())]).await?;
        check_refusal("json of no document", &resp, 404, "room_not_found")?;
    }
    // A rules route (the notes kind's): an outsider is stopped at the edge; a member's read of
    // a note never created answers 404 and creates none either.
    let outline = format!("/notes/{room}/outline");
    check_refusal(
        "a rules route without a token",
        &get(ctx.port, &outline, &[]).await?,
        401,
        "token_missing",
    )?;
    let member = format!("Bearer {}", kind_token("notes", &room, "ann", false));
    let resp = get(ctx.port, &outline, &[("Authorization", &member)]).await?;
    check_refusal("a member's read of no note", &resp, 404, "room_not_found")?;
    let notes_json = format!("/notes/{room}/json?types=title:text");
    let resp = get(ctx.port, &notes_json, &[("Authorization", &bearer_admin())]).await?;
    check_refusal("and still no note", &resp, 404, "room_not_found")?;
    Ok(())
}

/// Edits saved (the room said so), a hard kill, a new runtime on the same storage: a fresh,
/// empty editor reads every saved edit, with no old editor around to resend them.
async fn restart_loses_nothing_saved() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-doc-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let vars = ["--var", &format!("AUTH_SECRET:{SECRET}")];
    let mut first = Runtime::start_with("doc-1", dir.path(), &vars).await?;
    let room = support::room("doc-restart");
    let text = "every word of this was saved before the kill. ".repeat(3);
    let mut args = args_for(first.port, &room);
    args["text"] = json!(text);
    let wrote = editors("write", args).await.map_err(|e| format!("{e}\n{}", first.log.tail(40)))?;
    check!(wrote["text"] == json!(text), "the writer's text: {wrote}");
    // Bob's tab shows a cursor and never writes, reloaded 17 times: each load a new Yjs client.
    let shown = bob_shows_clients(first.port, &room, 17).await?;
    first.kill_hard().await;
    let second = Runtime::start_with("doc-2", dir.path(), &vars).await?;
    let read = editors("read", args_for(second.port, &room))
        .await
        .map_err(|e| format!("{e}\n{}", second.log.tail(40)))?;
    check!(read["text"] == json!(text), "after the restart a fresh editor reads {read}");
    // The writer's Yjs client is still the writer's after the restart (its binding is stored):
    // Mallory, writing at the clocks the writer's tab would use next, is refused, and the text
    // she would have put in front is nowhere.
    let mut mallory = doc_socket(second.port, &room, "mallory").await?;
    let forged = forge_for_the_only_client(&mut mallory, "EVIL ").await?;
    mallory_sends(&mut mallory, forged).await?;
    let after = read_all(&mut mallory, "mallory").await?;
    check!(after == text, "the text after Mallory wrote for the writer's client: {after:?}");
    // Bob's newest shown client is still his after the restart, though no cursor shows it now
    // (its binding is stored from his awareness); his oldest made way for his newer ones (its
    // row deleted): anyone may write for it.
    let newest = *shown.last().ok_or("no client shown")?;
    mallory_sends(&mut mallory, typed_by(newest, "EVIL ")).await?;
    mallory_sends(&mut mallory, typed_by(shown[0], "MINE ")).await?;
    let after = read_all(&mut mallory, "mallory").await?;
    check!(
        after.contains("MINE ") && !after.contains("EVIL ") && after.contains(&text),
        "the text after Mallory wrote for Bob's oldest and newest shown clients: {after:?}"
    );
    Ok(())
}

/// Bob shows a cursor `loads` times, each on a new socket for a new Yjs client, as a tab
/// reloaded that many times without writing (a socket binds one); returns the clients, oldest
/// first.
async fn bob_shows_clients(port: u16, room: &str, loads: u64) -> R<Vec<u64>> {
    use futures_util::SinkExt;
    use homeroom::doc::wire::{self, Entry};
    use tokio_tungstenite::tungstenite::Message;
    let clients: Vec<u64> = (0..loads).map(|i| 7_000 + i).collect();
    for &client in &clients {
        let mut bob = doc_socket(port, room, "bob").await?;
        let entries = [Entry { client, clock: 1, json: r#"{"name":"bob"}"#.into() }];
        let frame = wire::awareness(entries.iter());
        bob.send(Message::Binary(frame.into())).await.map_err(|e| format!("bob: {e}"))?;
        // Answered after the frame before it was handled (and its binding stored).
        read_all(&mut bob, "bob").await?;
    }
    Ok(clients)
}

/// An update of Yjs client `client` typing `text` at the start of the document's text.
fn typed_by(client: u64, text: &str) -> Vec<u8> {
    use homeroom::doc::yrs::{Doc, Text, Transact};
    let doc = Doc::with_client_id(client);
    let root = doc.get_or_insert_text("text");
    let mut txn = doc.transact_mut();
    root.insert(&mut txn, 0, text);
    txn.encode_update_v1()
}

/// Reads the whole document on `ws` and makes the update its only Yjs client would make next by
/// writing `text` in front.
async fn forge_for_the_only_client(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    text: &str,
) -> R<Vec<u8>> {
    use futures_util::{SinkExt, StreamExt};
    use homeroom::doc::wire::{self, Message as Y};
    use homeroom::doc::yrs::updates::decoder::Decode;
    use homeroom::doc::yrs::updates::encoder::Encode;
    use homeroom::doc::yrs::{Doc, ReadTxn, StateVector, Text, Transact, Update};
    use tokio_tungstenite::tungstenite::Message;
    let ask = wire::sync_step1(&StateVector::default().encode_v1());
    ws.send(Message::Binary(ask.into())).await.map_err(|e| format!("ask: {e}"))?;
    let deadline = tokio::time::Instant::now() + T;
    let all = loop {
        let next = tokio::time::timeout_at(deadline, ws.next()).await.map_err(|_| "no step 2")?;
        let Some(Ok(Message::Binary(bytes))) = next else {
            return Err(format!("the socket: {next:?}"));
        };
        if let Ok(Y::Update { bytes, step2: true, .. }) = wire::decode(&bytes) {
            break bytes;
        }
    };
    let seen = Doc::new();
    seen.transact_mut()
        .apply_update(Update::decode_v1(&all).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let clients: Vec<u64> = seen.transact().state_vector().iter().map(|(c, _)| c.get()).collect();
    let [victim] = clients[..] else {
        return Err(format!("the document's clients: {clients:?}"));
    };
    let forger = Doc::with_client_id(victim);
    forger
        .transact_mut()
        .apply_update(Update::decode_v1(&all).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let root = forger.get_or_insert_text("text");
    let mut txn = forger.transact_mut();
    root.insert(&mut txn, 0, text);
    Ok(txn.encode_update_v1())
}

async fn mallory_sends(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    update: Vec<u8>,
) -> R {
    use futures_util::SinkExt;
    let frame = homeroom::doc::wire::update(&update);
    ws.send(tokio_tungstenite::tungstenite::Message::Binary(frame.into()))
        .await
        .map_err(|e| format!("send: {e}"))
}
