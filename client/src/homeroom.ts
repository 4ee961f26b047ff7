//! The homeroom browser client: `connect()` to a room and get a handle that
//! keeps its guarantees across flaky networks (resume without gaps, no lost
//! or doubled durable sends, jittered reconnects, region choice). Exports
//! what client/README.md documents ("What `homeroom` exports"; test/exports.test.ts
//! holds it to that); the defaults and helpers are `homeroom/tuning`.

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

export { Room } from "./room.js";
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
// Types only: what the documented API's signatures and options name. The
// defaults and helpers behind them are in `homeroom/tuning` (tuning.ts).
export type { Presence } from "./presence.js";
export type { Json, Limits, Member, MessageFrame, RegionCount, SignalFrame, StateEntry, Summary } from "./protocol.js";
export type { BackoffOptions } from "./backoff.js";
export type { HeartbeatOptions } from "./heartbeat.js";
export type { ChoiceWhy, RegionOptions } from "./regions.js";
export type { RateOptions } from "./bucket.js";
export type { Env, LocksLike, SocketFactory, SocketLike, StorageLike, TimerHandle, WakeSource, WakeWhy } from "./env.js";
