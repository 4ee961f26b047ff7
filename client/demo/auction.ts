//! The auction as the room decides it (examples/auction): the `lot` key
//! says what is under the hammer and until when; the `bid` key holds the top
//! bid and the bids before it. The browser only reads them: the room checks
//! every bid (the minimum, the step, the end time) and names the bidder.

export const BLURB = "Red ABS case, original ribbon, tested and working. Designed by Ettore Sottsass.";

/** What the page shows before the room has said anything. */
export const DEFAULT_LOT: Lot = {
  title: "Lot 17 · Olivetti Valentine typewriter, 1969",
  start: 100,
  step: 10,
  ends_at: 0,
  open: true,
  winner: null,
};

export interface Lot {
  title: string;
  start: number;
  step: number;
  /** When the room closes the lot, epoch ms. */
  ends_at: number;
  open: boolean;
  /** The winning bid, once closed. */
  winner: BidEntry | null;
}

export interface BidEntry {
  amount: number;
  /** The bidder as the room verified them (the token's user). */
  bidder: string;
  /** The bidder's display name, as the room took it from their token. */
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

export function parseLot(value: unknown): Lot | null {
  if (typeof value !== "object" || value === null) return null;
  const v = value as Partial<Lot>;
  if (typeof v.title !== "string" || typeof v.ends_at !== "number") return null;
  return {
    title: v.title,
    start: Number(v.start ?? DEFAULT_LOT.start),
    step: Number(v.step ?? DEFAULT_LOT.step),
    ends_at: v.ends_at,
    open: v.open === true,
    winner: v.winner ? (parseBid(v.winner) ?? null) : null,
  };
}

export function parseBid(value: unknown): BidValue | null {
  if (typeof value !== "object" || value === null) return null;
  const v = value as Partial<BidValue>;
  if (typeof v.amount !== "number") return null;
  return {
    amount: v.amount,
    bidder: String(v.bidder ?? ""),
    name: String(v.name ?? v.bidder ?? "someone"),
    session: String(v.session ?? ""),
    region: String(v.region ?? "?"),
    at: Number(v.at ?? 0),
    history: Array.isArray(v.history) ? v.history : [],
  };
}

/** The smallest bid the room will take given the top bid (its own rule, shown ahead). */
export function minimumBid(lot: Lot, current: BidValue | null): number {
  return current ? current.amount + lot.step : lot.start;
}

/** Every bid, newest first, each with its version. */
export function allBids(current: BidValue | null, version: number): BidEntry[] {
  if (!current) return [];
  const { history, ...top } = current;
  return [{ ...top, version }, ...history];
}

/** Why the room refused a bid, for people. */
export function refusalText(code: string, message: string): string {
  switch (code) {
    case "bid_too_low":
      return `Too low: ${message.replace(/^bid at least (\d+)$/, (_, n: string) => `bid at least $${Number(n).toLocaleString("en-US")}`)}.`;
    case "auction_closed":
      return "The auction is closed: the room refused the bid.";
    case "bad_bid":
      return "The room refused the bid: it is not a whole number of dollars.";
    default:
      return `The room refused the bid: ${message || code}.`;
  }
}
