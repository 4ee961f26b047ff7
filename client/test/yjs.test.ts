//! DocProvider's `saved`: what the room's `saved` and `refused` messages make of it, over a fake
//! socket (the provider's own protocol handling, y-websocket's underneath).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as encoding from "lib0/encoding";
import * as sync from "y-protocols/sync";
import * as Y from "yjs";

import { DocProvider } from "../src/yjs.js";

/** A socket the test opens and speaks for. */
class FakeSocket {
  static last: FakeSocket | null = null;
  binaryType = "arraybuffer";
  readyState = 0;
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: ArrayBuffer }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  onerror: ((e: unknown) => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.last = this;
  }
  send(): void {}
  close(): void {
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.();
  }
  /** The room's sync step 2 (its whole document, here an empty one): the provider is synced. */
  syncStep2(): void {
    const enc = encoding.createEncoder();
    encoding.writeVarUint(enc, 0);
    sync.writeSyncStep2(enc, new Y.Doc());
    const bytes = encoding.toUint8Array(enc);
    this.onmessage?.({ data: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
  }
  /** The room's extension message `kind` (100 saved, 101 refused) with `n` and `code`. */
  say(kind: number, n: number, code?: string): void {
    const enc = encoding.createEncoder();
    encoding.writeVarUint(enc, kind);
    encoding.writeVarUint(enc, n);
    if (code !== undefined) encoding.writeVarString(enc, code);
    const bytes = encoding.toUint8Array(enc);
    this.onmessage?.({ data: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
  }
}

describe("DocProvider saved", () => {
  it("stays false after a refused edit, even once a later edit is saved", () => {
    // The room counts a refused update message as answered: its `saved 3` after a refused
    // second message and a taken third made `saved` true, the refused change stored nowhere.
    const doc = new Y.Doc();
    const p = new DocProvider("ws://rooms.example/docs", "d1", doc, {
      WebSocketPolyfill: FakeSocket as unknown as typeof WebSocket,
    });
    const ws = FakeSocket.last!;
    ws.open();
    ws.say(100, 1); // the step 2 that answered the room's step 1
    assert.equal(p.saved, true);
    const text = doc.getText("text");
    text.insert(0, "a long paragraph the room had no room for");
    assert.equal(p.saved, false, "saving");
    ws.say(101, 2, "document_too_large");
    text.delete(0, 5); // deletes only: the room takes it
    ws.say(100, 3);
    assert.equal(p.saved, false, "the refused insertion is not stored");
    // A new socket: its step 2 carries the change again; taken this time, all is saved.
    ws.onclose?.({ code: 1006, reason: "" });
    p.connect();
    const next = FakeSocket.last!;
    assert.notEqual(next, ws);
    next.open();
    next.say(100, 1);
    assert.equal(p.saved, true);
    p.destroy();
    doc.destroy(); // and the awareness its provider made (a timer of its own)
  });

  it("keeps connecting across token expiries, each after a socket that synced", async () => {
    // Each expiry of a token closes 4401; counted for good (never reset by a sync), the
    // provider stopped for good at the fourth: an editor with hourly tokens, after four hours.
    const doc = new Y.Doc();
    let tokens = 0;
    const p = new DocProvider("ws://rooms.example/docs", "d2", doc, {
      WebSocketPolyfill: FakeSocket as unknown as typeof WebSocket,
      token: () => `t${++tokens}`,
      baseMs: 1,
      capMs: 1,
    });
    const tick = () => new Promise((resolve) => setTimeout(resolve, 30));
    for (let hour = 0; hour < 6; hour++) {
      await tick();
      const ws = FakeSocket.last!;
      ws.open();
      ws.syncStep2();
      assert.equal(p.synced, true, `hour ${hour}`);
      ws.onclose?.({ code: 4401, reason: "token_expired" });
    }
    await tick();
    assert.equal(tokens, 7, "a token for every hour, and the next");
    p.destroy();
    doc.destroy();
  });
});
