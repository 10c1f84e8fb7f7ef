// Dedupe by event_id per brand, for at least 7 days, across restarts and API processes.
//
// With Redis: each id is claimed as *pending* (SET NX GET, one EVALSHA per group), turned into *stored*
// after the durable write, and released on failure, so a failed write never makes the retry look like a
// duplicate. A pending id whose owner is gone (crash) or is too old is verified against ClickHouse, the
// store of record: found → duplicate, not found → taken over. A pending id of a live owner means a
// concurrent write of the same event: we wait for it to settle.
//
// Without Redis: an in-process window of the ids stored by this process, backed by ClickHouse for
// everything it cannot vouch for (ids stored before this process started, evicted ids).
// While Redis is down: the same window, but it holds only the outage's ids (with Redis up, Redis is the
// memory: a window of every id would cost ~460 MB of heap per process at its 2M ids, for an outage
// path), so every other id is verified against ClickHouse, after the whole spool is flushed there. When
// Redis answers again, the outage's ids are marked stored in it before the next claim: Redis that was
// only unreachable still has its epoch, and would otherwise call a retry of them new.
import { randomUUID } from 'node:crypto'
import type { ClickHouse } from '../db/clickhouse.ts'
import type { Redis } from '../db/redis.ts'
import { AppError } from '../errors.ts'
import type { Logger } from '../lib/log.ts'

export interface DedupeEntry {
  /** The brand's tenant: ClickHouse is searched by (tenant, brand), its sort key's prefix. */
  tenantId: string
  brandId: string
  eventId: string
}

export interface Claim {
  /** Per entry: true when the event was already stored. */
  duplicate: boolean[]
  /** After the durable write: the claimed ids become "stored". */
  commit(): Promise<void>
  /** After a failed write: the claimed ids are free again. */
  release(): Promise<void>
  /**
   * After a write whose outcome is unknown (the connection died while its COMMIT may have been on its
   * way, and asking afterwards failed too): the ids are neither stored nor free. A later claim of them
   * verifies them against the store of record, after the whole spool is flushed there.
   */
  unsettled(): void
}

export interface Dedupe {
  /** One Redis round trip for the entries, whatever their tenants (a group may span several). */
  claim(entries: DedupeEntry[]): Promise<Claim>
  stop(): Promise<void>
}

/** Redis keys and local entries outlive the contract's 7 days by one. */
export const DEDUPE_TTL_SEC = 8 * 24 * 3600
const ALIVE_TTL_SEC = 5
const HEARTBEAT_MS = 1500
/** A pending claim older than this is not trusted even when its owner looks alive. */
const PENDING_STALE_MS = 20_000
const WAIT_STEP_MS = 20
const WAIT_MAX_MS = 10_000
const LOCAL_MAX = 2_000_000
/** Ids per script call when the outage's ids are written back to Redis. */
const STORE_CHUNK = 5_000

// KEYS[1] is the epoch key (see below); its value comes back as the last element.
const CLAIM_LUA = `
local out = {}
for i = 2, #KEYS do
  local prev = redis.call('SET', KEYS[i], ARGV[1], 'NX', 'GET', 'EX', ARGV[2])
  if prev then out[i - 1] = prev else out[i - 1] = '' end
end
out[#KEYS] = redis.call('GET', KEYS[1]) or ''
return out`
/**
 * Redis is the dedupe memory. `rsp:dd:epoch` tells whether that memory is whole: set at first use
 * (`i:<ms>` when ClickHouse holds no recent events, i.e. a fresh deployment), it disappears with
 * everything else when Redis restarts empty. It is then re-created as `r:<ms>`, and for the next 8 days
 * every newly claimed id is also checked against ClickHouse.
 */
const EPOCH_KEY = 'rsp:dd:epoch'
const STORE_LUA = `
for i = 1, #KEYS do redis.call('SET', KEYS[i], 's', 'EX', ARGV[1]) end
return #KEYS`
const RELEASE_LUA = `
local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]); n = n + 1 end
end
return n`
const TAKEOVER_LUA = `
local out = {}
for i = 1, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  if cur == ARGV[i] or not cur then
    redis.call('SET', KEYS[i], ARGV[#KEYS + 1], 'EX', ARGV[#KEYS + 2]); out[i] = 1
  else out[i] = 0 end
end
return out`

type RedisWithScripts = Redis & {
  rspDedupeClaim(numKeys: number, ...args: (string | number)[]): Promise<string[]>
  rspDedupeStore(numKeys: number, ...args: (string | number)[]): Promise<number>
  rspDedupeRelease(numKeys: number, ...args: (string | number)[]): Promise<number>
  rspDedupeTakeover(numKeys: number, ...args: (string | number)[]): Promise<number[]>
}

/** An event's id within the dedupe memory (brand ids are unique across tenants), and its Redis key. */
const idOf = (e: DedupeEntry) => `${e.brandId}:${e.eventId}`
const keyOfId = (id: string) => `rsp:dd:${id}`
const keyOf = (e: DedupeEntry) => keyOfId(idOf(e))
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Which of these event ids ClickHouse already holds for the brand. */
export async function findStoredIds(ch: ClickHouse, tenantId: string, brandId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set()
  const rows = await ch.query<{ event_id: string }>(
    'SELECT DISTINCT event_id FROM events WHERE tenant_id = {t:UUID} AND brand_id = {b:UUID} AND event_id IN {ids:Array(String)}',
    { t: tenantId, b: brandId, ids },
  )
  return new Set(rows.map((r) => r.event_id))
}

/**
 * Spool mode (spool.ts): events other processes acknowledged may still be on their way to ClickHouse.
 * 'others' flushes those; 'all' also ours (for claims of our own that never turned "stored").
 */
export type BeforeVerify = (scope: 'all' | 'others') => Promise<void>

async function verifyAgainstStore(ch: ClickHouse, entries: DedupeEntry[]): Promise<boolean[]> {
  // Brand ids are unique across tenants: the brand alone tells the tenant.
  const byBrand = new Map<string, number[]>()
  entries.forEach((e, i) => {
    const list = byBrand.get(e.brandId) ?? []
    list.push(i)
    byBrand.set(e.brandId, list)
  })
  const found = new Array<boolean>(entries.length).fill(false)
  for (const idx of byBrand.values()) {
    const first = entries[idx[0] as number] as DedupeEntry
    const stored = await findStoredIds(ch, first.tenantId, first.brandId, idx.map((i) => (entries[i] as DedupeEntry).eventId))
    for (const i of idx) found[i] = stored.has((entries[i] as DedupeEntry).eventId)
  }
  return found
}

export function createDedupe(deps: { redis: Redis | undefined; ch: ClickHouse; log: Logger; beforeVerify?: BeforeVerify }): Dedupe {
  const { ch, log } = deps
  const beforeVerify: BeforeVerify = deps.beforeVerify ?? (async () => {})
  const local = createLocalWindow(ch, beforeVerify)
  if (!deps.redis) return { claim: (e) => local.claim(e, false), stop: async () => {} }

  const redis = deps.redis as RedisWithScripts
  redis.defineCommand('rspDedupeClaim', { lua: CLAIM_LUA })
  redis.defineCommand('rspDedupeStore', { lua: STORE_LUA })
  redis.defineCommand('rspDedupeRelease', { lua: RELEASE_LUA })
  redis.defineCommand('rspDedupeTakeover', { lua: TAKEOVER_LUA })
  const procId = randomUUID()
  const aliveKey = (id: string) => `rsp:alive:${id}`
  const beat = () => redis.set(aliveKey(procId), '1', 'EX', ALIVE_TTL_SEC).catch(() => {})
  void beat()
  const heartbeat = setInterval(beat, HEARTBEAT_MS)
  heartbeat.unref()
  let degradedSince = 0
  let epochValue = ''

  /** True while Redis's dedupe memory may be missing ids stored in the last 8 days. */
  async function memoryIncomplete(): Promise<boolean> {
    if (!epochValue) {
      // First use, or Redis came back empty: a fresh deployment only if ClickHouse has no recent events.
      await beforeVerify('all')
      const recent = await ch.query<{ n: number }>('SELECT 1 AS n FROM events WHERE received_at > now() - INTERVAL 8 DAY LIMIT 1')
      const value = `${recent.length ? 'r' : 'i'}:${Date.now()}`
      await redis.set(EPOCH_KEY, value, 'NX')
      epochValue = (await redis.get(EPOCH_KEY)) ?? value
      if (epochValue.startsWith('r:')) log.warn('dedupe: redis has lost its dedupe memory; verifying new ids against ClickHouse for 8 days')
    }
    return epochValue.startsWith('r:') && Date.now() - Number(epochValue.slice(2)) < DEDUPE_TTL_SEC * 1000
  }

  async function claimRedis(entries: DedupeEntry[]): Promise<Claim> {
    const token = `p|${procId}|${Date.now()}`
    const keys = entries.map(keyOf)
    const duplicate = new Array<boolean>(entries.length).fill(false)
    const claimed: number[] = []
    let todo = entries.map((_, i) => i)
    const deadline = Date.now() + WAIT_MAX_MS
    try {
      while (todo.length) {
        const answers = await redis.rspDedupeClaim(todo.length + 1, EPOCH_KEY, ...todo.map((i) => keys[i] as string), token, DEDUPE_TTL_SEC)
        epochValue = answers[todo.length] ?? ''
        const pending: { i: number; value: string }[] = []
        todo.forEach((i, n) => {
          const prev = answers[n] ?? ''
          if (prev === '') claimed.push(i)
          else if (prev === 's') duplicate[i] = true
          else pending.push({ i, value: prev })
        })
        todo = []
        if (!pending.length) break
        // Pending claims of others: stale ones (dead owner, or too old) are checked against ClickHouse.
        const owners = [...new Set(pending.map((p) => p.value.split('|')[1] ?? ''))].filter((o) => o !== procId)
        const alive = new Set<string>()
        if (owners.length) {
          const flags = await redis.mget(...owners.map(aliveKey))
          owners.forEach((o, n) => flags[n] && alive.add(o))
        }
        const now = Date.now()
        const stale = pending.filter((p) => {
          const [, owner = '', at = '0'] = p.value.split('|')
          return !alive.has(owner) || now - Number(at) > PENDING_STALE_MS
        })
        const live = pending.filter((p) => !stale.includes(p))
        if (stale.length) {
          await beforeVerify('all')
          const found = await verifyAgainstStore(ch, stale.map((p) => entries[p.i] as DedupeEntry))
          const takeover = stale.filter((_, n) => !found[n])
          const foundKeys = stale.filter((_, n) => found[n])
          for (const p of foundKeys) duplicate[p.i] = true
          if (foundKeys.length) await redis.rspDedupeStore(foundKeys.length, ...foundKeys.map((p) => keys[p.i] as string), DEDUPE_TTL_SEC)
          if (takeover.length) {
            const ok = await redis.rspDedupeTakeover(
              takeover.length,
              ...takeover.map((p) => keys[p.i] as string),
              ...takeover.map((p) => p.value),
              token,
              DEDUPE_TTL_SEC,
            )
            takeover.forEach((p, n) => (ok[n] === 1 ? claimed.push(p.i) : todo.push(p.i)))
          }
        }
        if (live.length) {
          if (Date.now() > deadline) {
            throw new AppError('SERVICE_UNAVAILABLE', 'events with these event_ids are being written by another request; retry', undefined, { 'retry-after': '1' })
          }
          await sleep(WAIT_STEP_MS)
          todo.push(...live.map((p) => p.i))
        }
      }
    } catch (err) {
      if (claimed.length) await releaseKeys(claimed.map((i) => keys[i] as string), token)
      throw err
    }
    if (claimed.length && (await memoryIncomplete())) {
      // Redis lost its memory within the window: what it calls new may be stored already.
      const fresh = claimed.map((i) => entries[i] as DedupeEntry)
      await beforeVerify('others')
      const found = await verifyAgainstStore(ch, fresh)
      const stored = claimed.filter((_, n) => found[n])
      if (stored.length) {
        for (const i of stored) duplicate[i] = true
        await redis.rspDedupeStore(stored.length, ...stored.map((i) => keys[i] as string), DEDUPE_TTL_SEC)
        claimed.splice(0, claimed.length, ...claimed.filter((_, n) => !found[n]))
      }
    }
    const claimedKeys = claimed.map((i) => keys[i] as string)
    return {
      duplicate,
      async commit() {
        if (!claimedKeys.length) return
        try {
          await redis.rspDedupeStore(claimedKeys.length, ...claimedKeys, DEDUPE_TTL_SEC)
        } catch (err) {
          // The ids stay pending under our token; once they are older than PENDING_STALE_MS, or we are
          // gone, readers verify them against ClickHouse, where they are.
          log.warn({ err, ids: claimedKeys.length }, 'dedupe: could not mark ids stored in redis')
        }
      },
      release: () => releaseKeys(claimedKeys, token),
      // Left pending under our token: a retry waits for them, and once they are older than
      // PENDING_STALE_MS verifies them against ClickHouse after flushing the whole spool (above).
      unsettled: () => {},
    }
  }

  async function releaseKeys(keys: string[], token: string): Promise<void> {
    if (!keys.length) return
    try {
      await redis.rspDedupeRelease(keys.length, ...keys, token)
    } catch (err) {
      // Left pending: a later claim sees them stale and verifies against ClickHouse (where they are not).
      log.warn({ err, ids: keys.length }, 'dedupe: could not release claims in redis')
    }
  }

  /** Marks the window's ids (those this process stored while Redis was down) stored in Redis, and empties it. */
  async function syncWindow(): Promise<number> {
    const ids = local.take()
    try {
      for (let i = 0; i < ids.length; i += STORE_CHUNK) {
        const chunk = ids.slice(i, i + STORE_CHUNK).map(keyOfId)
        await redis.rspDedupeStore(chunk.length, ...chunk, DEDUPE_TTL_SEC)
      }
    } catch (err) {
      local.putBack(ids)
      throw err
    }
    return ids.length
  }

  async function endOutage(): Promise<void> {
    let ids = 0
    // Again while groups written through the window meanwhile left ids in it (no await between the last
    // check and the end of the outage).
    do ids += await syncWindow()
    while (local.size() > 0)
    log.info({ downMs: Date.now() - degradedSince, ids }, 'dedupe: redis is back; the ids stored during the outage are marked in it')
    degradedSince = 0
  }

  return {
    async claim(entries) {
      if (entries.length === 0) return { duplicate: [], commit: async () => {}, release: async () => {}, unsettled: () => {} }
      try {
        if (degradedSince) await endOutage()
        return await claimRedis(entries)
      } catch (err) {
        if (err instanceof AppError) throw err
        if (!degradedSince) {
          degradedSince = Date.now()
          log.warn({ err }, 'dedupe: redis unavailable, falling back to the in-process window verified against ClickHouse')
        }
        // Other processes may write meanwhile, and the window does not hold what we stored before the
        // outage: every id it does not know is verified.
        const fallback = await local.claim(entries, true)
        return {
          ...fallback,
          async commit() {
            await fallback.commit()
            // Redis came back while this group was written: its ids go there now, or before the next claim.
            if (!degradedSince) await syncWindow().catch(() => (degradedSince ||= Date.now()))
          },
        }
      }
    },
    async stop() {
      clearInterval(heartbeat)
      await redis.del(aliveKey(procId)).catch(() => {})
    },
  }
}

/** The in-process window: ids this process stored, plus ClickHouse for the rest. */
function createLocalWindow(ch: ClickHouse, beforeVerify: BeforeVerify) {
  const stored = new Map<string, number>()
  /** Ids of writes with an unknown outcome (Claim.unsettled): verified, after a full flush, when claimed again. */
  const unsettled = new Set<string>()
  let evicted = false
  /** Brands that had events in ClickHouse before this process first wrote to them. */
  const history = new Map<string, Promise<boolean>>()

  const hasHistory = (tenantId: string, brandId: string) => {
    let h = history.get(brandId)
    if (!h) {
      h = beforeVerify('others')
        .then(() => ch.query<{ n: number }>('SELECT 1 AS n FROM events WHERE tenant_id = {t:UUID} AND brand_id = {b:UUID} LIMIT 1', { t: tenantId, b: brandId }))
        .then((rows) => rows.length > 0)
      h.catch(() => history.delete(brandId))
      history.set(brandId, h)
    }
    return h
  }

  function remember(entries: DedupeEntry[]): void {
    const now = Date.now()
    for (const e of entries) {
      const k = idOf(e)
      stored.delete(k)
      stored.set(k, now)
    }
    if (stored.size > LOCAL_MAX) {
      evicted = true
      let drop = stored.size - Math.floor(LOCAL_MAX * 0.9)
      for (const k of stored.keys()) {
        if (drop-- <= 0) break
        stored.delete(k)
      }
    }
  }

  /** redisDown: the window holds only this outage's ids; verify all others, whoever wrote them. */
  async function claim(entries: DedupeEntry[], redisDown: boolean): Promise<Claim> {
    const now = Date.now()
    const duplicate = new Array<boolean>(entries.length).fill(false)
    const unknown: number[] = []
    entries.forEach((e, i) => {
      const at = stored.get(idOf(e))
      if (at !== undefined && now - at < DEDUPE_TTL_SEC * 1000) duplicate[i] = true
      else unknown.push(i)
    })
    if (unknown.length) {
      const brands = new Map(unknown.map((i) => [(entries[i] as DedupeEntry).brandId, (entries[i] as DedupeEntry).tenantId]))
      const needs = new Set<string>()
      for (const [b, tenantId] of brands) if (redisDown || evicted || (await hasHistory(tenantId, b))) needs.add(b)
      const mine = unsettled.size ? unknown.filter((i) => unsettled.has(idOf(entries[i] as DedupeEntry))) : []
      const toVerify = unknown.filter((i) => needs.has((entries[i] as DedupeEntry).brandId) || mine.includes(i))
      // Without Redis our own spooled events are in `stored`, other processes' may still be in the spool.
      // With Redis down, ours from before the outage may be there too, and so may an unsettled write's.
      if (toVerify.length) await beforeVerify(redisDown || mine.length ? 'all' : 'others')
      const found = await verifyAgainstStore(ch, toVerify.map((i) => entries[i] as DedupeEntry))
      toVerify.forEach((i, n) => {
        if (found[n]) duplicate[i] = true
      })
      for (const i of mine) unsettled.delete(idOf(entries[i] as DedupeEntry))
    }
    const claimed = entries.filter((_, i) => !duplicate[i])
    return {
      duplicate,
      commit: async () => remember(claimed),
      release: async () => {},
      unsettled: () => {
        for (const e of claimed) unsettled.add(idOf(e))
      },
    }
  }

  /** Empties the window and returns its ids (`brand:event_id`), for Redis after an outage. */
  function take(): string[] {
    const ids = [...stored.keys()]
    stored.clear()
    return ids
  }

  function putBack(ids: string[]): void {
    const now = Date.now()
    for (const k of ids) if (!stored.has(k)) stored.set(k, now)
  }

  return { claim, take, putBack, size: () => stored.size }
}
