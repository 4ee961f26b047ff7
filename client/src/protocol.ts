//! The wire frames of PROTOCOL.md (v1) as TypeScript types, plus the few
//! homeroom additions the server sends (`reset`, `large`, `home`).

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
}

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
  | PongFrame;

/** The exact ping text: the runtime answers it without waking the room. */
export const PING = '{"type":"ping"}';

/** The topic of state-change messages. */
export const STATE_TOPIC = "$state";

/** Frames over this many bytes make the server close the socket (1009). */
export const MAX_FRAME_BYTES = 65536;

export const CLOSE = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  ABNORMAL: 1006,
  POLICY: 1008,
  TOO_LARGE: 1009,
  SUPERSEDED: 4001,
  HEARTBEAT_TIMEOUT: 4008,
  RATE_ABUSE: 4029,
} as const;
