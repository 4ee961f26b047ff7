//! The error type of rejected sends and `error` events.

export class HomeroomError extends Error {
  /**
   * A server error code (`conflict`, `invalid`, `too_large`, `rate_limited`,
   * `bad_frame`) or a client one, when the client stopped before the send
   * was acknowledged: `closed` (the room handle was closed or the server
   * closed with 1000), `superseded` (4001: this session connected
   * elsewhere), `auth` (4401: the token was refused and no good one came),
   * `session_taken` (4409 again and again), or the reason of a 4403
   * (`kicked`, `blocked`, ...: the room refused this user).
   */
  readonly code: string;
  /** The client id of the publish/set this error answers, if any. */
  readonly id?: string;
  /** For `conflict`: the key's current version. */
  readonly version?: number;

  constructor(code: string, message: string, extra: { id?: string; version?: number } = {}) {
    super(message || code);
    this.name = "HomeroomError";
    this.code = code;
    if (extra.id !== undefined) this.id = extra.id;
    if (extra.version !== undefined) this.version = extra.version;
  }
}
