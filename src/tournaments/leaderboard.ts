// Live tournament leaderboards: a sorted set per active tournament, in Redis when REDIS_URL is set
// (shared by every process), else in this process's memory (embedded mode runs one process). PostgreSQL's
// tournament_participants is the truth; the sorted sets are a cache of it, written after each commit and
// rebuilt from it at start and by a periodic repair, so a crash between a commit and its cache update, a
// Redis restart or a process restart never leaves a wrong board for long.
//
// Order: score descending, then who reached the score first, then player id ascending (as the final ranks,
// src/gamification/engine.ts, endTournament). A sorted set orders equal scores by member, read in reverse
// here, so the member starts with the inverted reach time and the player id with each hex digit inverted:
// `${(MAX - reached_ms) padded}|${inverted player_id}|${player_id}|${external_id}`.
// Each player's entry carries the row's version; an update older than what the set holds is dropped, so
// two processes' updates of one player can arrive in any order.
import type { Redis } from '../db/redis.ts'

export interface BoardEntry {
  playerId: string
  externalId: string
  score: number
  reachedMs: number
  version: number
}

export interface Leaderboards {
  /** Applies entries (newer versions win). */
  update(tournamentId: string, entries: BoardEntry[]): Promise<void>
  /** Ranks offset+1.. offset+limit. */
  top(tournamentId: string, offset: number, limit: number): Promise<{ rank: number; player_id: string; external_id: string; score: number }[]>
  /** 1-based rank and score of a player, or null. */
  rankOf(tournamentId: string, playerId: string): Promise<{ rank: number; score: number } | null>
  total(tournamentId: string): Promise<number>
  drop(tournamentId: string): Promise<void>
  /** Takes a player off the board for good (an erasure): a later update of that player is ignored. */
  remove(tournamentId: string, playerId: string): Promise<void>
  kind: 'redis' | 'memory'
}

const MAX_MS = 9_999_999_999_999
/** A UUID whose text sorts in the reverse order: each hex digit d becomes f − d. */
const invertHex = (id: string) => id.replace(/[0-9a-f]/g, (d) => (15 - parseInt(d, 16)).toString(16))
const memberOf = (e: BoardEntry) => `${String(MAX_MS - e.reachedMs).padStart(13, '0')}|${invertHex(e.playerId)}|${e.playerId}|${e.externalId}`
const parseMember = (m: string) => {
  const [, , playerId, ...ext] = m.split('|')
  return { playerId: playerId as string, externalId: ext.join('|') }
}

// KEYS: zset, hash of player → "version|member". ARGV: triples (player, version, member, score)...
const UPDATE_LUA = `
local n = 0
for i = 1, #ARGV, 4 do
  local player, version, member, score = ARGV[i], tonumber(ARGV[i+1]), ARGV[i+2], ARGV[i+3]
  local cur = redis.call('HGET', KEYS[2], player)
  local curVersion, curMember = 0, nil
  if cur then
    local sep = string.find(cur, '|', 1, true)
    curVersion = tonumber(string.sub(cur, 1, sep - 1))
    curMember = string.sub(cur, sep + 1)
  end
  if version > curVersion then
    if curMember and curMember ~= member then redis.call('ZREM', KEYS[1], curMember) end
    redis.call('ZADD', KEYS[1], score, member)
    redis.call('HSET', KEYS[2], player, version .. '|' .. member)
    n = n + 1
  end
end
return n`
// KEYS: zset, hash. ARGV: player. Its member leaves the board; the hash keeps a tombstone of the highest
// version, so an update still in flight (a batch committed before the erasure) cannot put it back.
const REMOVE_LUA = `
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local member = string.sub(cur, string.find(cur, '|', 1, true) + 1)
  if member ~= '' then redis.call('ZREM', KEYS[1], member) end
end
redis.call('HSET', KEYS[2], ARGV[1], '9007199254740991|')
return 1`
// KEYS: zset, hash. ARGV: player. → { rank0, score } or nil.
const RANK_LUA = `
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return nil end
local member = string.sub(cur, string.find(cur, '|', 1, true) + 1)
local r = redis.call('ZREVRANK', KEYS[1], member)
if not r then return nil end
return { r, redis.call('ZSCORE', KEYS[1], member) }`

export function redisLeaderboards(redis: Redis): Leaderboards {
  // lb2: members of the earlier format (no inverted id) are in rsp:lb:*; a start rebuilds every active
  // board from PostgreSQL under the new keys.
  const z = (id: string) => `rsp:lb2:{${id}}`
  const h = (id: string) => `rsp:lbp2:{${id}}`
  const r = redis as Redis & {
    lbUpdate(k1: string, k2: string, ...args: string[]): Promise<number>
    lbRank(k1: string, k2: string, player: string): Promise<[number, string] | null>
    lbRemove(k1: string, k2: string, player: string): Promise<number>
  }
  if (!('lbUpdate' in redis)) {
    redis.defineCommand('lbUpdate', { numberOfKeys: 2, lua: UPDATE_LUA })
    redis.defineCommand('lbRank', { numberOfKeys: 2, lua: RANK_LUA })
    redis.defineCommand('lbRemove', { numberOfKeys: 2, lua: REMOVE_LUA })
  }
  return {
    kind: 'redis',
    async update(id, entries) {
      for (let i = 0; i < entries.length; i += 500) {
        const args: string[] = []
        for (const e of entries.slice(i, i + 500)) args.push(e.playerId, String(e.version), memberOf(e), String(e.score))
        await r.lbUpdate(z(id), h(id), ...args)
      }
    },
    async top(id, offset, limit) {
      const flat = await redis.zrevrange(z(id), offset, offset + limit - 1, 'WITHSCORES')
      const out = []
      for (let i = 0; i < flat.length; i += 2) {
        const m = parseMember(flat[i] as string)
        out.push({ rank: offset + i / 2 + 1, player_id: m.playerId, external_id: m.externalId, score: Number(flat[i + 1]) })
      }
      return out
    },
    async rankOf(id, playerId) {
      const res = await r.lbRank(z(id), h(id), playerId)
      return res ? { rank: Number(res[0]) + 1, score: Number(res[1]) } : null
    },
    total: (id) => redis.zcard(z(id)),
    async drop(id) {
      await redis.del(z(id), h(id))
    },
    async remove(id, playerId) {
      await r.lbRemove(z(id), h(id), playerId)
    },
  }
}

/** The embedded equivalent: a sorted array per tournament (binary search; an update moves one entry). */
export function memoryLeaderboards(): Leaderboards {
  interface Board { sorted: BoardEntry[]; byPlayer: Map<string, BoardEntry>; removed: Set<string> }
  const boards = new Map<string, Board>()
  const before = (a: BoardEntry, b: BoardEntry) =>
    a.score !== b.score ? a.score > b.score : a.reachedMs !== b.reachedMs ? a.reachedMs < b.reachedMs : a.playerId < b.playerId
  const indexOf = (sorted: BoardEntry[], e: BoardEntry) => {
    let lo = 0
    let hi = sorted.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (before(sorted[mid] as BoardEntry, e)) lo = mid + 1
      else hi = mid
    }
    return lo
  }
  const board = (id: string) => {
    let b = boards.get(id)
    if (!b) boards.set(id, (b = { sorted: [], byPlayer: new Map(), removed: new Set() }))
    return b
  }
  return {
    kind: 'memory',
    async update(id, entries) {
      const b = board(id)
      for (const e of entries) {
        if (b.removed.has(e.playerId)) continue
        const cur = b.byPlayer.get(e.playerId)
        if (cur && cur.version >= e.version) continue
        if (cur) b.sorted.splice(indexOf(b.sorted, cur), 1)
        b.sorted.splice(indexOf(b.sorted, e), 0, e)
        b.byPlayer.set(e.playerId, e)
      }
    },
    async top(id, offset, limit) {
      return (boards.get(id)?.sorted.slice(offset, offset + limit) ?? []).map((e, i) => ({
        rank: offset + i + 1, player_id: e.playerId, external_id: e.externalId, score: e.score,
      }))
    },
    async rankOf(id, playerId) {
      const b = boards.get(id)
      const e = b?.byPlayer.get(playerId)
      return b && e ? { rank: indexOf(b.sorted, e) + 1, score: e.score } : null
    },
    total: async (id) => boards.get(id)?.sorted.length ?? 0,
    async drop(id) {
      boards.delete(id)
    },
    async remove(id, playerId) {
      const b = board(id)
      const cur = b.byPlayer.get(playerId)
      if (cur) b.sorted.splice(indexOf(b.sorted, cur), 1)
      b.byPlayer.delete(playerId)
      b.removed.add(playerId)
    },
  }
}
