# syntax=docker/dockerfile:1
# The Harness app server as a container image (docs/deploy.md). Build from the repository root:
#   docker build -t harness .
# Runs as the unprivileged user `harness`; the run store lives in the /data volume.

ARG NODE_IMAGE=node:20-bookworm-slim

# --- build: compile TypeScript and the one native module, then drop the dev dependencies ------
FROM ${NODE_IMAGE} AS build
# A toolchain for better-sqlite3 when no prebuilt binary can be fetched (GitHub unreachable from
# the build). It stays in this stage; the runtime image carries none of it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# node-gyp compiles against the image's own Node headers instead of downloading them.
ENV npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# Install scripts only for the package that needs one (package.json "allowScripts"), so no
# other dependency's script runs during the build.
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# --- runtime ---------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# git: the local sandbox and the engine's own git calls. tini: PID 1 that forwards SIGTERM to
# Node (which drains runs, see main.ts) and reaps the processes runs leave behind. The user's ids
# are fixed at 999, the ids bookworm's useradd gave it when they were not: a Kubernetes pod names
# its user by number (deploy/kubernetes), and a /data volume keeps its owner across rebuilds.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 999 harness \
 && useradd --system --uid 999 --gid harness --create-home --home-dir /home/harness --shell /usr/sbin/nologin harness \
 && mkdir -p /data \
 && chown harness:harness /data
WORKDIR /app
# The code stays owned by root: the app can read it, not change it.
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY app.yml ./
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    LOG_FORMAT=json \
    HARNESS_DB=/data/harness.db
USER harness
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# A small young generation keeps a process that streams run pages lean and its lag low
# (docs/benchmarks.md, "Run page live stream"); the same flag as `npm start`.
CMD ["node", "--max-semi-space-size=2", "dist/main.js"]
