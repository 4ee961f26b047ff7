//! Measuring JSON the way the room does before accepting it: its size in
//! UTF-8 bytes and how deeply it nests.

let encoder: TextEncoder | null = null;

/** UTF-8 bytes of `text`. */
export function byteLength(text: string): number {
  if (typeof TextEncoder === "function") return (encoder ??= new TextEncoder()).encode(text).length;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c < 0xdc00 ? (i++, 4) : 3;
  }
  return n;
}

/**
 * The deepest nesting of arrays and objects in JSON `text` (0 for a
 * scalar), counted as the room counts it: brackets outside strings.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b /* [ { */) {
      depth += 1;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x5d || c === 0x7d /* ] } */) {
      depth -= 1;
    }
  }
  return deepest;
}
