#!/usr/bin/env bash
# The web table's built files in dist/ (committed, so `make run` needs no npm): the generated clients,
# then one bundle of src/main.ts, and the static page. Run after a proto change: npm ci && npm run build.
set -euo pipefail
cd "$(dirname "$0")"
bash ./generate.sh
./node_modules/.bin/tsc --noEmit
rm -rf dist && mkdir -p dist
./node_modules/.bin/esbuild src/main.ts --bundle --format=esm --target=es2020 --minify \
    --legal-comments=none --outfile=dist/app.js
cp static/index.html static/style.css dist/
