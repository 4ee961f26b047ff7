"""bench/profile's breakdown of `perf script -F time,ip,sym` (on stdin): samples per second
after the measured load's start, then, over the whole load or the window asked for, the samples
by what the runtime was doing (the first of these it finds on the stack), and within each
event, the share of the object's own code (the unnamed frames: the Wasm and the JIT's JavaScript).

    python3 bench/profile.py T0 [FROM] [TO]     T0: the load's start (CLOCK_MONOTONIC, s)
"""

import collections
import sys

# (label, a frame's name contains): an event's entry first, then the runtime's own work.
KINDS = [
    ("a request (a connect, a link's open)", "WorkerEntrypoint::request"),
    ("a WebSocket message to the object (hibernatable)", "HibernatableWebSocket"),
    ("a message on a socket the object opened (a relay's link)", "WebSocket::readLoop"),
    ("a timer (the end of a turn, a window)", "setTimeoutImpl"),
    ("the alarm", "runAlarm"),
    ("an RPC call", "EventDispatcher"),
    ("garbage collection", "Heap::"),
    ("sending: a socket's pump", "WebSocket::pump"),
    ("capnp: the message loop", "messageLoop"),
    ("capnp: writing", "writeMessages"),
    ("V8's background jobs (compiling)", "JobTaskWrapper"),
    ("microtasks", "runMicrotasks"),
]
EVENTS = {KINDS[i][0] for i in range(5)}


def samples(lines):
    cur = None
    for line in lines:
        if line.strip() and not line.startswith((" ", "\t")):
            if cur:
                yield cur
            cur = (float(line.split()[0].rstrip(":")), [])
        elif line.strip() and cur:
            parts = line.strip().split(None, 1)
            cur[1].append(parts[1] if len(parts) > 1 else "?")
    if cur:
        yield cur


def unnamed(frame):
    return frame.startswith(("[unknown]", "0x", "?"))


def main():
    t0 = float(sys.argv[1])
    lo = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
    hi = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
    all_ = [(t - t0, st) for t, st in samples(sys.stdin)]
    per_second = collections.Counter(int(t) for t, _ in all_ if t >= 0)
    print("samples per second after the load's start (2,000 a second is one core):")
    print("  " + " ".join(f"{s}s:{n}" for s, n in sorted(per_second.items())))
    window = [(t, st) for t, st in all_ if (lo is None or t >= lo) and (hi is None or t < hi)]
    span = f"{lo if lo is not None else 'start'}..{hi if hi is not None else 'end'} s"
    print(f"{len(window)} samples in {span}:")
    kinds, own = collections.Counter(), collections.Counter()
    for _, st in window:
        label = next((k for k, pat in KINDS if any(pat in f for f in st)), "the rest")
        kinds[label] += 1
        if label in EVENTS and st and unnamed(st[0]):
            own[label] += 1
    for label, n in kinds.most_common():
        extra = f" (the object's own code, unnamed frames: {own[label]})" if label in EVENTS else ""
        print(f"  {n:6d}  {label}{extra}")


main()
