# syntax=docker/dockerfile:1
# keyhaven: production image. Runs the production command of docs/operations.md (bin/keyhaven.mjs: TypeScript through tsx's
# loader, in the one node process), so there is no build output to drift from the sources; migrations are applied
# at start under an advisory lock.

FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# Dependencies' install scripts stay off; our patches to them (patches/, see test/postgres-driver.test.ts) apply.
RUN npm ci --omit=dev --ignore-scripts && npx patch-package && npm cache clean --force

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 KEYHAVEN_DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY migrations ./migrations
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/v1/liveness').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Exec form, node as PID 1 with no npm or shell in between: `docker stop`'s SIGTERM reaches the server, which
# finishes in-flight requests and exits.
CMD ["node", "bin/keyhaven.mjs", "serve"]
