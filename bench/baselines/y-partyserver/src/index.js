// The same document on y-partyserver: a YServer whose document is stored in the object's
// SQLite, loaded in onLoad and written whole in onSave (which y-partyserver calls debounced:
// by default 2 s after an update, at most 10 s; until then an update is only in memory).
// Connect at /parties/doc/{room}.
import { routePartykitRequest } from "partyserver";
import { YServer } from "y-partyserver";
import * as Y from "yjs";

export class Doc extends YServer {
  async onLoad() {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS doc (id INTEGER PRIMARY KEY, data BLOB NOT NULL)");
    for (const row of sql.exec("SELECT data FROM doc WHERE id = 1")) {
      Y.applyUpdate(this.document, new Uint8Array(row.data));
    }
  }

  async onSave() {
    const update = Y.encodeStateAsUpdate(this.document);
    this.ctx.storage.sql.exec(
      "INSERT INTO doc (id, data) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET data = excluded.data",
      update.buffer.slice(update.byteOffset, update.byteOffset + update.byteLength),
    );
  }
}

export default {
  async fetch(request, env) {
    return (await routePartykitRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
