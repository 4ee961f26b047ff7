// The plain room (../../plain) plus durability: every text is written to
// SQLite before it goes to every socket, so the runtime's output gate holds
// the sends until the write is confirmed, as it does for homeroom. Only the
// write is added; everything else is the plain room itself.
import plain, { Room as PlainRoom } from "../../plain/src/index.js";

export class Room extends PlainRoom {
  webSocketMessage(ws, message) {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)");
    sql.exec("INSERT INTO log (data) VALUES (?)", message);
    super.webSocketMessage(ws, message);
  }
}

export default plain;
