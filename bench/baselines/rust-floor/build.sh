#!/usr/bin/env bash
# bench/baselines/rust-floor/build.sh: builds the plain room's object in Rust into build/ (as
# homeroom's Worker is built: worker-build --release), for bench/run's and bench/split's rounds
# of it. A workspace of its own, with its own target directory (target/rust-floor).
set -euo pipefail
# shellcheck source=scripts/env
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/env"
cd "$HOMEROOM_ROOT/bench/baselines/rust-floor"
CARGO_TARGET_DIR="$HOMEROOM_ROOT/target/rust-floor" "$WORKER_BUILD_BIN" --release
