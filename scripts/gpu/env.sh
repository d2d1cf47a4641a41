# Sourced (from the repository root) by every GPU script: the Python to run as $PY (ARGUS_PYTHON, else torch's venv
# on the H200 machine, else python3), the carried wheels (.whl/, see ../shared/device/wheels) installed into
# $ARGUS_SITE (/tmp/argus-site) once per set of wheels, and that folder and the repository in front of PYTHONPATH,
# the Python's folder in front of PATH.
PY=${ARGUS_PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=$(command -v python3); fi
fi
ARGUS_SITE=${ARGUS_SITE:-/tmp/argus-site}
if ls .whl/*.whl >/dev/null 2>&1; then
  _argus_wheels=$(ls .whl/*.whl | cksum | cut -d' ' -f1)
  if [ "$(cat "$ARGUS_SITE/.wheels" 2>/dev/null)" != "$_argus_wheels" ]; then
    if "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$ARGUS_SITE" .whl/*.whl; then
      echo "$_argus_wheels" > "$ARGUS_SITE/.wheels"
    else
      echo "wheel install failed"
    fi
  fi
fi
for _argus_path in "$PWD" "$ARGUS_SITE"; do
  case ":${PYTHONPATH:-}:" in *":$_argus_path:"*) ;; *) PYTHONPATH="$_argus_path${PYTHONPATH:+:$PYTHONPATH}" ;; esac
done
export PY ARGUS_SITE PYTHONPATH PATH="$(dirname "$PY"):$PATH"
unset _argus_wheels _argus_path
