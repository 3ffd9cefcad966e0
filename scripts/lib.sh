# Shared by the scripts in this folder: strict mode, the repository root, and one target directory
# for every build (the CLI, the tests and later the desktop app share compiled dependencies).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export PATH="$HOME/.cargo/bin:$PATH"
cd "$REPO"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
