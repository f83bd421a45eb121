#!/usr/bin/env bash
# Compiles src/ to dist/ (plain JavaScript: the roles run with `node dist/main.js`, not
# through a TypeScript loader, which costs start time and about 100 MB of memory per
# process). Skips the compile when nothing under src/ (or the build's tsconfig) is newer
# than the last build. `npm ci` runs it (prepare), and `npm run main` before each start.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=dist/.tsbuildinfo
if [ -f "$stamp" ] && [ -f dist/main.js ] \
  && [ -z "$(find src tsconfig.json tsconfig.build.json package-lock.json -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
echo "build: compiling src/ to dist/" >&2
node node_modules/typescript/bin/tsc -p tsconfig.build.json
touch "$stamp"
