//! The React hooks on a server: `renderToString` of a component using every
//! hook opens no socket, registers no shared room, reads nothing of a page,
//! and renders the idle snapshots (what the browser's first render, the
//! hydration, renders too).

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createElement as h, type ReactElement } from "react";
import { renderToString } from "react-dom/server";

import type { Json } from "../src/protocol.js";
import { useMessages, usePresence, useRoom, useRoomState, useSignal, useStatus } from "../src/react.js";
import { sharedRooms } from "../src/shared.js";
import { world } from "./fakes.js";

describe("the hooks under server rendering", () => {
  it("render idle snapshots and connect nothing", () => {
    const w = world();
    const before = sharedRooms();
    let handlers = 0;
    function Lobby(): ReactElement {
      const room = useRoom({ room: "ssr-lobby", url: "https://rooms.example", env: w.env, presence: { name: "ada" } });
      const status = useStatus(room);
      const presence = usePresence(room);
      const topic = useRoomState(room, "topic");
      useMessages(room, undefined, () => handlers++);
      useSignal(room, "cursor", () => handlers++);
      return h("p", null, `${status.state}|${presence.count}|${String((topic?.value as Json) ?? "none")}|${status.session}`);
    }
    const html = renderToString(h(Lobby));
    assert.equal(html, "<p>idle|0|none|</p>");
    assert.equal(w.sockets.length, 0, "no socket");
    assert.equal(w.session.map.size, 0, "no session looked up");
    assert.equal(sharedRooms(), before, "no room registered (effects never run on a server)");
    assert.equal(handlers, 0);
  });
});
