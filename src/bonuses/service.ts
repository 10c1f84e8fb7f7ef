// Bonus definitions, stored through the generic definition store. Grants and wagering come with the
// bonus engine.
import type { ResourceDef } from '../gamification/crud.ts'
import { iso, num } from '../lib/rows.ts'
import type { Bonus } from './schemas.ts'

export const bonuses: ResourceDef<Bonus> = {
  table: 'bonuses',
  label: 'bonus',
  columns: ['name', 'type', 'value', 'value_type', 'wagering_requirement', 'config', 'expires_in_hours', 'active'],
  jsonColumns: ['config'],
  orderBy: ['created_at'],
  toOut: (r) => ({
    id: r.id as string,
    name: r.name as string,
    type: r.type as Bonus['type'],
    value: num(r.value) as number,
    value_type: r.value_type as string,
    wagering_requirement: num(r.wagering_requirement) as number,
    config: r.config as Bonus['config'],
    expires_in_hours: (r.expires_in_hours as number | null) ?? null,
    active: r.active as boolean,
    created_at: iso(r.created_at) as string,
  }),
}
