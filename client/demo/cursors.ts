//! Live cursors over signals: this tab's pointer goes out at most 10 times a
//! second (never queued); others' pointers are drawn where they are.

import type { Room } from "homeroom";
import { colorFor } from "./dom.js";

const SEND_EVERY_MS = 100;
const IDLE_MS = 5_000;
const GONE_MS = 30_000;

interface Drawn {
  el: HTMLElement;
  label: HTMLElement;
  seen: number;
}

export class Cursors {
  private drawn = new Map<string, Drawn>();
  private lastSent = 0;
  private trailing: ReturnType<typeof setTimeout> | null = null;
  private latest: { x: number; y: number } | null = null;
  private room: Room | null = null;
  private sweeper: ReturnType<typeof setInterval>;

  constructor(
    private readonly stage: HTMLElement,
    private readonly layer: HTMLElement,
    private readonly nameOf: (session: string) => { name: string; color: string } | null,
  ) {
    document.addEventListener("pointermove", (e) => this.move(e));
    document.documentElement.addEventListener("pointerleave", () => this.room?.signal("cursor", { gone: true }));
    this.sweeper = setInterval(() => this.sweep(), 1_000);
  }

  attach(room: Room | null): void {
    this.room = room;
    this.clear();
  }

  /** Drops every drawn cursor (they would go stale while disconnected). */
  clear(): void {
    for (const s of [...this.drawn.keys()]) this.remove(s);
  }

  private move(e: PointerEvent): void {
    const box = this.stage.getBoundingClientRect();
    const x = (e.clientX - box.left) / box.width;
    const y = (e.clientY - box.top) / box.height;
    if (x < 0 || x > 1 || y < 0 || y > 1) return;
    this.latest = { x: Math.round(x * 10_000) / 10_000, y: Math.round(y * 10_000) / 10_000 };
    const wait = this.lastSent + SEND_EVERY_MS - performance.now();
    if (wait <= 0) this.flush();
    else if (this.trailing === null) this.trailing = setTimeout(() => this.flush(), wait);
  }

  private flush(): void {
    this.trailing = null;
    if (!this.latest || !this.room) return;
    this.lastSent = performance.now();
    this.room.signal("cursor", this.latest);
  }

  /** A `cursor` signal from another session. */
  show(session: string, data: unknown): void {
    const d = data as { x?: unknown; y?: unknown; gone?: unknown } | null;
    if (!d || d.gone === true) return this.remove(session);
    if (typeof d.x !== "number" || typeof d.y !== "number") return;
    let c = this.drawn.get(session);
    if (!c) {
      const el = document.createElement("div");
      el.className = "cursor";
      el.dataset.session = session;
      el.innerHTML =
        '<svg width="18" height="22" viewBox="0 0 18 22"><path d="M1 1l15 11.5-6.6 1.1L13 21l-3.2 1-3.4-7.5L1 19z" fill="currentColor" stroke="#fff" stroke-width="1.4" stroke-linejoin="round"/></svg>';
      const label = document.createElement("span");
      el.append(label);
      this.layer.append(el);
      c = { el, label, seen: 0 };
      this.drawn.set(session, c);
    }
    const who = this.nameOf(session);
    const color = who?.color ?? colorFor(session);
    c.el.style.color = color;
    c.label.style.background = color;
    c.label.textContent = who?.name ?? "guest";
    const box = this.layer.getBoundingClientRect();
    c.el.style.transform = `translate(${d.x * box.width}px, ${d.y * box.height}px)`;
    c.el.classList.remove("idle");
    c.seen = Date.now();
  }

  remove(session: string): void {
    this.drawn.get(session)?.el.remove();
    this.drawn.delete(session);
  }

  /** Refresh labels after a presence change; drop cursors of sessions that left. */
  refresh(present: ReadonlySet<string>): void {
    for (const [s, c] of this.drawn) {
      if (!present.has(s)) this.remove(s);
      else {
        const who = this.nameOf(s);
        if (who) c.label.textContent = who.name;
      }
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const [s, c] of this.drawn) {
      if (now - c.seen > GONE_MS) this.remove(s);
      else if (now - c.seen > IDLE_MS) c.el.classList.add("idle");
    }
  }

  dispose(): void {
    clearInterval(this.sweeper);
  }
}
