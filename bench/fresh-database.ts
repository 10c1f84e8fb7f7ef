// A new database for one bench run, on the PostgreSQL server named by DATABASE_URL: every run starts from
// the same empty state, not from earlier runs' rows and dead tuples (autovacuum is off on our development
// machines' servers). `admin` is a connection to the server's `postgres` database, for queries about the
// run's database (pg_stat_activity, ...).
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'

export interface FreshDatabase {
  name: string
  url: string
  admin: postgres.Sql
  /** Drops the database (unless keep) and closes `admin`. */
  close(opts?: { keep?: boolean }): Promise<void>
}

export async function freshDatabase(prefix: string): Promise<FreshDatabase> {
  if (!process.env.DATABASE_URL) throw new Error('DATABASE_URL is not set')
  const name = `${prefix}_${randomBytes(4).toString('hex')}`
  const adminUrl = new URL(process.env.DATABASE_URL)
  adminUrl.pathname = '/postgres'
  const admin = postgres(adminUrl.toString(), { onnotice: () => {}, max: 1 })
  await admin.unsafe(`create database ${name}`)
  const url = new URL(process.env.DATABASE_URL)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    admin,
    async close(opts = {}) {
      if (!opts.keep) await admin.unsafe(`drop database ${name} with (force)`)
      await admin.end()
    },
  }
}
