//! The homeroom browser client: `connect()` to a room and get a handle that
//! keeps its guarantees across flaky networks (resume without gaps, no lost
//! or doubled durable sends, jittered reconnects, region choice).

import { Room, type ConnectOptions } from "./room.js";

/** Connects to a room; the handle reconnects by itself until `close()`. */
export function connect(opts: ConnectOptions): Room {
  const room = new Room(opts);
  room.start();
  return room;
}

export { Room, tokenExpired } from "./room.js";
export type {
  ConnectOptions,
  ConnectionState,
  MessageEvent,
  PresenceEvent,
  ResyncEvent,
  RoomEvents,
  StateEvent,
  Status,
} from "./room.js";
export { HomeroomError } from "./errors.js";
export { DEFAULT_BACKOFF, fullJitter, plan } from "./backoff.js";
export type { BackoffOptions, Cause, Plan, PlanContext, StopWhy } from "./backoff.js";
export { DEFAULT_HEARTBEAT } from "./heartbeat.js";
export type { HeartbeatOptions } from "./heartbeat.js";
export { DEFAULT_REGIONS, EndpointChooser, PIN_KEY } from "./regions.js";
export type { ChoiceWhy, RegionOptions } from "./regions.js";
export { DEFAULT_RATE } from "./outbox.js";
export type { RateOptions } from "./outbox.js";
export { SESSION_KEY, validSession } from "./session.js";
export type { Presence } from "./presence.js";
export type { Env, SocketFactory, SocketLike, StorageLike } from "./env.js";
export { CLOSE, PING, markEcho } from "./protocol.js";
export type * from "./protocol.js";
