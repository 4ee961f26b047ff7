// app.jsx: a room in a React app with homeroom/react. Who is here, one
// shared state key, a chat, live cursors, and the connection as the client
// reports it (refusals and reconnects included). Open it in two tabs:
// http://127.0.0.1:5173/?user=alice and ?user=bob (same ?room=).
//
// The component tree is wrapped in <StrictMode>: useRoom keeps one socket
// per room through its mount → unmount → mount.

import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { useMessages, usePresence, useRoom, useRoomState, useSignal, useStatus } from "homeroom/react";

const params = new URLSearchParams(location.search);
const USER = params.get("user") ?? "guest-" + Math.random().toString(36).slice(2, 8);
const ROOM = params.get("room") ?? "lobby";
/** Where the homeroom deployment is (server.mjs writes it into the page). */
const HOMEROOM_URL = document.querySelector('meta[name="homeroom-url"]').content;

/** The last token this page was given (the HTTP presence call uses it too). */
let lastToken = null;

/**
 * The room's token comes from this app's own server, which knows who the
 * user is (server.mjs). The client calls it before connecting, after a
 * refusal (4401: expired, bad signature, ...) and when the token is about
 * to expire. Module-level, so it is stable across renders.
 */
async function getToken() {
  const res = await fetch(`/token?${new URLSearchParams({ user: USER, room: ROOM })}`, { cache: "no-store" });
  if (!res.ok) throw new Error(`token endpoint answered ${res.status}`);
  lastToken = (await res.json()).token;
  return lastToken;
}

function App() {
  const room = useRoom({ url: HOMEROOM_URL, room: ROOM, getToken, presence: { name: USER } });
  return (
    <main>
      <Connection room={room} />
      <People room={room} />
      <Topic room={room} />
      <Cursors room={room} />
      <Chat room={room} />
      <HttpPresence />
    </main>
  );
}

/** The connection: state, resume, and every close and error the client saw. */
function Connection({ room }) {
  const status = useStatus(room);
  const [closes, setCloses] = useState([]);
  const [errors, setErrors] = useState([]);
  useEffect(() => {
    let last = room.status.lastClose;
    const offStatus = room.on("status", (s) => {
      if (s.lastClose && s.lastClose !== last) setCloses((c) => [...c, `${s.lastClose.code} ${s.lastClose.reason}`.trim()]);
      last = s.lastClose;
    });
    const offError = room.on("error", (e) => setErrors((list) => [...list, e.code]));
    return () => {
      offStatus();
      offError();
    };
  }, [room]);
  return (
    <section>
      <h2>Connection</h2>
      <p>
        <strong id="status" data-state={status.state}>{status.state}</strong>
        {status.why && status.state !== "open" ? <span className="muted"> · {status.why}</span> : null}
        {" · "}
        <span id="resumed">{status.resumed ? `resumed (${status.missed} missed)` : "fresh"}</span>
        {" · seq "}
        <span id="seq">{status.seq}</span> <button id="reconnect" onClick={() => room.reconnect()}>Reconnect</button>
      </p>
      <p className="muted">
        Closes seen: <span id="closes">{closes.join(", ") || "none"}</span> · Errors: <span id="errors">{errors.join(", ") || "none"}</span>
      </p>
    </section>
  );
}

/** Who is here: one line per member (session), with their name and cursor. */
function People({ room }) {
  const presence = usePresence(room);
  return (
    <section>
      <h2>
        Here now: <span id="count">{presence.count}</span>
      </h2>
      <ul id="people">
        {[...presence.members].map(([session, m]) => (
          <li key={session} data-session={session} data-name={m.state.name ?? ""} data-x={m.state.x ?? ""}>
            {m.state.name ?? m.user} <span className="muted">({m.region}{session === room.session ? ", you" : ""})</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** One key of the room state, set by anyone, shown to everyone. */
function Topic({ room }) {
  const topic = useRoomState(room, "topic");
  const [draft, setDraft] = useState("");
  return (
    <section>
      <h2>Topic</h2>
      <p id="topic" data-version={topic?.version ?? 0}>
        {topic ? String(topic.value) : "(none yet)"}
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          room.set("topic", draft).catch((err) => console.warn("topic not set:", err.code));
          setDraft("");
        }}
      >
        <input id="topic-input" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="New topic" />{" "}
        <button id="topic-set">Set</button>
      </form>
    </section>
  );
}

/**
 * Live cursors, written naively: every pointer move sets this member's
 * presence and sends a signal. The client keeps that safe (latest wins,
 * paced under the room's limits, the last position always sent).
 */
function Cursors({ room }) {
  const [theirs, setTheirs] = useState(null);
  useSignal(room, "cursor", (s) => setTheirs({ session: s.session, ...s.data }));
  const move = (e) => {
    const at = { x: Math.round(e.clientX), y: Math.round(e.clientY) };
    room.setPresence({ name: USER, ...at });
    room.signal("cursor", at);
  };
  return (
    <section>
      <h2>Cursors</h2>
      <div id="pad" onPointerMove={move}>
        move the pointer here
      </div>
      <p className="muted">
        Last cursor from another tab:{" "}
        <span id="their-cursor" data-x={theirs?.x ?? ""} data-y={theirs?.y ?? ""}>
          {theirs ? `${theirs.x}, ${theirs.y}` : "none yet"}
        </span>
      </p>
    </section>
  );
}

/** Durable messages: ordered, stored, replayed on resume. */
function Chat({ room }) {
  const [lines, setLines] = useState([]);
  const [draft, setDraft] = useState("");
  useMessages(room, "chat", (m) => setLines((l) => [...l, { seq: m.seq, from: m.user, text: m.data?.text }]));
  return (
    <section>
      <h2>Chat</h2>
      <ul id="chat">
        {lines.map((l) => (
          <li key={l.seq} data-seq={l.seq}>
            <span className="muted">{l.from}:</span> {l.text}
          </li>
        ))}
      </ul>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (draft) room.publish("chat", { text: draft }).catch((err) => console.warn("not sent:", err.code));
          setDraft("");
        }}
      >
        <input id="chat-input" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="Say something" />{" "}
        <button id="chat-send">Send</button>
      </form>
    </section>
  );
}

/**
 * The member list over HTTP (GET /rooms/{room}/presence) from this page's
 * origin: the deployment must list it in CORS_ORIGINS.
 */
function HttpPresence() {
  const [text, setText] = useState("not loaded");
  const load = async () => {
    try {
      const res = await fetch(`${HOMEROOM_URL}/rooms/${encodeURIComponent(ROOM)}/presence`, {
        headers: { Authorization: `Bearer ${lastToken}` },
      });
      const body = await res.json();
      setText(res.ok ? `${Object.keys(body.members).length} members` : `refused: ${body.error}`);
    } catch (e) {
      setText(`failed: ${e.message}`);
    }
  };
  return (
    <section>
      <h2>Presence over HTTP</h2>
      <p>
        <span id="http-presence">{text}</span> <button id="http-presence-load" onClick={load}>Load</button>
      </p>
    </section>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
