// The plain room (../../plain) that answers each connect with one text the size of homeroom's
// welcome to a member of a big room, sent on the new socket before the 101 goes back: the
// runtime's own cost of a connect that must tell the member where it stands, with no room
// logic at all. bench/split's per-object rounds measure homeroom's connects beside it.
import plain, { Room as PlainRoom } from "../../plain/src/index.js";

const WELCOME = JSON.stringify({ type: "welcome", pad: "x".repeat(600) });

export class Room extends PlainRoom {
  async fetch() {
    const { 0: client, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server);
    server.send(WELCOME);
    return new Response(null, { status: 101, webSocket: client });
  }
}

export default plain;
