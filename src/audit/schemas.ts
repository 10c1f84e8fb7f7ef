import Type from 'typebox'
import { DateTime, Nullable, Uuid } from '../lib/schemas.ts'

export const AuditQuery = Type.Object({
  tenant_id: Type.Optional(Uuid),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
  limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
})

export const AuditRecord = Type.Object(
  {
    id: Type.String({ description: 'increasing with time' }),
    tenant_id: Nullable(Uuid),
    actor: Type.Union([Type.Literal('admin'), Type.Literal('key'), Type.Literal('system')]),
    actor_key_id: Nullable(Uuid),
    action: Type.String({ description: "the route's operationId" }),
    target: Nullable(Type.Object({ type: Type.String(), id: Nullable(Type.String()) })),
    before: Type.Unknown({ description: 'the state before the change, secrets masked; null for creations and reads' }),
    after: Type.Unknown({ description: 'the state after the change, secrets masked; null for reads' }),
    request_id: Nullable(Type.String()),
    created_at: DateTime,
  },
  { $id: 'AuditRecord' },
)

export const AuditPage = Type.Object({ data: Type.Array(AuditRecord), next_cursor: Nullable(Type.String()) })
