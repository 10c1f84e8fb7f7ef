# Respin service image. Debian bookworm (glibc 2.36) is what the bundled uWebSockets.js binaries need.
# Production dependencies only (`npm ci --omit=dev`: esbuild strips the types at load, no tsc or tsx), and the
# service runs as the unprivileged `node` user, owning nothing but its data directory.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# postinstall mends the postgres driver (scripts/patch-postgres.mjs)
COPY scripts ./scripts
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY tsconfig.json ./
COPY src ./src
COPY sql ./sql
COPY clickhouse ./clickhouse
# The embedded stores and the secrets key file live under DATA_DIR; the rest of /app stays root's, read-only to the service.
RUN mkdir -p /app/data && chown node:node /app/data
ENV DATA_DIR=/app/data
VOLUME ["/app/data"]
USER node
EXPOSE 8080
CMD ["node", "--import", "./src/ts-loader.mjs", "--enable-source-maps", "src/main.ts"]
