# Respin service image. Debian bookworm (glibc 2.36) is what the bundled uWebSockets.js binaries need.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY tsconfig.json ./
COPY src ./src
COPY sql ./sql
COPY clickhouse ./clickhouse
USER node
EXPOSE 8080
CMD ["node", "--import", "tsx", "src/main.ts"]
