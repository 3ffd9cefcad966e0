# Shared by the scripts in this folder: strict mode, the repository root, and one target directory
# for every build (the CLI, the tests and later the desktop app share compiled dependencies).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export PATH="$HOME/.cargo/bin:$PATH"
cd "$REPO"

log() { printf '\033[1m==> %s %s\033[0m\n' "$(date +%T)" "$*" >&2; }

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

# Builds the release tw-sandbox-helper statically linked: it starts once per sandboxed tool call,
# and without the dynamic loader that start is 0.3-0.4 ms shorter. Rust can only link one binary
# of a package statically through `cargo rustc` (rustflags apply to every crate), so the helper is
# built on its own, after anything that builds the package's binaries the ordinary way.
build_static_helper() {
  log "building tw-sandbox-helper (release, statically linked)"
  cargo rustc --locked --release -p tw-sandbox --bin tw-sandbox-helper -- -C target-feature=+crt-static
}

# Builds every binary and test of the workspace: the selection `cargo test --workspace` makes.
# Cargo picks dependency features by the packages and targets a command selects, so each script
# building its own selection (`-p tw-cli --bins`, `-p tw-desktop`) compiled most dependencies,
# and our crates, again with other features: about 300 crates more in a cold run.
build_workspace() {
  cargo build --locked --workspace --bins --tests
}
