//! The auction model: the `bid` key's value holds the top bid and the bids
//! before it, so one compare-and-set keeps the price and history consistent.

export const LOT = {
  title: "Lot 17 · Olivetti Valentine typewriter, 1969",
  blurb: "Red ABS case, original ribbon, tested and working. Designed by Ettore Sottsass.",
  start: 100,
  step: 10,
};

export const HISTORY_KEEP = 30;

export interface BidEntry {
  amount: number;
  name: string;
  session: string;
  region: string;
  at: number;
  /** The version (seq) that wrote this bid; the current bid's is the key's version. */
  version?: number;
}

export interface BidValue extends BidEntry {
  history: BidEntry[];
}

export function parseBid(value: unknown): BidValue | null {
  if (typeof value !== "object" || value === null) return null;
  const v = value as Partial<BidValue>;
  if (typeof v.amount !== "number") return null;
  return {
    amount: v.amount,
    name: String(v.name ?? "someone"),
    session: String(v.session ?? ""),
    region: String(v.region ?? "?"),
    at: Number(v.at ?? 0),
    history: Array.isArray(v.history) ? v.history : [],
  };
}

/** The smallest acceptable bid given the current top bid. */
export function minimumBid(current: BidValue | null): number {
  return current ? current.amount + LOT.step : LOT.start;
}

/** The value of a new top bid over `current` (at `version`). */
export function nextBid(current: BidValue | null, version: number, bid: BidEntry): BidValue {
  const history = current
    ? [{ ...stripHistory(current), version }, ...current.history].slice(0, HISTORY_KEEP)
    : [];
  return { ...bid, history };
}

function stripHistory(v: BidValue): BidEntry {
  return { amount: v.amount, name: v.name, session: v.session, region: v.region, at: v.at };
}

/** Every bid, newest first, each with its version. */
export function allBids(current: BidValue | null, version: number): BidEntry[] {
  if (!current) return [];
  return [{ ...stripHistory(current), version }, ...current.history];
}
