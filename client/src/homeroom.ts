//! The homeroom browser client: `connect()` to a room and get a handle that
//! keeps its guarantees across flaky networks (resume without gaps, no lost
//! or doubled durable sends, jittered reconnects, region choice).

import { Room, type ConnectOptions } from "./room.js";

/**
 * Connects to a room; the handle reconnects by itself until `close()`.
 * With `autoConnect: false` nothing happens (nothing of the page is read)
 * until `room.start()`.
 */
export function connect(opts: ConnectOptions): Room {
  const room = new Room(opts);
  if (opts.autoConnect !== false) room.start();
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
export { DEFAULT_RATE, paceFor } from "./bucket.js";
export type { Pace, RateOptions } from "./bucket.js";
export { IDLE_STATUS } from "./status.js";
export { EMPTY_PRESENCE } from "./presence.js";
export { SESSION_KEY, validSession } from "./session.js";
export type { Presence } from "./presence.js";
export type { Env, SocketFactory, SocketLike, StorageLike, WakeSource, WakeWhy } from "./env.js";
export { CLOSE, DEFAULT_LIMITS, PING, markEcho } from "./protocol.js";
export type * from "./protocol.js";
