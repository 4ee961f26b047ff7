//! `homeroom/tuning`: the client's defaults and the pure helpers behind its
//! policies (backoff, heartbeat, region choice, pacing, limits, close codes,
//! sessions, tokens, the idle snapshots), for tuning a client and for tests.
//! Not needed to use a room: that is `homeroom`.

export { DEFAULT_BACKOFF, SPREAD_MAX_MS, fullJitter, plan, spreadMs } from "./backoff.js";
export type { BackoffOptions, Cause, Plan, PlanContext, StopWhy } from "./backoff.js";
export { DEFAULT_HEARTBEAT } from "./heartbeat.js";
export type { HeartbeatOptions } from "./heartbeat.js";
export { DEFAULT_REGIONS, EndpointChooser, PIN_KEY } from "./regions.js";
export type { ChoiceWhy, RegionOptions } from "./regions.js";
export { DEFAULT_RATE, paceFor } from "./bucket.js";
export type { Pace, RateOptions } from "./bucket.js";
export { CLOSE, DEFAULT_LIMITS, PING, markEcho } from "./protocol.js";
export type * from "./protocol.js";
export { SESSION_KEY, validSession } from "./session.js";
export { tokenExpired } from "./room.js";
export { IDLE_STATUS } from "./status.js";
export { EMPTY_PRESENCE } from "./presence.js";
