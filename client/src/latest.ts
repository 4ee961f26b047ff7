//! Latest-wins slots for ephemeral frames: one slot per key (this tab's
//! presence, or one signal topic). A slot holds only the newest frame put
//! in it, so a burst of calls collapses into the last one, and it may go out
//! once its interval since that key's previous send has passed: the last
//! value is always sent (trailing edge), never more often than the interval.

export type Next = { key: string; text: string } | { at: number } | null;

export class Latest {
  /**
   * Key to its waiting frame. Insertion order is waiting order (a replaced
   * frame keeps its place), so the longest-waiting due slot goes first.
   */
  private slots = new Map<string, string>();
  private lastSent = new Map<string, number>();

  constructor(private readonly interval: (key: string) => number) {}

  get size(): number {
    return this.slots.size;
  }

  /** Puts the newest frame for `key`, replacing one that has not gone out yet. */
  put(key: string, text: string): void {
    this.slots.set(key, text);
  }

  /** Whether a frame for `key` waits. */
  has(key: string): boolean {
    return this.slots.has(key);
  }

  /**
   * The frame that may go now (the longest-waiting slot whose interval has
   * passed), else when the first one may, else null (nothing waits).
   */
  next(now: number): Next {
    let at = Infinity;
    for (const [key, text] of this.slots) {
      const due = (this.lastSent.get(key) ?? -Infinity) + this.interval(key);
      if (due <= now) return { key, text };
      at = Math.min(at, due);
    }
    return at === Infinity ? null : { at };
  }

  /** The frame of `key` went out at `now`. */
  sent(key: string, now: number): void {
    this.slots.delete(key);
    this.lastSent.set(key, now);
  }

  drop(key: string): void {
    this.slots.delete(key);
  }

  /** A new connection: nothing waits, no interval runs. */
  clear(): void {
    this.slots.clear();
    this.lastSent.clear();
  }
}
