"""Mint a homeroom room token with PyJWT, as a Python backend would.

    AUTH_SECRET=... python3 mint_token.py <kind> <room> <user> [name]

A homeroom token is a standard HS256 JWT: any JWT library mints it. The
claims are `room` (a room name, "*" or a prefix ending in "*"), `kind` (the
kind of room it opens: "chat" opens /chat/{room}/..., a list of kinds, or
"*"; a token without one opens no kind), `sub` (the user id), `exp`,
optionally `nbf`, `iat` and `info` (a JSON object of at most 1 KiB that
every member sees as this member's verified `info`). The Worker's test suite
runs this file (tests/e2e/edge_auth.rs) and connects with what it prints.
"""

import os
import sys
import time

import jwt  # PyJWT


def mint_token(secret: str, kind: str | list[str], room: str, user: str,
               name: str | None = None, ttl: int = 3600,
               kid: str | None = None) -> str:
    now = int(time.time())
    claims = {"room": room, "kind": kind, "sub": user, "iat": now,
              "exp": now + ttl}
    if name is not None:
        claims["info"] = {"name": name}
    headers = {"kid": kid} if kid else None
    return jwt.encode(claims, secret, algorithm="HS256", headers=headers)


if __name__ == "__main__":
    kind, room, user = sys.argv[1], sys.argv[2], sys.argv[3]
    name = sys.argv[4] if len(sys.argv) > 4 else None
    print(mint_token(os.environ["AUTH_SECRET"], kind, room, user, name,
                     kid=os.environ.get("AUTH_SECRET_KID") or None))
