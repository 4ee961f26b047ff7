//! The wire frames of PROTOCOL.md (v1) as TypeScript types, plus the
//! homeroom additions the server sends (`reset`, `large`, `home`, `mark`,
//! and the close codes 4008, 4013, 4401, 4403, 4409, 4429).

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A presence member, as in `welcome` and `presence` frames. */
export interface Member {
  user: string;
  region: string;
  state: Record<string, Json>;
  /** When the member joined, unix milliseconds. */
  since: number;
}

export interface RegionCount {
  members: number;
  users: number;
}

/** The body of a `summary` frame. */
export interface Summary {
  members: number;
  users: number;
  connections: number;
  regions: Record<string, RegionCount>;
}

/** One key of the room state: its value and version (the `seq` that wrote it). */
export interface StateEntry {
  value: Json;
  version: number;
}

export interface WelcomeFrame {
  type: "welcome";
  room: string;
  session: string;
  user: string;
  conn: string;
  region: string;
  /** The room's home location, when the server says. */
  home?: string;
  epoch: string;
  seq: number;
  resumed: boolean;
  missed: number;
  presence?: {
    members?: Record<string, Member>;
    summary?: Summary;
    large?: boolean;
  };
  /** The room's limits (an added field; absent from older servers). */
  limits?: Partial<Limits>;
  /** The relay that holds this connection for a big room, e.g. `EU-0` (an added field). */
  relay?: string;
}

/**
 * The limits a room announces in `welcome`: the client paces itself by them
 * (see sender.ts) and refuses locally what the room would refuse.
 */
export interface Limits {
  /** Frames per second per connection, and its burst. */
  rate: number;
  burst: number;
  /** Frames per second per user over all their connections, and its burst. */
  user_rate: number;
  user_burst: number;
  /** Connections one user may hold in the room. */
  user_connections: number;
  /** Connects per second one user may make, and the burst (past it: 4429 `connect_rate`). */
  user_connects_per_sec: number;
  user_connect_burst: number;
  /** Largest frame the room accepts, bytes. */
  max_frame: number;
  /** Largest presence state, bytes of JSON. */
  presence_max: number;
  /** Deepest nesting of `data`, `value` and presence `state`. */
  max_depth: number;
  /**
   * Bytes one user may send the room per second over all their connections, and the burst
   * (past them: `rate_limited`). The client paces its frames' bytes by them too.
   */
  user_bytes_per_sec: number;
  user_bytes_burst: number;
  /** Bytes one user is sent per second because of what they did (state, resync, catch-up, welcomes, the rules' sends, member lists). */
  reply_bytes_per_sec: number;
  /** Bytes a connection may leave unconfirmed by `mark` echoes. */
  send_window: number;
  /**
   * Connects per second the room asks of its members when it drops them
   * together (1001, 1012): the first reconnect is spread over members / this
   * seconds, at most `SPREAD_MAX_MS` (see `spreadMs` in backoff.ts).
   */
  reconnect_rate: number;
}

/** The server's defaults: what the client assumes before its first welcome. */
export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  rate: 20,
  burst: 50,
  user_rate: 40,
  user_burst: 100,
  user_connections: 10,
  user_connects_per_sec: 1,
  user_connect_burst: 20,
  max_frame: 65536,
  presence_max: 1024,
  max_depth: 32,
  user_bytes_per_sec: 262144,
  user_bytes_burst: 1048576,
  reply_bytes_per_sec: 262144,
  send_window: 1048576,
  reconnect_rate: 100,
});

export interface MessageFrame {
  type: "message";
  seq: number;
  id: string;
  session: string;
  user: string;
  region: string;
  topic: string;
  data: Json;
  ts: number;
}

export interface SignalFrame {
  type: "signal";
  session: string;
  topic: string;
  data: Json;
}

export interface PresenceFrame {
  type: "presence";
  joins: Record<string, Member>;
  leaves: string[];
  /** `joins` is the whole member list: drop everyone else. */
  reset?: boolean;
  /** The room is in summaries-only mode: no member list. */
  large?: boolean;
}

export interface SummaryFrame extends Summary {
  type: "summary";
}

export interface ResyncFrame {
  type: "resync";
  reason: "epoch" | "gap" | string;
  seq: number;
  state: Record<string, StateEntry>;
}

export interface StateFrame {
  type: "state";
  seq: number;
  state: Record<string, StateEntry>;
}

export interface AckFrame {
  type: "ack";
  id: string;
  seq: number;
}

export interface ErrorFrame {
  type: "error";
  code: string;
  id?: string;
  message?: string;
  version?: number;
}

export interface BatchFrame {
  type: "batch";
  frames: ServerFrame[];
}

export interface PongFrame {
  type: "pong";
}

/**
 * Flow control: the server sends one after roughly every 256 KiB it sends to
 * a connection (top level or inside a `batch`). The client echoes it at once,
 * verbatim (`markEcho`), outside its rate pacing; a server that stops getting
 * echoes stops sending to the connection and at last closes it with 4013.
 */
export interface MarkFrame {
  type: "mark";
  /** Opaque: echoed back unchanged. */
  mark: string;
}

export type ServerFrame =
  | WelcomeFrame
  | MessageFrame
  | SignalFrame
  | PresenceFrame
  | SummaryFrame
  | ResyncFrame
  | StateFrame
  | AckFrame
  | ErrorFrame
  | BatchFrame
  | PongFrame
  | MarkFrame;

/** The exact ping text: the runtime answers it without waking the room. */
export const PING = '{"type":"ping"}';

/** The echo of a `mark` frame: the same string, sent back as it came. */
export function markEcho(mark: string): string {
  return JSON.stringify({ type: "mark", mark });
}

/** The topic of state-change messages. */
export const STATE_TOPIC = "$state";

/** Frames over this many bytes make the server close the socket (1009). */
export const MAX_FRAME_BYTES = 65536;

/**
 * Close codes the server uses (the reason string, where noted, is a stable
 * code). What the client does after each one is `plan` in backoff.ts.
 */
export const CLOSE = {
  /** Normal: do not reconnect. */
  NORMAL: 1000,
  /** Going away: the room or region is drained on purpose. Reconnect promptly. */
  GOING_AWAY: 1001,
  /** Abnormal, no close frame (also what a refused upgrade looks like). Back off. */
  ABNORMAL: 1006,
  /** Policy: auth expired or abuse. Get a new token, back off. */
  POLICY: 1008,
  /** A frame over 64 KiB. */
  TOO_LARGE: 1009,
  /**
   * Service restart: the relay that held the connection for the room cannot
   * any more (its link broke, or a newer instance took its place); every
   * client of it gets this at once. Back off (spread by the room's window).
   */
  SERVICE_RESTART: 1012,
  /** Superseded by a newer connection of the same session (another tab). Stop. */
  SUPERSEDED: 4001,
  /** No frame and no answered ping for the presence TTL. Back off. */
  HEARTBEAT_TIMEOUT: 4008,
  /**
   * Reason `backlog`: the connection fell too far behind (more than the
   * server's window unconfirmed by `mark` echoes, and a backlog waiting).
   * Reconnect promptly and resume.
   */
  BACKLOG: 4013,
  /** Sustained rate-limit abuse. Back off long. */
  RATE_ABUSE: 4029,
  /**
   * Reason: an auth code (`token_expired`, `token_bad_signature`,
   * `token_malformed`, `token_missing`, `token_wrong_room`, ...): the token is
   * no longer good. With `getToken`: a new token, then reconnect promptly;
   * stop after `maxAuthRefusals` in a row. Without: stop.
   */
  UNAUTHORIZED: 4401,
  /** Reason `kicked`, `blocked`, ...: the operator or the room's rules refused this user. Stop. */
  FORBIDDEN: 4403,
  /** Reason `room_deleted`: the operator deleted the room; `no_such_kind`: the Worker serves no such kind. Stop. */
  ROOM_DELETED: 4404,
  /**
   * Reason `session_taken`: the session id belongs to another user. Pick a
   * fresh session and reconnect promptly; stop after 3 in a row.
   */
  SESSION_TAKEN: 4409,
  /** Reason `too_many_connections`: this user has too many sockets in the room. Back off long. */
  TOO_MANY_CONNECTIONS: 4429,
} as const;
