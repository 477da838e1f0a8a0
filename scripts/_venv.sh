# Sourced by scripts/up and scripts/test: a virtualenv in .venv with requirements.txt installed.
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "Creating .venv with $($PYTHON --version)…"
  "$PYTHON" -m venv .venv
fi
if ! cmp -s requirements.txt .venv/.requirements.installed 2>/dev/null; then
  echo "Installing requirements.txt into .venv…"
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt .venv/.requirements.installed
fi
export PATH="$PWD/.venv/bin:$PATH"
