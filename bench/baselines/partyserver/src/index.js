// The same broadcast room on partyserver: every text goes to every
// connection (sender included). Connect at /parties/room/{room}.
import { Server, routePartykitRequest } from "partyserver";

export class Room extends Server {
  static options = { hibernate: true };

  onMessage(_connection, message) {
    this.broadcast(message);
  }
}

export default {
  async fetch(request, env) {
    return (await routePartykitRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};
