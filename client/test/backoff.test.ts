//! Reconnect timing: full-jitter bounds, the close-code policy, and 1,000
//! simulated clients that must not reconnect in step.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DEFAULT_BACKOFF, SPREAD_MAX_MS, fullJitter, plan, spreadMs } from "../src/backoff.js";
import { Room } from "../src/room.js";
import { FakeClock, seeded, welcome, world, type FakeSocket, type WelcomeOpts } from "./fakes.js";

describe("full jitter", () => {
  it("stays within [0, min(20 s, 2 s × 2^attempt)) and covers the window", () => {
    const random = seeded(7);
    for (let attempt = 0; attempt <= 12; attempt++) {
      const window = Math.min(20_000, 2_000 * 2 ** attempt);
      let lo = Infinity;
      let hi = -Infinity;
      for (let i = 0; i < 5_000; i++) {
        const d = fullJitter(attempt, random);
        assert.ok(d >= 0 && d < window, `attempt ${attempt}: ${d} outside [0, ${window})`);
        lo = Math.min(lo, d);
        hi = Math.max(hi, d);
      }
      assert.ok(lo < window * 0.01, `attempt ${attempt}: smallest ${lo} is not near 0`);
      assert.ok(hi > window * 0.99, `attempt ${attempt}: largest ${hi} is not near ${window}`);
    }
  });

  it("uses the random source at the edges exactly", () => {
    assert.equal(fullJitter(0, () => 0), 0);
    assert.equal(fullJitter(3, () => 0.5), 8_000);
    assert.equal(fullJitter(50, () => 0.5), 10_000); // capped, no overflow
  });
});

describe("close-code policy", () => {
  const r = (): number => 0.999;
  const close = (code: number, welcomed = true) => ({ kind: "close" as const, code, welcomed });

  it("never reconnects after 1000 or 4001", () => {
    assert.deepEqual(plan(close(1000), 0, r), { reconnect: false, why: "closed" });
    assert.deepEqual(plan(close(4001), 0, r), { reconnect: false, why: "superseded" });
    assert.deepEqual(plan(close(4001), 5, r), { reconnect: false, why: "superseded" });
  });

  it("reconnects promptly after 1001, within the 1 s window", () => {
    const p = plan(close(1001), 0, r);
    assert.ok(p.reconnect && p.delay < 1_000 && p.delay > 990);
    assert.equal(p.reconnect && p.refreshToken, false);
  });

  it("falls back to backoff when 1001 repeats or comes before a welcome", () => {
    const again = plan(close(1001), 3, r);
    assert.ok(again.reconnect && again.delay > 15_000);
    const early = plan(close(1001, false), 0, r);
    assert.ok(early.reconnect && early.delay > 1_990 && early.delay < 2_000);
  });

  it("backs off exponentially after 1006 and 4008, capped at 20 s", () => {
    for (const code of [1006, 4008, 1011]) {
      const delays = [0, 1, 2, 3, 4, 5].map((a) => {
        const p = plan(close(code), a, r);
        assert.ok(p.reconnect);
        assert.equal(p.attempt, a + 1);
        return Math.round(p.delay);
      });
      assert.deepEqual(delays, [1998, 3996, 7992, 15984, 19980, 19980]);
    }
  });

  it("asks for a new token after 1008", () => {
    const p = plan(close(1008), 0, r);
    assert.ok(p.reconnect && p.refreshToken && p.delay < 2_000);
    const q = plan(close(1006), 0, r);
    assert.ok(q.reconnect && !q.refreshToken);
  });

  it("backs off long after 4029", () => {
    const lo = plan(close(4029), 0, () => 0);
    const hi = plan(close(4029), 0, r);
    assert.ok(lo.reconnect && lo.delay === 30_000);
    assert.ok(hi.reconnect && hi.delay > 59_000 && hi.delay < 60_000);
  });

  it("reconnects promptly after 4013 (backlog), and backs off when it repeats", () => {
    const p = plan(close(4013), 0, r);
    assert.ok(p.reconnect && p.delay > 990 && p.delay < 1_000);
    assert.ok(p.reconnect && !p.refreshToken && !p.newSession);
    const zero = plan(close(4013), 0, () => 0);
    assert.ok(zero.reconnect && zero.delay === 0);
    const again = plan(close(4013), 3, r);
    assert.ok(again.reconnect && again.delay > 15_000 && again.delay < 16_000);
  });

  it("4401 with getToken: a new token, then promptly; prompt through the refusal streak", () => {
    const ctx = { canRefreshToken: true, authRefusals: 1 };
    const p = plan(close(4401), 0, r, DEFAULT_BACKOFF, ctx);
    assert.ok(p.reconnect && p.refreshToken && !p.newSession);
    assert.ok(p.reconnect && p.delay > 990 && p.delay < 1_000);
    // The second refusal in a row (its first one was attempt 0): still prompt.
    const second = plan(close(4401, false), 1, r, DEFAULT_BACKOFF, { canRefreshToken: true, authRefusals: 2 });
    assert.ok(second.reconnect && second.refreshToken && second.delay < 1_000 && second.attempt === 2);
    // A refusal after other failures (two 1006s): backoff, still with a new token.
    const late = plan(close(4401), 2, r, DEFAULT_BACKOFF, ctx);
    assert.ok(late.reconnect && late.refreshToken && late.delay > 7_900 && late.delay < 8_000);
  });

  it("4401: stops with why auth without getToken, or after maxAuthRefusals in a row", () => {
    assert.deepEqual(plan(close(4401), 0, r), { reconnect: false, why: "auth" });
    assert.deepEqual(plan(close(4401), 0, r, DEFAULT_BACKOFF, { canRefreshToken: false }), { reconnect: false, why: "auth" });
    assert.deepEqual(plan(close(4401, false), 2, r, DEFAULT_BACKOFF, { canRefreshToken: true, authRefusals: 3 }), {
      reconnect: false,
      why: "auth",
    });
    const five = { ...DEFAULT_BACKOFF, maxAuthRefusals: 5 };
    assert.ok(plan(close(4401, false), 3, r, five, { canRefreshToken: true, authRefusals: 4 }).reconnect);
    assert.deepEqual(plan(close(4401, false), 4, r, five, { canRefreshToken: true, authRefusals: 5 }), { reconnect: false, why: "auth" });
  });

  it("4404: the room was deleted; never reconnects", () => {
    assert.deepEqual(plan(close(4404), 0, r), { reconnect: false, why: "room_deleted" });
    assert.deepEqual(plan(close(4404), 4, r), { reconnect: false, why: "room_deleted" });
  });

  it("4404 no_such_kind: the Worker serves no such kind of room; never reconnects, says so", () => {
    const unknown = { kind: "close" as const, code: 4404, reason: "no_such_kind", welcomed: false };
    assert.deepEqual(plan(unknown, 0, r), { reconnect: false, why: "no_such_kind" });
  });

  it("4403: never reconnects; why is the reason", () => {
    for (const reason of ["kicked", "blocked", "banned_words"]) {
      assert.deepEqual(plan({ ...close(4403), reason }, 0, r, DEFAULT_BACKOFF, { canRefreshToken: true }), { reconnect: false, why: reason });
    }
    assert.deepEqual(plan(close(4403), 0, r), { reconnect: false, why: "forbidden" });
    assert.deepEqual(plan({ ...close(4403), reason: "" }, 7, r), { reconnect: false, why: "forbidden" });
  });

  it("4409: a new session, promptly; stops with why session_taken after 3 in a row", () => {
    const p = plan(close(4409, false), 0, r, DEFAULT_BACKOFF, { sessionTaken: 1 });
    assert.ok(p.reconnect && p.newSession && !p.refreshToken && p.delay > 990 && p.delay < 1_000);
    const second = plan(close(4409, false), 1, r, DEFAULT_BACKOFF, { sessionTaken: 2 });
    assert.ok(second.reconnect && second.newSession && second.delay < 1_000);
    const late = plan(close(4409, false), 3, r, DEFAULT_BACKOFF, { sessionTaken: 1 });
    assert.ok(late.reconnect && late.newSession && late.delay > 15_000);
    assert.deepEqual(plan(close(4409, false), 2, r, DEFAULT_BACKOFF, { sessionTaken: 3 }), { reconnect: false, why: "session_taken" });
  });

  it("backs off long after 4429, exactly like 4029", () => {
    for (const random of [() => 0, r, () => 0.5]) {
      for (const attempt of [0, 4]) {
        const a = plan(close(4429), attempt, random);
        assert.deepEqual(a, plan(close(4029), attempt, random));
        assert.ok(a.reconnect && a.delay >= 30_000 && a.delay < 60_000 && a.attempt === attempt + 1);
      }
    }
  });

  it("keeps every other code as it was", () => {
    for (const code of [1002, 1009, 1011, 4000, 4400, 4999]) {
      const p = plan(close(code), 1, r);
      assert.deepEqual(p, { reconnect: true, delay: 4_000 * 0.999, attempt: 2, refreshToken: false, newSession: false });
    }
  });

  it("jitters every path: no two random draws give the same delay", () => {
    const random = seeded(3);
    const causes = [1001, 1006, 1008, 4013, 4029, 4401, 4409, 4429].map((code) => close(code));
    for (const cause of [...causes, { kind: "gap" as const }, { kind: "heartbeat" as const }]) {
      const a = plan(cause, 0, random, DEFAULT_BACKOFF, { canRefreshToken: true });
      const b = plan(cause, 0, random, DEFAULT_BACKOFF, { canRefreshToken: true });
      assert.ok(a.reconnect && b.reconnect && a.delay !== b.delay, JSON.stringify(cause));
    }
  });
});

/** Busiest bucket over the average bucket, for event times in [from, to). */
function peakRatio(times: number[], from: number, to: number, bucketMs: number): { peak: number; avg: number; ratio: number } {
  const n = Math.ceil((to - from) / bucketMs);
  const buckets = new Array<number>(n).fill(0);
  for (const t of times) buckets[Math.min(n - 1, Math.floor((t - from) / bucketMs))]! += 1;
  const peak = Math.max(...buckets);
  const avg = times.length / n;
  return { peak, avg, ratio: peak / avg };
}

/**
 * `n` real Room clients on one fake clock, each with its own random seed,
 * all connected; the server side answers connects per `serverUp(now)`.
 */
function crowd(n: number, serverUp: (now: number) => boolean, opts: WelcomeOpts = {}) {
  const clock = new FakeClock();
  const attempts: number[] = [];
  const welcomed: number[] = [];
  const rooms: Room[] = [];
  const current: FakeSocket[] = [];
  for (let i = 0; i < n; i++) {
    const w = world({
      clock,
      seed: 1_000 + i,
      onSocket: (s) => {
        attempts.push(clock.now());
        // The server answers 20 ms later: a welcome when up, a refusal when down.
        clock.setTimeout(() => {
          if (serverUp(clock.now())) {
            welcome(s, opts);
            welcomed.push(clock.now());
          } else s.refuse();
        }, 20);
        current[i] = s;
      },
    });
    const r = new Room({ room: "storm", url: "https://x.example", env: w.env, session: `s-client-${i}` });
    rooms.push(r);
  }
  return { clock, attempts, welcomed, rooms, current };
}

/** Starts every client of `c`, waits until all have their welcome, and clears the counts: now. */
async function allIn(c: ReturnType<typeof crowd>): Promise<number> {
  for (const room of c.rooms) room.start();
  await c.clock.advance(0);
  c.clock.runUntil(c.clock.now() + 100);
  assert.equal(c.welcomed.length, c.rooms.length);
  c.attempts.length = 0;
  c.welcomed.length = 0;
  return c.clock.now();
}

describe("a big room's reconnect window", () => {
  const r = (): number => 0.999;
  const close = (code: number, welcomed = true) => ({ kind: "close" as const, code, welcomed });

  it("is members / reconnect_rate seconds, at most a minute", () => {
    assert.equal(spreadMs(5_000, 100), 50_000);
    assert.equal(spreadMs(40_000, 100), SPREAD_MAX_MS);
    assert.equal(spreadMs(50, 100), 500);
    assert.equal(spreadMs(0, 100), 0);
    assert.equal(spreadMs(5_000, 0), 0, "no rate announced: no window");
  });

  it("widens the first reconnect after 1001 and 1012 of a welcomed connection", () => {
    for (const code of [1001, 1012]) {
      const p = plan(close(code), 0, r, DEFAULT_BACKOFF, { spreadMs: 12_000 });
      assert.ok(p.reconnect && p.delay > 11_900 && p.delay < 12_000, `${code}: ${JSON.stringify(p)}`);
    }
  });

  it("leaves everything else as it was", () => {
    const spread = { spreadMs: 12_000 };
    // A window smaller than the cause's own changes nothing.
    const small = plan(close(1001), 0, r, DEFAULT_BACKOFF, { spreadMs: 500 });
    assert.ok(small.reconnect && small.delay > 990 && small.delay < 1_000);
    // A later attempt backs off as it would.
    const later = plan(close(1012), 3, r, DEFAULT_BACKOFF, spread);
    assert.ok(later.reconnect && later.delay > 15_000 && later.delay < 16_000);
    // Before a welcome, or a close that is one client's (1006: its network), no window.
    const early = plan(close(1001, false), 0, r, DEFAULT_BACKOFF, spread);
    assert.ok(early.reconnect && early.delay < 2_000);
    const own = plan(close(1006), 0, r, DEFAULT_BACKOFF, spread);
    assert.ok(own.reconnect && own.delay < 2_000);
    // 1012 without a window backs off over the first backoff window.
    const restart = plan(close(1012), 0, r);
    assert.ok(restart.reconnect && restart.delay > 1_990 && restart.delay < 2_000);
  });

  it("spreads 1,000 members of a 5,000-member room over 50 s after a 1001: busiest second ≤ 3× average", async (t) => {
    const N = 1_000;
    const c = crowd(N, () => true, { roomMembers: 5_000, limits: { reconnect_rate: 100 } });
    const t0 = await allIn(c);
    for (const s of c.current) s.serverClose(1001, "draining");
    c.clock.runUntil(t0 + 55_000);
    assert.equal(c.attempts.length, N, "everyone reconnected");
    const last = Math.max(...c.attempts.map((a) => a - t0));
    assert.ok(last < 50_000 && last > 45_000, `the last one came ${last} ms after the drain`);
    const { peak, avg, ratio } = peakRatio(c.attempts, t0, t0 + 50_000, 1_000);
    t.diagnostic(`after 1001 of a 5,000-member room: busiest second holds ${peak}, average ${avg} (${ratio.toFixed(2)}×)`);
    assert.ok(ratio <= 3, `busiest second holds ${peak}, average ${avg}`);
    // The room's pace: 5,000 members at 100/s; this sample of a fifth comes at 20/s.
    assert.ok(peak <= 60, `busiest second holds ${peak}, against the room's pace of 20 for this sample`);
    for (const room of c.rooms) room.close();
  });
});

describe("1,000 clients after a 1006", () => {
  const N = 1_000;

  it("spread their reconnects over the first window: busiest 100 ms ≤ 3× average", async (t) => {
    const c = crowd(N, () => true);
    const t0 = await allIn(c);
    for (const s of c.current) s.serverClose(1006);
    c.clock.runUntil(t0 + 5_000);

    assert.equal(c.attempts.length, N, "each client reconnects exactly once");
    assert.equal(c.welcomed.length, N);
    for (const t of c.attempts) assert.ok(t >= t0 && t < t0 + DEFAULT_BACKOFF.baseMs, `reconnect at +${t - t0} ms`);
    const { peak, avg, ratio } = peakRatio(c.attempts, t0, t0 + 2_000, 100);
    t.diagnostic(`first wave: busiest 100 ms holds ${peak} reconnects, average ${avg} (${ratio.toFixed(2)}×)`);
    assert.ok(ratio <= 3, `busiest 100 ms holds ${peak}, average ${avg}`);
    // The same measure flags a fixed retry delay: every client in one bucket.
    const lockstep = peakRatio(new Array<number>(N).fill(t0 + 1_000), t0, t0 + 2_000, 100);
    assert.ok(lockstep.ratio >= 20);
    for (const r of c.rooms) r.close();
  });

  it("arrive spread out when the server comes back after a 60 s outage: busiest second ≤ 3× average", async (t) => {
    let upAt = Infinity;
    const c = crowd(N, (now) => now >= upAt);
    upAt = -Infinity;
    for (const r of c.rooms) r.start();
    await c.clock.advance(0);
    c.clock.runUntil(c.clock.now() + 100);
    assert.equal(c.welcomed.length, N);

    const t0 = c.clock.now();
    upAt = t0 + 60_000;
    c.attempts.length = 0;
    c.welcomed.length = 0;
    for (const s of c.current) s.serverClose(1006);
    c.clock.runUntil(t0 + 60_000 + 25_000);

    assert.equal(c.welcomed.length, N, "everyone is back within the 20 s cap after the outage");
    const during = c.attempts.filter((t) => t < upAt);
    // Backoff keeps the failing load low: ~9 attempts per client over a minute, not 60.
    assert.ok(during.length < N * 12, `${during.length} attempts during the outage`);
    const last = Math.max(...c.welcomed);
    assert.ok(last - upAt <= 20_100, `last client back ${last - upAt} ms after recovery`);
    const { peak, avg, ratio } = peakRatio(c.welcomed, upAt, last + 1, 1_000);
    t.diagnostic(
      `${during.length} attempts during the outage; after recovery the busiest second holds ${peak}, ` +
        `average ${avg.toFixed(1)} (${ratio.toFixed(2)}×), all back in ${((last - upAt) / 1000).toFixed(1)} s`,
    );
    assert.ok(ratio <= 3, `busiest second after recovery holds ${peak}, average ${avg.toFixed(1)}`);
    // No second of the outage sees more than a few times its average either, after the first wave.
    const later = during.filter((t) => t >= t0 + 10_000);
    const steady = peakRatio(later, t0 + 10_000, upAt, 1_000);
    assert.ok(steady.ratio <= 3, `during the outage: busiest second ${steady.peak}, average ${steady.avg.toFixed(1)}`);
    for (const r of c.rooms) r.close();
  });

  it("spread 1001 reconnects over a 1 s window: busiest 100 ms ≤ 3× average", async (t) => {
    const c = crowd(N, () => true);
    const t0 = await allIn(c);
    for (const s of c.current) s.serverClose(1001, "draining");
    c.clock.runUntil(t0 + 3_000);
    assert.equal(c.attempts.length, N);
    for (const t of c.attempts) assert.ok(t - t0 < 1_000);
    const { peak, avg, ratio } = peakRatio(c.attempts, t0, t0 + 1_000, 100);
    t.diagnostic(`after 1001: busiest 100 ms holds ${peak}, average ${avg} (${ratio.toFixed(2)}×)`);
    assert.ok(ratio <= 3, `busiest 100 ms holds ${peak}, average ${avg}`);
    for (const r of c.rooms) r.close();
  });
});
