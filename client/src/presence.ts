//! Who is in the room: the member list (per session) kept from `welcome` and
//! `presence` diffs, and the per-region summary kept from `summary` frames;
//! handed out as immutable snapshots (one object until something changes).

import type { Member, PresenceFrame, RegionCount, Summary, WelcomeFrame } from "./protocol.js";

const EMPTY_SUMMARY: Summary = { members: 0, users: 0, connections: 0, regions: {} };

/** The room's presence, as an immutable snapshot. */
export interface Presence {
  /** Members by session. Empty in a large room (see `large`). */
  readonly members: ReadonlyMap<string, Member>;
  /** Number of members (sessions). */
  readonly count: number;
  /** Number of distinct users. */
  readonly users: number;
  /** Members and users per region. */
  readonly regions: Readonly<Record<string, RegionCount>>;
  /** The last summary the server sent (throttled, at most every ~2 s). */
  readonly summary: Summary;
  /** The room is in summaries-only mode: `members` is not kept. */
  readonly large: boolean;
}

/** The presence of a room with nobody known in it (never connected, or rendering on a server). */
export const EMPTY_PRESENCE: Presence = Object.freeze({
  members: new Map<string, Member>(),
  count: 0,
  users: 0,
  regions: Object.freeze({}),
  summary: EMPTY_SUMMARY,
  large: false,
});

export class PresenceStore implements Presence {
  members = new Map<string, Member>();
  summary: Summary = EMPTY_SUMMARY;
  large = false;
  private snap: Presence | null = null;

  /**
   * An immutable view of now: the same object until the next change, so a
   * `===` check (React's `useSyncExternalStore`) tells whether it changed.
   */
  snapshot(): Presence {
    if (this.snap === null) {
      this.snap = Object.freeze({
        members: new Map(this.members),
        count: this.count,
        users: this.users,
        regions: Object.freeze(this.regions),
        summary: this.summary,
        large: this.large,
      });
    }
    return this.snap;
  }

  /** Members whose user is `user` (this user's other tabs and devices share its budget). */
  sessionsOf(user: string): number {
    let n = 0;
    for (const m of this.members.values()) if (m.user === user) n += 1;
    return n;
  }

  /** The member list is exact between summaries; the summary wins in large rooms. */
  get count(): number {
    return this.large ? this.summary.members : this.members.size;
  }

  get users(): number {
    if (this.large) return this.summary.users;
    return new Set([...this.members.values()].map((m) => m.user)).size;
  }

  get regions(): Record<string, RegionCount> {
    if (this.large) return this.summary.regions;
    const byRegion: Record<string, { members: number; users: Set<string> }> = {};
    for (const m of this.members.values()) {
      const r = (byRegion[m.region] ??= { members: 0, users: new Set() });
      r.members += 1;
      r.users.add(m.user);
    }
    const out: Record<string, RegionCount> = {};
    for (const [region, r] of Object.entries(byRegion)) out[region] = { members: r.members, users: r.users.size };
    return out;
  }

  welcome(f: WelcomeFrame): void {
    this.snap = null;
    this.large = f.presence?.large === true;
    this.members = new Map(Object.entries(f.presence?.members ?? {}));
    if (f.presence?.summary) this.summary = f.presence.summary;
  }

  /** Applies a diff; returns the sessions that joined (or changed) and left. */
  apply(f: PresenceFrame): { joins: string[]; leaves: string[] } {
    this.snap = null;
    // A reset states the mode (absent `large` = a normal room again); a diff
    // can only switch large mode on.
    if (f.reset) this.large = f.large === true;
    else if (f.large) this.large = true;
    const left: string[] = [];
    if (f.reset) {
      // Own keys only: a session may be named `constructor` or `toString`, which `in` finds on
      // every object's prototype (such a member never left on a reset).
      const joined = f.joins ?? {};
      for (const s of this.members.keys()) if (!Object.hasOwn(joined, s)) left.push(s);
      this.members = new Map();
    }
    for (const s of f.leaves ?? []) {
      if (this.members.delete(s)) left.push(s);
    }
    const joins = Object.entries(f.joins ?? {});
    if (!this.large) for (const [s, m] of joins) this.members.set(s, m);
    if (this.large) this.members.clear();
    return { joins: joins.map(([s]) => s), leaves: left };
  }

  /**
   * This session's own state changed: the room tells only the others, so
   * the local copy is updated here. Returns whether the member is listed.
   */
  updateSelf(session: string, state: Member["state"]): boolean {
    const me = this.members.get(session);
    if (!me) return false;
    this.snap = null;
    this.members.set(session, { ...me, state });
    return true;
  }

  setSummary(s: Summary): void {
    this.snap = null;
    this.summary = { members: s.members, users: s.users, connections: s.connections, regions: s.regions ?? {} };
  }

  clear(): void {
    this.snap = null;
    this.members = new Map();
    this.large = false;
    this.summary = EMPTY_SUMMARY;
  }
}
