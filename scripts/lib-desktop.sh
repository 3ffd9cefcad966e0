# Shared by the desktop scripts (scripts/build-ui and the Tauri app's): installing the wasm-bindgen
# CLI they need, idempotently. Source it after scripts/lib.sh (it uses `log` and `REPO`).

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
