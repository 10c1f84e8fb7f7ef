import Type, { type Static } from 'typebox'
import { DateTime, Nullable, Uuid } from '../lib/schemas.ts'

export const SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{0,63}$'
const Slug = Type.String({ pattern: SLUG_PATTERN })

export const Tenant = Type.Object(
  { id: Uuid, name: Type.String(), slug: Type.String(), created_at: DateTime },
  { $id: 'Tenant' },
)
export type Tenant = Static<typeof Tenant>
export const CreateTenantBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }), slug: Type.Optional(Slug) })

export const Brand = Type.Object(
  {
    id: Uuid,
    tenant_id: Uuid,
    name: Type.String(),
    slug: Type.String(),
    is_default: Type.Boolean(),
    active: Type.Boolean(),
    created_at: DateTime,
  },
  { $id: 'Brand' },
)
export type Brand = Static<typeof Brand>
export const CreateBrandBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }), slug: Slug })
export const UpdateBrandBody = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  is_default: Type.Optional(Type.Literal(true, { description: 'true moves the tenant default to this brand' })),
  active: Type.Optional(Type.Boolean()),
})

export const KeyScope = Type.Union([Type.Literal('events:write'), Type.Literal('read')])
export const ApiKey = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    prefix: Type.String({ description: 'rsp_ and the next 8 characters, to recognise the key' }),
    scopes: Type.Array(KeyScope),
    brand_id: Nullable(Uuid),
    created_at: DateTime,
    expires_at: Nullable(DateTime),
    revoked_at: Nullable(DateTime),
  },
  { $id: 'ApiKey' },
)
export type ApiKey = Static<typeof ApiKey>
export const CreatedApiKey = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    key: Type.String({ description: 'The key itself. Shown only in this response; only its SHA-256 is stored.' }),
    prefix: Type.String(),
    scopes: Type.Array(KeyScope),
    brand_id: Nullable(Uuid),
    created_at: DateTime,
    expires_at: Nullable(DateTime),
  },
  { $id: 'CreatedApiKey' },
)
export type CreatedApiKey = Static<typeof CreatedApiKey>
export const CreateKeyBody = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "default 'API key'" })),
  scopes: Type.Optional(Type.Array(KeyScope, { uniqueItems: true, description: 'empty or absent = full access' })),
  brand: Type.Optional(Type.String({ minLength: 1, description: 'brand id or slug: pins the key to that brand' })),
  expires_at: Type.Optional(DateTime),
})

export const MappingRule = Type.Object({
  match: Type.String({ minLength: 1, maxLength: 128, description: 'incoming event_type; * matches any run of characters (at most 8 per rule)' }),
  action: Type.Optional(Type.Union([Type.Literal('map'), Type.Literal('ignore'), Type.Literal('reject')])),
  type: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'event type to store instead' })),
  fields: Type.Optional(
    Type.Record(Type.String(), Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9_]+(\\.[A-Za-z0-9_]+)*$' }), {
      description: 'canonical field → dot path into the incoming event object (e.g. payload.amt)',
    }),
  ),
})
export type MappingRule = Static<typeof MappingRule>
export const EventMapping = Type.Object(
  {
    rules: Type.Array(MappingRule, { maxItems: 500 }),
    default_action: Type.Optional(Type.Union([Type.Literal('accept'), Type.Literal('ignore'), Type.Literal('reject')])),
  },
  { $id: 'EventMapping' },
)
export type EventMapping = Static<typeof EventMapping>
