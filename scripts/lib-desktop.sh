# Shared by the desktop scripts (scripts/build-ui and the Tauri app's): installing what they need,
# idempotently. Source it after scripts/lib.sh (it uses `log` and `REPO`).

# Installs the Debian packages not yet installed; no-op (and no apt call) when all are there.
# Retries once after `apt-get update`, since a fresh machine's package lists may be stale.
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  local apt=($sudo apt-get -o DPkg::Lock::Timeout=900 -y -q --no-install-recommends)
  if ! "${apt[@]}" install "${missing[@]}"; then
    $sudo apt-get -o DPkg::Lock::Timeout=900 -q update
    "${apt[@]}" install "${missing[@]}"
  fi
}

# The wasm-bindgen version Cargo.lock resolves; the CLI must be exactly this version, or the JS
# glue it writes does not match the wasm's expectations.
wasm_bindgen_lock_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$REPO/Cargo.lock"
}

# Installs wasm-bindgen-cli at the Cargo.lock version (about 4 minutes, once per machine) unless
# that exact version is already on PATH, then checks the one on PATH is it.
ensure_wasm_bindgen() {
  local want have
  want="$(wasm_bindgen_lock_version)"
  if [ -z "$want" ]; then
    echo "error: no wasm-bindgen in $REPO/Cargo.lock" >&2
    return 1
  fi
  have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
  if [ "$have" != "$want" ]; then
    log "installing wasm-bindgen-cli $want (have: ${have:-none})"
    # --locked uses the CLI's own tested dependency versions; a registry mirror can lack one of
    # them, and then the newest compatible versions do.
    cargo install --locked wasm-bindgen-cli --version "=$want" ||
      cargo install wasm-bindgen-cli --version "=$want"
    have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
  fi
  if [ "$have" != "$want" ]; then
    echo "error: wasm-bindgen on PATH is ${have:-missing}, Cargo.lock has $want" >&2
    return 1
  fi
}
