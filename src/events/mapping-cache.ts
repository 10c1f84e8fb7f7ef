// Per-brand mappings, cached per process and dropped on the bus topic 'event_mapping' (published by the
// admin API on every change, to every process), so a change applies from the next request.
import type { Bus } from '../db/bus.ts'
import type { Sql } from '../db/postgres.ts'
import { compileMapping, type CompiledMapping, type MappingConfig } from './mapping.ts'

export interface MappingCache {
  get(brandId: string): Promise<CompiledMapping>
}

/** Safety net if an invalidation were ever lost. */
const TTL_MS = 60_000

export function createMappingCache(deps: { sql: Sql; bus: Bus }): MappingCache {
  const cache = new Map<string, { mapping: Promise<CompiledMapping>; at: number }>()
  // Bumped on every invalidation, so a load that raced with a change is not cached.
  const versions = new Map<string, number>()
  deps.bus.subscribe('event_mapping', (brandId) => {
    versions.set(brandId, (versions.get(brandId) ?? 0) + 1)
    cache.delete(brandId)
  })
  return {
    get(brandId) {
      const hit = cache.get(brandId)
      if (hit && Date.now() - hit.at < TTL_MS) return hit.mapping
      const version = versions.get(brandId) ?? 0
      const mapping = deps.sql<{ event_mapping: MappingConfig | null }[]>`
        select event_mapping from brands where id = ${brandId}`.then(([row]) =>
        compileMapping(row?.event_mapping ?? { rules: [] }),
      )
      const entry = { mapping, at: Date.now() }
      cache.set(brandId, entry)
      mapping.then(
        () => {
          if ((versions.get(brandId) ?? 0) !== version && cache.get(brandId) === entry) cache.delete(brandId)
        },
        () => {
          if (cache.get(brandId) === entry) cache.delete(brandId)
        },
      )
      return mapping
    },
  }
}
