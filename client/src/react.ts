//! React hooks for a room (`homeroom/react`): `useRoom` shares one
//! connection per (deployment, kind, room) in the tab (shared.ts), and the
//! rest read the Room's immutable snapshots through `useSyncExternalStore`,
//! so a component re-renders only when what it shows changed. On a server
//! nothing connects: rooms are made but only started in an effect, and the
//! snapshots are the idle ones.

import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from "react";

import { EMPTY_PRESENCE, type Presence } from "./presence.js";
import type { SignalFrame, StateEntry } from "./protocol.js";
import type { ConnectOptions, MessageEvent, Room } from "./room.js";
import { holdRoom, peekRoom, roomKey } from "./shared.js";
import { IDLE_STATUS, type Status } from "./status.js";

export interface UseRoomOptions extends ConnectOptions {
  /**
   * How long the connection stays open after the last component using it
   * unmounts, ms (default 1000): a remount within it (StrictMode, a route
   * change) keeps the same socket.
   */
  releaseAfterMs?: number;
}

/**
 * The room for `options`, connected while any mounted component uses it:
 * one Room (one socket) per (url or regions, kind, room) in the tab,
 * whoever asks. The options of the component that made it win (token,
 * getToken, presence, ...): pass a stable `getToken` that reads fresh
 * credentials itself. Started in an effect, so never on a server.
 */
export function useRoom(options: UseRoomOptions): Room {
  const key = roomKey(options);
  const [held, setHeld] = useState(() => ({ key, room: peekRoom(options) }));
  let current = held;
  if (held.key !== key) {
    // Another room was asked for: derive it during render (React's pattern for state from props).
    current = { key, room: peekRoom(options) };
    setHeld(current);
  }
  const { room } = current;
  const releaseMs = options.releaseAfterMs;
  useEffect(() => {
    const hold = holdRoom(key, room, releaseMs === undefined ? {} : { releaseMs });
    // Someone registered this room first (two components mounting at once): use theirs.
    if (hold.room !== room) setHeld({ key, room: hold.room });
    return hold.release;
  }, [key, room, releaseMs]);
  return room;
}

/** The connection status (a frozen snapshot; `idle` on a server and before the first effect). */
export function useStatus(room: Room): Status {
  const subscribe = useCallback((fn: () => void) => room.on("status", fn), [room]);
  return useSyncExternalStore(subscribe, () => room.status, () => IDLE_STATUS);
}

/** Who is here: members, users, regions (a frozen snapshot; empty on a server). */
export function usePresence(room: Room): Presence {
  const subscribe = useCallback(
    (fn: () => void) => {
      const offs = [room.on("presence", fn), room.on("summary", fn)];
      return () => offs.forEach((off) => off());
    },
    [room],
  );
  return useSyncExternalStore(subscribe, () => room.presence, () => EMPTY_PRESENCE);
}

/** One key of the room state: `{ value, version }`, or undefined while it has none (and on a server). */
export function useRoomState(room: Room, key: string): StateEntry | undefined {
  const subscribe = useCallback(
    (fn: () => void) => {
      const offs = [room.on("state", (e) => e.key === key && fn()), room.on("resync", fn)];
      return () => offs.forEach((off) => off());
    },
    [room, key],
  );
  return useSyncExternalStore(subscribe, () => room.state.get(key), () => undefined);
}

/** The latest `handler`, without resubscribing when it changes. */
function useLatest<T>(value: T): { readonly current: T } {
  const ref = useRef(value);
  useEffect(() => {
    ref.current = value;
  });
  return ref;
}

/**
 * Calls `handler` for every durable message (of `topic`, or of every topic
 * when `topic` is undefined), replayed ones included. The handler may change
 * on every render; the subscription stays.
 */
export function useMessages(room: Room, topic: string | undefined, handler: (m: MessageEvent) => void): void {
  const latest = useLatest(handler);
  useEffect(
    () => room.on("message", (m) => (topic === undefined || m.topic === topic) && latest.current(m)),
    [room, topic, latest],
  );
}

/** Calls `handler` for every signal of `topic` from another connection. */
export function useSignal(room: Room, topic: string, handler: (s: SignalFrame) => void): void {
  const latest = useLatest(handler);
  useEffect(() => room.on("signal", (s) => s.topic === topic && latest.current(s)), [room, topic, latest]);
}

export { holdRoom, peekRoom, roomKey } from "./shared.js";
export type { Presence, Room, Status, StateEntry, SignalFrame, MessageEvent };
