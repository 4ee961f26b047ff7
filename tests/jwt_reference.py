"""The reference verifier for tests/jwt_fuzz.rs: PyJWT (at least 2.12, the first to refuse an
unknown `crit`) checks every token homeroom's verifier accepted, at the fuzzer's fixed clock.

    python3 tests/jwt_reference.py < accepted.jsonl

Each input line is {"token", "secrets", "audience", "now", "leeway"}: the token is accepted if
PyJWT decodes it (HS256 only) with one of the secrets, the deployment's audience (None: a token
must name none) and the clock leeway that homeroom allows `nbf` and `iat`. Prints one JSON line:
{"version", "checked", "accepted", "refused": [first few refusals with PyJWT's reason]}.
"""

import json
import sys
from datetime import datetime, timezone

import jwt  # PyJWT
import jwt.api_jwt


def version(v: str) -> tuple:
    return tuple(int(p) for p in v.split(".")[:2])


class FixedClock(datetime):
    """PyJWT reads the time as datetime.now(tz=...); the fuzzer's tokens are made for a
    fixed `now`, which this returns."""

    at = 0.0

    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(cls.at, tz=tz or timezone.utc)


def main() -> None:
    if version(jwt.__version__) < (2, 12):
        sys.exit(f"PyJWT {jwt.__version__} does not check `crit`; tests/python-requirements.txt pins >= 2.12")
    jwt.api_jwt.datetime = FixedClock
    checked, accepted, refused = 0, 0, []
    for line in sys.stdin:
        case = json.loads(line)
        FixedClock.at = float(case["now"])
        reasons = []
        for secret in case["secrets"]:
            try:
                jwt.decode(
                    case["token"],
                    secret,
                    algorithms=["HS256"],
                    audience=case["audience"],
                    leeway=case["leeway"],
                )
                break
            except jwt.PyJWTError as e:
                reasons.append(f"{type(e).__name__}: {e}")
        else:
            if len(refused) < 20:
                refused.append({"token": case["token"], "why": reasons})
            checked += 1
            continue
        checked += 1
        accepted += 1
    print(json.dumps({"version": jwt.__version__, "checked": checked, "accepted": accepted,
                      "refused": refused}))


if __name__ == "__main__":
    main()
