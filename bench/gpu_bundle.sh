#!/usr/bin/env bash
# Builds .gpu/bundle/site.tar.xz for a GPU machine with no network whose Python 3.12 already has
# torch (CUDA), numpy, pandas, pyarrow and the like: what sweeps needs at run time beyond those,
# pruned, plus sweeps itself (a wheel of this checkout's HEAD). About 45 MB.
# Run from the project root: echo /.gpu/ >> .git/info/exclude; bash bench/gpu_bundle.sh [PYTHON3.12]
# There, before anything else:
#   mkdir -p /tmp/site && tar -xJf .gpu/bundle/site.tar.xz -C /tmp/site && export PYTHONPATH=$PWD:/tmp/site
# The pins are the versions the suite ran on; check them against pyproject.toml before use.
set -euo pipefail
PY=${1:-python3.12}
MAIN=${MAIN:-$(pwd)}
ROOT=$(pwd)/.gpu
STAGE=$ROOT/stage
mkdir -p "$ROOT/bundle" "$ROOT/wheels"
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version'

# sweeps: a wheel of the landed HEAD, built from a copy (nothing written into $MAIN)
src=$(mktemp -d)
git -C "$MAIN" archive HEAD | tar -x -C "$src"
rm -f "$ROOT"/wheels/sweeps-*.whl
"$PY" -m pip wheel -q --no-deps -w "$ROOT/wheels" "$src"
rm -rf "$src"

# Everything in the closure of ray[default,tune,train]==2.60.0, optuna, cmaes, mlflow, hydra-core
# that is not in the image (resolved for cp312 on 2026-11-28), + typing-extensions (pydantic 2.14
# needs >= 4.14.1; newer than the image's is harmless).
rm -rf "$STAGE"
"$PY" -m pip install -q --no-deps --no-compile --prefer-binary --target "$STAGE" \
  "$ROOT"/wheels/sweeps-*.whl \
  ray==2.60.0 optuna==5.0.0 cmaes==0.13.1 mlflow==3.17.2 mlflow-skinny==3.17.2 \
  mlflow-tracing==3.17.2 hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3 \
  tensorboardx==2.6.5 colorlog==6.12.0 \
  aiohttp-cors==0.8.1 colorful==0.5.8 opencensus==0.11.4 opencensus-context==0.1.3 \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
  opentelemetry-exporter-prometheus==0.66b2 opentelemetry-semantic-conventions==0.66b2 \
  py-spy==0.4.3 smart-open==9.0.2 virtualenv==21.15.11 distlib==0.4.4 platformdirs==4.14.8 \
  python-discovery==1.9.6 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 typing-extensions==4.16.0 jsonschema==4.26.0 \
  jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
  alembic==1.20.1 mako==1.4.3 sqlalchemy==2.1.9 sqlparse==0.6.1 flask==3.1.3 flask-cors==6.0.5 \
  blinker==1.9.0 itsdangerous==2.2.0 graphene==3.4.3 graphql-core==3.2.14 graphql-relay==3.2.0 \
  gunicorn==26.2.0 huey==3.5.4 docker==7.2.0 skops==0.16.0 prettytable==3.18.0 wcwidth==0.9.4 \
  cachetools==7.3.3 databricks-sdk==0.162.0 google-auth==2.63.0 google-api-core==2.44.0 \
  googleapis-common-protos==1.76.0 proto-plus==1.29.0 pyasn1==0.6.5 pyasn1-modules==0.4.2 \
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3 \
  importlib-metadata==9.1.0 python-dotenv==1.2.4 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 \
  2>&1 | { grep -v "is ignored" || true; }
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "pip install failed: no bundle" >&2; exit 1; }

# Prune what no run here imports: Ray's Java jars, the dashboard's web build, RLlib, Serve, LLM; MLflow's web UI build;
# console scripts (their shebangs name this machine's python; the runs use python3 -m) with
# py-spy's binary; bundled test suites; byte code.
rm -rf "$STAGE"/ray/jars "$STAGE"/ray/rllib "$STAGE"/ray/serve "$STAGE"/ray/llm \
  "$STAGE"/ray/dashboard/client "$STAGE"/mlflow/server/js "$STAGE"/bin
find "$STAGE" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
# Ray's dashboard (its State API: Train's placement-group cleaner, bench phases) starts only if
# its web build folder exists: keep an empty one.
mkdir -p "$STAGE"/ray/dashboard/client/build/static && echo '<html></html>' > "$STAGE"/ray/dashboard/client/build/index.html
du -sh "$STAGE"
rm -f "$ROOT/bundle/site.tar.xz"
tar -C "$STAGE" -cf - . | xz -T1 -9 > "$ROOT/bundle/site.tar.xz"
ls -la "$ROOT/bundle/site.tar.xz"
