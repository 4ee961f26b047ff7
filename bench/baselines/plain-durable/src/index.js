// The plain room plus durability: every text is written to SQLite before it
// goes to every socket (the runtime's output gate holds the sends until the
// write is confirmed, as it does for homeroom). GET /rooms/{room}/ws routes to
// the room's object.
import { DurableObject } from "cloudflare:workers";

export class Room extends DurableObject {
  async fetch() {
    const { 0: client, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server);
    return new Response(null, { status: 101, webSocket: client });
  }

  webSocketMessage(_ws, message) {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)");
    sql.exec("INSERT INTO log (data) VALUES (?)", message);
    for (const ws of this.ctx.getWebSockets()) {
      try {
        ws.send(message);
      } catch {
        // closing under us; its close event follows
      }
    }
  }

  webSocketClose(ws, code, reason) {
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code, reason);
    } catch {
      // already closed
    }
  }
}

export default {
  async fetch(request, env) {
    const match = new URL(request.url).pathname.match(/^\/rooms\/([^/]{1,64})\/ws$/);
    if (!match || request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
      return new Response("not found", { status: 404 });
    }
    return env.ROOMS.get(env.ROOMS.idFromName(match[1])).fetch(request);
  },
};
