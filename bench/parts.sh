# bench/parts.sh: sourced by bench/split, bench/profile and bench/once. Writes the wrangler configs that
# split homeroom's Worker into its parts (the home, the relays, the edge), each a `wrangler dev`
# of its own bound to the others through wrangler's dev registry, and defines `start_parts`
# (starts "${parts[@]}" with "$@" as extra `wrangler dev` arguments; sets $objects and
# $edge_port), `start_mode` (the parts of one measured mode), `stop_parts` and `binding`. Needs $HOMEROOM_ROOT (scripts/env); everything it
# makes is under $work, removed on exit.
work="$(mktemp -d "${TMPDIR:-/tmp}/homeroom-split.XXXXXX")"
# A registry of this run's own, so that no other wrangler dev on the machine is bound.
export WRANGLER_REGISTRY_PATH="$work/registry"
groups=()
cleanup() {
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

main="$HOMEROOM_ROOT/worker/build/index.js"
binding() { # name class [script]
  printf '[[durable_objects.bindings]]\nname = "%s"\nclass_name = "%s"\n' "$1" "$2"
  [[ -n "${3:-}" ]] && printf 'script_name = "%s"\n' "$3"
  return 0
}
header() { printf 'name = "%s"\nmain = "%s"\ncompatibility_date = "2026-04-01"\n' "$1" "$main"; }
{
  header homeroom-home
  binding ROOMS Room
  binding ROOM_RELAYS RoomRelay
  printf '[[migrations]]\ntag = "v1"\nnew_sqlite_classes = ["Room", "RoomRelay"]\n'
} >"$work/home.toml"
{
  header homeroom-relays
  binding ROOMS Room homeroom-home
  binding ROOM_RELAYS RoomRelay
  printf '[[migrations]]\ntag = "v1"\nnew_sqlite_classes = ["RoomRelay"]\n'
} >"$work/relays.toml"
{
  header homeroom-edge
  binding ROOMS Room homeroom-home
  binding ROOM_RELAYS RoomRelay homeroom-relays
} >"$work/edge.toml"

vars=(--var ANONYMOUS_DEV:true --var RATE_PER_SEC:100000 --var RATE_BURST:100000
  --var USER_RATE_PER_SEC:100000 --var USER_RATE_BURST:100000 --var LOG_CONNECTIONS:off
  --var "ADMIN_KEY:bench-admin-key-not-a-secret-but-32-bytes-long")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts the three parts with `$@` as extra vars; sets $objects and $edge_port.
start_parts() {
  objects=""
  for part in "${parts[@]}"; do
    local port inspector log="$work/$part.log"
    port="$(free_port)"
    inspector="$(free_port)"
    setsid "$HOMEROOM_ROOT/node_modules/.bin/wrangler" dev -c "$work/$part.toml" \
      --ip 127.0.0.1 --port "$port" --inspector-port "$inspector" \
      --persist-to "$work/state-$part" --show-interactive-dev-session=false --log-level warn \
      "${vars[@]}" "$@" >"$log" 2>&1 &
    local pgid=$!
    groups+=("$pgid")
    for _ in $(seq 120); do
      curl -s -o /dev/null -m 2 "http://127.0.0.1:$port/__bench_ready" && break
      sleep 1
    done
    objects+="${objects:+,}$part:$pgid:$port"
    edge_port="$port"
  done
  sleep 3 # the registry tells each part where the others are
}

stop_parts() {
  for g in "${groups[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  sleep 2
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  groups=()
}

# Writes the configs of a plain room's variant: its object (module `main`, class `class`,
# default Room) as "<name>-home", under the plain room's Worker as "<name>-edge".
plain_configs() { # name main [class]
  local name="$1" src="$2" class="${3:-Room}"
  local plain="$HOMEROOM_ROOT/bench/baselines/plain/src/index.js"
  printf 'name = "%s-home"\nmain = "%s"\ncompatibility_date = "2026-04-01"\n' "$name" "$src" >"$work/home.toml"
  binding ROOMS "$class" >>"$work/home.toml"
  printf '[[migrations]]\ntag = "v1"\nnew_sqlite_classes = ["%s"]\n' "$class" >>"$work/home.toml"
  printf 'name = "%s-edge"\nmain = "%s"\ncompatibility_date = "2026-04-01"\n' "$name" "$plain" >"$work/edge.toml"
  binding ROOMS "$class" "$name-home" >>"$work/edge.toml"
}

# Starts the parts one mode of bench/profile and bench/once measures and sets $target (the
# load's `--target`): `direct` (homeroom, every socket at the home), `relayed` (every socket at
# a relay of its region), or a baseline's object (`plain`, `plain-welcome`, `plain-durable`;
# the plain object in Rust: `floor` through workers-rs, `bare-floor` a bare wasm-bindgen class,
# `bare-welcome` that class saying hello; bench/baselines/rust-floor/build.sh builds them).
# Fails for any other mode.
start_mode() { # mode
  case "$1" in
    direct) parts=(home relays edge); start_parts; target=homeroom ;;
    relayed) parts=(home relays edge); start_parts --var RELAY_ABOVE:0; target=homeroom-relayed ;;
    plain | plain-welcome | plain-durable)
      plain_configs "$1" "$HOMEROOM_ROOT/bench/baselines/$1/src/index.js"
      parts=(home edge); start_parts; target=plain ;;
    floor | bare-floor | bare-welcome | bare-welcome-kept)
      local floor="$HOMEROOM_ROOT/bench/baselines/rust-floor/build/index.js"
      [[ -f "$floor" ]] || "$HOMEROOM_ROOT/bench/baselines/rust-floor/build.sh" >&2
      local class=Floor
      [[ "$1" == bare-floor ]] && class=BareFloor
      [[ "$1" == bare-welcome ]] && class=BareWelcome
      [[ "$1" == bare-welcome-kept ]] && class=BareWelcomeKept
      plain_configs "$1" "$floor" "$class"
      parts=(home edge); start_parts; target=plain ;;
    *) return 1 ;;
  esac
}
