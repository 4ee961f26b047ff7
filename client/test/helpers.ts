//! Shared setup for the unit tests: a Room on a fake world, connected.

import { Room, type ConnectOptions } from "../src/room.js";
import { welcome, world, type WelcomeOpts, type World } from "./fakes.js";

export const URL = "https://rooms.example";

export function room(w: World, opts: Partial<ConnectOptions> = {}): Room {
  const r = new Room({ room: "r1", url: URL, ...opts, env: { ...w.env, ...opts.env } });
  r.start();
  return r;
}

/** A room whose first connection got its welcome (and its initial state). */
export async function connected(
  opts: { seed?: number; connect?: Partial<ConnectOptions>; welcome?: WelcomeOpts } = {},
): Promise<{ w: World; r: Room }> {
  const w = world(opts.seed === undefined ? {} : { seed: opts.seed });
  const r = room(w, opts.connect);
  await w.clock.advance(0);
  const s = w.last();
  welcome(s, opts.welcome);
  s.receive({ type: "state", seq: opts.welcome?.seq ?? 0, state: {} });
  return { w, r };
}
