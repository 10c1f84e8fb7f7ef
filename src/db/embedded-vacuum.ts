// Embedded PostgreSQL (PGlite) runs no autovacuum: it is one backend in single-user mode, so `autovacuum`
// reads 'on' but no worker ever starts (checked: 300,000 dead rows of a 100,000-row table were still there
// seconds later). Every UPDATE and DELETE of a queue table (the event stream's rows, the outbox's dispatch
// marks, deliveries' outcomes, notifications' statuses) then left a dead row and a dead index entry for
// good: the files grew without bound, and a claim walked every dead entry of its partial index (on the
// server, the outbox's claim over 220,000 of them: 26 ms the first time, 1.2 ms once marked, 0.15 ms
// after a VACUUM). So the embedded process does what autovacuum would, on the same kind of threshold.
// Autovacuum also ANALYZEs: without it no table of an embedded install ever had statistics, and the
// planner guessed from page counts and default selectivities (a queue's claim read and sorted every
// pending row, src/db/postgres.ts preferIndexWalks; joins over players sized by guesses). So the round
// analyzes too, on autovacuum's analyze threshold.
// On a PostgreSQL server autovacuum does both: nothing runs there.
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { startTicker } from '../engine/work-loop.ts'
import type { Sql } from './postgres.ts'

const EVERY_MS = 60_000
/** Tables that vacuum themselves: the spool's flusher vacuums event_spool every few seconds (spool.ts). */
const SELF_VACUUMED = ['event_spool']
/** A round longer than this is logged at info: it held the embedded database's one connection that long. */
const SLOW_ROUND_MS = 1000

/**
 * VACUUMs each table whose dead rows are over `minDead` and over a tenth of its live ones (autovacuum's
 * rule with a lower floor: the queue tables are small and turn over fast); returns the tables vacuumed.
 * skip_locked, so a table a migration holds is left for the next round; no truncation, which would take
 * an exclusive lock (freed space is reused).
 */
export async function vacuumDeadRows(sql: Sql, opts: { minDead?: number; skip?: string[] } = {}): Promise<string[]> {
  const due = await sql<{ name: string }[]>`
    select format('%I.%I', schemaname, relname) as name from pg_stat_user_tables
    where n_dead_tup > ${opts.minDead ?? 1000} and n_dead_tup > n_live_tup / 10
      and relname <> all(${opts.skip ?? []}::text[])
    order by n_dead_tup desc`
  for (const t of due) await sql.unsafe(`vacuum (skip_locked, truncate false) ${t.name}`)
  return due.map((t) => t.name)
}

/**
 * ANALYZEs each table changed by more than 50 rows plus a tenth of its rows since its last analysis
 * (autovacuum's analyze rule, with its defaults); a table never analyzed counts every row it received.
 * Returns the tables analyzed. skip_locked, as vacuumDeadRows.
 */
export async function analyzeChanged(sql: Sql): Promise<string[]> {
  const due = await sql<{ name: string }[]>`
    select format('%I.%I', s.schemaname, s.relname) as name
    from pg_stat_user_tables s join pg_class c on c.oid = s.relid
    where s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)
    order by s.n_mod_since_analyze desc`
  for (const t of due) await sql.unsafe(`analyze (skip_locked) ${t.name}`)
  return due.map((t) => t.name)
}

export function startEmbeddedVacuum(ctx: AppContext): BackgroundService {
  if (ctx.pg.kind !== 'pglite') return { stop: async () => {} }
  const ticker = startTicker({
    name: 'embedded-vacuum',
    log: ctx.log,
    idleIntervalMs: EVERY_MS,
    errorBackoffMs: EVERY_MS,
    async step() {
      const started = performance.now()
      const vacuumed = await vacuumDeadRows(ctx.sql, { skip: SELF_VACUUMED })
      const analyzed = await analyzeChanged(ctx.sql)
      const ms = Math.round(performance.now() - started)
      // A long round (the first one on an upgraded install with a bloated outbox, say) stalled every query.
      if (ms > SLOW_ROUND_MS) ctx.log.info({ vacuumed, analyzed, ms }, 'embedded vacuum: a slow round')
      else if (vacuumed.length || analyzed.length) ctx.log.debug({ vacuumed, analyzed, ms }, 'embedded vacuum')
      return false
    },
  })
  return { stop: () => ticker.stop() }
}
