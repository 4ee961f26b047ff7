//! Small DOM and formatting helpers for the demo page.

export function $(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing`);
  return el;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: Array<Node | string | null | undefined | false>
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export const money = (n: number): string => "$" + Math.round(n).toLocaleString("en-US");

export function ago(ts: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ts) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  return new Date(ts).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

const PALETTE = ["#e03131", "#e8590c", "#b7860b", "#2f9e44", "#0c8599", "#1971c2", "#6741d9", "#c2255c", "#8d5524", "#495057"];

/** A stable color for a session (FNV-1a over its characters, into a palette). */
export function colorFor(session: string): string {
  let x = 0x811c9dc5;
  for (let i = 0; i < session.length; i++) x = Math.imul(x ^ session.charCodeAt(i), 0x01000193) >>> 0;
  return PALETTE[x % PALETTE.length]!;
}

export function short(s: string | null | undefined, n = 10): string {
  if (!s) return "—";
  return s.length > n ? s.slice(0, n) + "…" : s;
}
