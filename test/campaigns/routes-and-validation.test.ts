// The campaigns' routes and their validation, under one harness for these (a test file of its own costs a process and a harness start, ~4 s of CPU).
import t from 'tap'
import { startHarness, type TestTenant } from '../helpers/harness.ts'
import { SPEC_MOVES } from './spec-table.ts'
import { createCampaign, fieldsOf, must, segment, template } from './helpers.ts'

const h = await startHarness(t)

t.test('routes', async (t) => {
  const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'
  const FUTURE = '2099-01-01T00:00:00Z'

  const templates = new Map<string, string>()
  /** An active email template of the tenant's brand (one per brand: a campaign uses its own brand's). */
  async function emailTemplate(tenant: TestTenant, brand = tenant.brand.slug): Promise<string> {
    let id = templates.get(`${tenant.id}:${brand}`)
    if (!id) {
      const res = await h.request('POST', '/notifications/templates', { key: tenant.key, body: { name: 'welcome', channel: 'email', subject: 'Hi', body: 'Hello', brand } })
      if (res.status !== 201) throw new Error(`template: ${res.text}`)
      id = res.body.data.id as string
      templates.set(`${tenant.id}:${brand}`, id)
    }
    return id
  }

  async function createSegment(tenant: TestTenant): Promise<string> {
    const res = await h.request('POST', '/segments', { key: tenant.key, body: { name: 'everyone', type: 'dynamic', rules: {} } })
    if (res.status !== 201) throw new Error(`segment: ${res.text}`)
    return res.body.data.id
  }

  /**
   * A campaign that can be scheduled and run (a triggered one: running, it waits for events and never
   * completes by itself, so the status machine can be walked with it).
   */
  async function createCampaign(tenant: TestTenant, body: Record<string, unknown> = {}, key = tenant.key) {
    const res = await h.request('POST', '/campaigns', {
      key,
      body: {
        name: 'Welcome', type: 'triggered', channels: ['email'], schedule: { start_at: FUTURE },
        config: { templates: { email: await emailTemplate(tenant, typeof body.brand === 'string' ? body.brand : undefined) }, trigger: { event_type: 'deposit' } },
        ...body,
      },
    })
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`)
    return res.body.data
  }

  /** Drives a fresh campaign to `status` through allowed PATCH moves. */
  async function campaignIn(tenant: TestTenant, status: string) {
    const c = await createCampaign(tenant)
    const path: Record<string, string[]> = {
      draft: [],
      scheduled: ['scheduled'],
      running: ['running'],
      paused: ['running', 'paused'],
      cancelled: ['scheduled', 'cancelled'],
    }
    for (const s of path[status] ?? []) {
      const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: s } })
      if (res.status !== 200) throw new Error(`move to ${s} failed: ${res.text}`)
    }
    if (status === 'completed') {
      // Only the execution engine completes a campaign; set it directly.
      await h.app.ctx.sql`update campaigns set status = 'completed' where id = ${c.id}`
    }
    return c.id as string
  }

  const fieldsOf = (body: any) => (body.details?.errors ?? []).map((e: { field: string }) => e.field)

  t.test('POST /campaigns creates a draft with zeroed stats', async (t) => {
    const tenant = await h.createTenant()
    const res = await h.request('POST', '/campaigns', {
      key: tenant.key,
      body: { name: 'Welcome', type: 'one_shot', channels: ['email', 'push'] },
    })
    t.equal(res.status, 201)
    const c = res.body.data
    t.match(c.id, /^[0-9a-f-]{36}$/)
    t.same(
      { ...c, id: undefined, created_at: undefined, updated_at: undefined },
      {
        id: undefined,
        name: 'Welcome',
        description: null,
        status: 'draft',
        type: 'one_shot',
        channels: ['email', 'push'],
        target_segment_id: null,
        schedule: {},
        config: {},
        stats: {
          audience: 0, control: 0, sent: 0, delivered: 0, suppressed: 0, failed: 0, opened: 0, clicked: 0, bounced: 0,
          unsubscribed: 0, converted: 0, control_converted: 0,
        },
        created_at: undefined,
        updated_at: undefined,
      },
    )
    t.ok(!Number.isNaN(Date.parse(c.created_at)))
    t.ok(!Number.isNaN(Date.parse(c.updated_at)))
  })

  t.test('POST /campaigns stores every optional field', async (t) => {
    const tenant = await h.createTenant()
    const SEGMENT_ID = await createSegment(tenant)
    const c = await createCampaign(tenant, {
      name: 'Reactivation',
      type: 'journey',
      channels: ['telegram', 'in_app'],
      description: 'Win back lapsed players',
      target_segment_id: SEGMENT_ID,
      schedule: { starts_at: '2026-12-01T10:00:00Z', cron: '0 10 * * 1' },
      config: { steps: [{ wait_hours: 24 }], nested: { a: 1 } },
    })
    t.equal(c.description, 'Win back lapsed players')
    t.equal(c.type, 'journey')
    t.same(c.channels, ['telegram', 'in_app'])
    t.equal(c.target_segment_id, SEGMENT_ID)
    t.same(c.schedule, { starts_at: '2026-12-01T10:00:00Z', cron: '0 10 * * 1' })
    t.same(c.config, { steps: [{ wait_hours: 24 }], nested: { a: 1 } })
    const got = await h.request('GET', `/campaigns/${c.id}`, { key: tenant.key })
    t.same(got.body.data, c)
  })

  t.test('every campaign type and channel is accepted', async (t) => {
    const tenant = await h.createTenant()
    for (const type of ['one_shot', 'recurring', 'triggered', 'journey']) {
      const c = await createCampaign(tenant, { type, channels: ['email', 'telegram', 'push', 'in_app'] })
      t.equal(c.type, type)
      t.same(c.channels, ['email', 'telegram', 'push', 'in_app'])
    }
  })

  t.test('a status in the create body is ignored: a new campaign is always a draft', async (t) => {
    const tenant = await h.createTenant()
    const c = await createCampaign(tenant, { status: 'running' })
    t.equal(c.status, 'draft')
  })

  t.test('POST /campaigns validates its body', async (t) => {
    const tenant = await h.createTenant()
    const base = { name: 'X', type: 'one_shot', channels: ['email'] }
    const cases: [string, unknown, string][] = [
      ['name missing', { type: 'one_shot', channels: ['email'] }, 'name'],
      ['type missing', { name: 'X', channels: ['email'] }, 'type'],
      ['channels missing', { name: 'X', type: 'one_shot' }, 'channels'],
      ['empty name', { ...base, name: '' }, 'name'],
      ['unknown type', { ...base, type: 'broadcast' }, 'type'],
      ['no channels', { ...base, channels: [] }, 'channels'],
      ['unknown channel', { ...base, channels: ['email', 'sms'] }, 'channels.1'],
      ['channels not an array', { ...base, channels: 'email' }, 'channels'],
      ['duplicate channels', { ...base, channels: ['email', 'email'] }, 'channels'],
      ['target_segment_id not a uuid', { ...base, target_segment_id: 'seg-1' }, 'target_segment_id'],
      ['description not a string', { ...base, description: 42 }, 'description'],
      ['schedule not an object', { ...base, schedule: 'tomorrow' }, 'schedule'],
      ['config not an object', { ...base, config: [1, 2] }, 'config'],
    ]
    for (const [label, body, field] of cases) {
      const res = await h.request('POST', '/campaigns', { key: tenant.key, body })
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST', label)
      t.ok(fieldsOf(res.body).includes(field), `${label}: names ${field} (got ${fieldsOf(res.body)})`)
    }
    const malformed = await h.request('POST', '/campaigns', { key: tenant.key, rawBody: '{"name":', headers: { 'content-type': 'application/json' } })
    t.equal(malformed.status, 400)
    t.equal(malformed.body.code, 'BAD_REQUEST')
    const empty = await h.request('POST', '/campaigns', { key: tenant.key })
    t.equal(empty.status, 400)
    const list = await h.request('GET', '/campaigns', { key: tenant.key })
    t.equal(list.body.total, 0, 'nothing was created')
  })

  t.test('creating a campaign writes campaign.created to the outbox', async (t) => {
    const tenant = await h.createTenant()
    const c = await createCampaign(tenant, { name: 'Outboxed', type: 'triggered' })
    const rows = await h.app.ctx.sql<{ tenant_id: string; brand_id: string; event: string; data: any; dispatched_at: Date | null }[]>`
    select tenant_id, brand_id, event, data, dispatched_at from outbox where tenant_id = ${tenant.id}`
    t.equal(rows.length, 1)
    const row = rows[0]!
    t.equal(row.event, 'campaign.created')
    t.equal(row.brand_id, tenant.brand.id)
    // The webhook fan-out may already have dispatched it (to no endpoint: the tenant has none).
    t.ok(row.dispatched_at === null || row.dispatched_at instanceof Date)
    t.same(row.data, { campaign_id: c.id, name: 'Outboxed', type: 'triggered', brand_id: tenant.brand.id })
  })

  t.test('a refused create writes nothing to the outbox', async (t) => {
    const tenant = await h.createTenant()
    await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'X', type: 'nope', channels: ['email'] } })
    const rows = await h.app.ctx.sql`select 1 from outbox where tenant_id = ${tenant.id}`
    t.equal(rows.length, 0)
  })

  t.test('GET /campaigns/{id}: 404 for unknown ids, 400 for malformed ones', async (t) => {
    const tenant = await h.createTenant()
    const unknown = await h.request('GET', `/campaigns/${UNKNOWN_ID}`, { key: tenant.key })
    t.equal(unknown.status, 404)
    t.equal(unknown.body.code, 'NOT_FOUND')
    const malformed = await h.request('GET', '/campaigns/not-a-uuid', { key: tenant.key })
    t.equal(malformed.status, 404)
    t.equal(malformed.body.code, 'NOT_FOUND')
  })

  t.test('GET /campaigns lists newest first with total, limit and offset', async (t) => {
    const tenant = await h.createTenant()
    const ids: string[] = []
    for (let i = 0; i < 25; i++) ids.push((await createCampaign(tenant, { name: `C${i}` })).id)
    const newestFirst = [...ids].reverse()

    const first = await h.request('GET', '/campaigns', { key: tenant.key })
    t.equal(first.status, 200)
    t.same(Object.keys(first.body).sort(), ['campaigns', 'total'])
    t.equal(first.body.total, 25)
    t.equal(first.body.campaigns.length, 20, 'limit defaults to 20')
    t.same(first.body.campaigns.map((c: any) => c.id), newestFirst.slice(0, 20))

    const page = await h.request('GET', '/campaigns', { key: tenant.key, query: { limit: 10, offset: 20 } })
    t.equal(page.body.total, 25)
    t.same(page.body.campaigns.map((c: any) => c.id), newestFirst.slice(20))

    const max = await h.request('GET', '/campaigns', { key: tenant.key, query: { limit: 100 } })
    t.equal(max.body.campaigns.length, 25)

    const beyond = await h.request('GET', '/campaigns', { key: tenant.key, query: { offset: 500 } })
    t.equal(beyond.status, 200)
    t.same(beyond.body, { campaigns: [], total: 25 })
  })

  t.test('GET /campaigns validates limit, offset and status', async (t) => {
    const tenant = await h.createTenant()
    const bad: Record<string, string | number>[] = [
      { limit: 0 },
      { limit: 101 },
      { limit: -5 },
      { limit: 'ten' },
      { offset: -1 },
      { offset: 'x' },
      { status: 'archived' },
    ]
    for (const query of bad) {
      const res = await h.request('GET', '/campaigns', { key: tenant.key, query })
      t.equal(res.status, 400, JSON.stringify(query))
      t.equal(res.body.code, 'BAD_REQUEST')
      t.ok(fieldsOf(res.body).includes(Object.keys(query)[0]!), `names ${Object.keys(query)[0]}`)
    }
  })

  t.test('GET /campaigns filters by status', async (t) => {
    const tenant = await h.createTenant()
    const draft = await campaignIn(tenant, 'draft')
    const running = await campaignIn(tenant, 'running')
    const paused = await campaignIn(tenant, 'paused')
    const cancelled = await campaignIn(tenant, 'cancelled')
    const expect: Record<string, string[]> = { draft: [draft], running: [running], paused: [paused], cancelled: [cancelled], scheduled: [], completed: [] }
    for (const [status, ids] of Object.entries(expect)) {
      const res = await h.request('GET', '/campaigns', { key: tenant.key, query: { status } })
      t.equal(res.status, 200)
      t.same(res.body.campaigns.map((c: any) => c.id), ids, status)
      t.equal(res.body.total, ids.length)
    }
    const all = await h.request('GET', '/campaigns', { key: tenant.key })
    t.equal(all.body.total, 4, 'cancelled campaigns remain listed')
  })

  t.test('lists and creates act on the resolved brand', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const inMain = await createCampaign(tenant, { name: 'main' })
    const viaBody = await createCampaign(tenant, { name: 'second-body', brand: 'second' })
    const viaHeader = await h.request('POST', '/campaigns', {
      key: tenant.key,
      headers: { 'x-brand': second.id },
      body: { name: 'second-header', type: 'one_shot', channels: ['push'] },
    })
    t.equal(viaHeader.status, 201)

    const main = await h.request('GET', '/campaigns', { key: tenant.key })
    t.same(main.body.campaigns.map((c: any) => c.id), [inMain.id], 'default brand')
    const secondList = await h.request('GET', '/campaigns', { key: tenant.key, query: { brand: 'second' } })
    t.same(secondList.body.campaigns.map((c: any) => c.id).sort(), [viaBody.id, viaHeader.body.data.id].sort())
    const byHeader = await h.request('GET', '/campaigns', { key: tenant.key, headers: { 'x-brand': 'second' } })
    t.equal(byHeader.body.total, 2)

    const unknownBrand = await h.request('GET', '/campaigns', { key: tenant.key, query: { brand: 'nope' } })
    t.equal(unknownBrand.status, 400)
    t.equal(unknownBrand.body.code, 'BAD_REQUEST')
    const unknownBodyBrand = await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'x', type: 'one_shot', channels: ['email'], brand: 'nope' } })
    t.equal(unknownBodyBrand.status, 400)

    // By id, a tenant-wide key finds campaigns of every brand.
    const other = await h.request('GET', `/campaigns/${viaBody.id}`, { key: tenant.key })
    t.equal(other.status, 200)
  })

  t.test('a tenant with no brand gets 400 on list and create', async (t) => {
    const tenant = await h.createTenant({ brand: null })
    const list = await h.request('GET', '/campaigns', { key: tenant.key })
    t.equal(list.status, 400)
    t.equal(list.body.code, 'BAD_REQUEST')
    const create = await h.request('POST', '/campaigns', { key: tenant.key, body: { name: 'x', type: 'one_shot', channels: ['email'] } })
    t.equal(create.status, 400)
  })

  t.test('PATCH /campaigns/{id} updates fields', async (t) => {
    const tenant = await h.createTenant()
    const SEGMENT_ID = await createSegment(tenant)
    const c = await createCampaign(tenant, { description: 'old', target_segment_id: SEGMENT_ID, config: { a: 1 }, schedule: { at: 'x' } })
    await new Promise((r) => setTimeout(r, 5))
    const res = await h.request('PATCH', `/campaigns/${c.id}`, {
      key: tenant.key,
      body: { name: 'Renamed', description: null, channels: ['push', 'in_app'], target_segment_id: null, config: { b: 2 }, schedule: {} },
    })
    t.equal(res.status, 200)
    const u = res.body.data
    t.equal(u.name, 'Renamed')
    t.equal(u.description, null)
    t.same(u.channels, ['push', 'in_app'])
    t.equal(u.target_segment_id, null)
    t.same(u.config, { b: 2 }, 'config is replaced, not merged')
    t.same(u.schedule, {})
    t.equal(u.status, 'draft')
    t.equal(u.created_at, c.created_at)
    t.ok(Date.parse(u.updated_at) > Date.parse(c.updated_at), 'updated_at moves')

    const partial = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { description: 'new', target_segment_id: SEGMENT_ID } })
    t.equal(partial.body.data.name, 'Renamed', 'untouched fields stay')
    t.equal(partial.body.data.description, 'new')
    t.equal(partial.body.data.target_segment_id, SEGMENT_ID)

    const noop = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: {} })
    t.equal(noop.status, 200)
    t.same(noop.body.data, partial.body.data, 'an empty patch changes nothing')

    const got = await h.request('GET', `/campaigns/${c.id}`, { key: tenant.key })
    t.same(got.body.data, partial.body.data)
  })

  t.test('PATCH /campaigns/{id} validates its body', async (t) => {
    const tenant = await h.createTenant()
    const c = await createCampaign(tenant)
    const cases: [string, unknown, string][] = [
      ['empty channels', { channels: [] }, 'channels'],
      ['unknown channel', { channels: ['fax'] }, 'channels.0'],
      ['unknown status', { status: 'archived' }, 'status'],
      ['target_segment_id not a uuid', { target_segment_id: '123' }, 'target_segment_id'],
      ['empty name', { name: '' }, 'name'],
      ['name null', { name: null }, 'name'],
      ['config not an object', { config: 'x' }, 'config'],
      ['schedule null', { schedule: null }, 'schedule'],
    ]
    for (const [label, body, field] of cases) {
      const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body })
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST', label)
      t.ok(fieldsOf(res.body).includes(field), `${label}: names ${field} (got ${fieldsOf(res.body)})`)
    }
    const unknown = await h.request('PATCH', `/campaigns/${UNKNOWN_ID}`, { key: tenant.key, body: { name: 'x' } })
    t.equal(unknown.status, 404)
    t.equal(unknown.body.code, 'NOT_FOUND')
    const got = await h.request('GET', `/campaigns/${c.id}`, { key: tenant.key })
    t.same(got.body.data, c, 'nothing changed')
  })

  t.test('every allowed status move of the spec table succeeds through PATCH', async (t) => {
    const tenant = await h.createTenant()
    for (const [from, to] of SPEC_MOVES) {
      const id = await campaignIn(tenant, from)
      const res = await h.request('PATCH', `/campaigns/${id}`, { key: tenant.key, body: { status: to } })
      t.equal(res.status, 200, `${from} → ${to}`)
      t.equal(res.body.data.status, to)
    }
  })

  t.test('disallowed status moves are 400 with details { from, to, allowed }', async (t) => {
    const tenant = await h.createTenant()
    const moves: [string, string, string[]][] = [
      ['draft', 'paused', ['scheduled', 'running']],
      ['draft', 'cancelled', ['scheduled', 'running']],
      ['draft', 'completed', ['scheduled', 'running']],
      ['draft', 'draft', ['scheduled', 'running']],
      ['scheduled', 'draft', ['running', 'cancelled']],
      ['scheduled', 'paused', ['running', 'cancelled']],
      ['running', 'draft', ['paused', 'cancelled']],
      ['running', 'scheduled', ['paused', 'cancelled']],
      ['running', 'completed', ['paused', 'cancelled']],
      ['running', 'running', ['paused', 'cancelled']],
      ['paused', 'scheduled', ['running', 'cancelled']],
      ['paused', 'paused', ['running', 'cancelled']],
      ['completed', 'running', []],
      ['completed', 'cancelled', []],
      ['completed', 'draft', []],
      ['cancelled', 'running', []],
      ['cancelled', 'draft', []],
      ['cancelled', 'scheduled', []],
      ['cancelled', 'cancelled', []],
    ]
    for (const [from, to, allowed] of moves) {
      const id = await campaignIn(tenant, from)
      const res = await h.request('PATCH', `/campaigns/${id}`, { key: tenant.key, body: { status: to, name: 'should not stick' } })
      t.equal(res.status, 400, `${from} → ${to}`)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.same(res.body.details, { from, to, allowed }, `${from} → ${to} details`)
      const got = await h.request('GET', `/campaigns/${id}`, { key: tenant.key })
      t.equal(got.body.data.status, from, 'status unchanged')
      t.equal(got.body.data.name, 'Welcome', 'other fields of a refused patch are not applied')
    }
  })

  t.test('a status move can carry other field changes', async (t) => {
    const tenant = await h.createTenant()
    const c = await createCampaign(tenant)
    const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'scheduled', schedule: { start_at: '2098-01-01T00:00:00Z' } } })
    t.equal(res.status, 200)
    t.equal(res.body.data.status, 'scheduled')
    t.same(res.body.data.schedule, { start_at: '2098-01-01T00:00:00Z' })
  })

  t.test('DELETE /campaigns/{id} is a soft cancel where the table allows cancelled', async (t) => {
    const tenant = await h.createTenant()
    for (const from of ['scheduled', 'running', 'paused']) {
      const id = await campaignIn(tenant, from)
      const res = await h.request('DELETE', `/campaigns/${id}`, { key: tenant.key })
      t.equal(res.status, 200, `DELETE from ${from}`)
      t.equal(res.body.data.id, id)
      t.equal(res.body.data.status, 'cancelled')
      const got = await h.request('GET', `/campaigns/${id}`, { key: tenant.key })
      t.equal(got.status, 200, 'the record remains')
      t.equal(got.body.data.status, 'cancelled')
    }
    const listed = await h.request('GET', '/campaigns', { key: tenant.key, query: { status: 'cancelled' } })
    t.equal(listed.body.total, 3)
  })

  t.test('DELETE from draft or a terminal status is 400 with details', async (t) => {
    const tenant = await h.createTenant()
    for (const from of ['draft', 'completed', 'cancelled']) {
      const id = await campaignIn(tenant, from)
      const res = await h.request('DELETE', `/campaigns/${id}`, { key: tenant.key })
      t.equal(res.status, 400, `DELETE from ${from}`)
      t.equal(res.body.code, 'BAD_REQUEST')
      t.same(res.body.details, { from, to: 'cancelled', allowed: from === 'draft' ? ['scheduled', 'running'] : [] })
      const got = await h.request('GET', `/campaigns/${id}`, { key: tenant.key })
      t.equal(got.body.data.status, from)
    }
    const unknown = await h.request('DELETE', `/campaigns/${UNKNOWN_ID}`, { key: tenant.key })
    t.equal(unknown.status, 404)
    const malformed = await h.request('DELETE', '/campaigns/123', { key: tenant.key })
    t.equal(malformed.status, 404, 'an id that is no uuid names no campaign')
  })

  t.test('concurrent identical moves: exactly one succeeds', async (t) => {
    const tenant = await h.createTenant()
    const id = await campaignIn(tenant, 'running')
    const results = await Promise.all(
      Array.from({ length: 6 }, () => h.request('PATCH', `/campaigns/${id}`, { key: tenant.key, body: { status: 'paused' } })),
    )
    t.same(results.map((r) => r.status).sort(), [200, 400, 400, 400, 400, 400])
    for (const r of results.filter((x) => x.status === 400)) t.same(r.body.details, { from: 'paused', to: 'paused', allowed: ['running', 'cancelled'] })
    const cancels = await Promise.all(Array.from({ length: 4 }, () => h.request('DELETE', `/campaigns/${id}`, { key: tenant.key })))
    t.same(cancels.map((r) => r.status).sort(), [200, 400, 400, 400])
  })

  t.test("another tenant's key gets 404 on every by-id route", async (t) => {
    const owner = await h.createTenant()
    const stranger = await h.createTenant()
    const id = await campaignIn(owner, 'running')
    for (const [method, body] of [['GET'], ['PATCH', { name: 'hijack' }], ['PATCH', { status: 'paused' }], ['DELETE']] as [string, unknown?][]) {
      const res = await h.request(method, `/campaigns/${id}`, { key: stranger.key, body })
      t.equal(res.status, 404, method)
      t.equal(res.body.code, 'NOT_FOUND')
    }
    const list = await h.request('GET', '/campaigns', { key: stranger.key })
    t.same(list.body, { campaigns: [], total: 0 })
    // The stranger naming the owner's brand is an unknown brand, not a way in.
    const viaBrand = await h.request('GET', '/campaigns', { key: stranger.key, query: { brand: owner.brand.id } })
    t.equal(viaBrand.status, 400)
    const got = await h.request('GET', `/campaigns/${id}`, { key: owner.key })
    t.equal(got.body.data.status, 'running')
    t.equal(got.body.data.name, 'Welcome')
  })

  t.test('a brand-pinned key sees and writes only its own brand', async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const pinned = await tenant.createKey({ brand: second.slug })
    const inMain = await campaignIn(tenant, 'running')

    for (const [method, body] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as [string, unknown?][]) {
      const res = await h.request(method, `/campaigns/${inMain}`, { key: pinned.key, body })
      t.equal(res.status, 404, `${method} on another brand's campaign`)
    }

    // Creates go to the pinned brand whatever the hints say.
    const created = await h.request('POST', '/campaigns', {
      key: pinned.key,
      headers: { 'x-brand': tenant.brand.slug },
      body: {
        name: 'pinned', type: 'triggered', channels: ['email'], brand: tenant.brand.slug,
        config: { templates: { email: await emailTemplate(tenant, second.slug) }, trigger: { event_type: 'deposit' } },
      },
    })
    t.equal(created.status, 201)
    const row = await h.app.ctx.sql<{ brand_id: string }[]>`select brand_id from campaigns where id = ${created.body.data.id}`
    t.equal(row[0]!.brand_id, second.id)

    const list = await h.request('GET', '/campaigns', { key: pinned.key, query: { brand: tenant.brand.slug } })
    t.same(list.body.campaigns.map((c: any) => c.id), [created.body.data.id])
    t.equal(list.body.total, 1)

    const own = await h.request('PATCH', `/campaigns/${created.body.data.id}`, { key: pinned.key, body: { status: 'running' } })
    t.equal(own.status, 200)
    const ownDelete = await h.request('DELETE', `/campaigns/${created.body.data.id}`, { key: pinned.key })
    t.equal(ownDelete.status, 200)

    const tenantWide = await h.request('GET', `/campaigns/${created.body.data.id}`, { key: tenant.key })
    t.equal(tenantWide.status, 200, 'a tenant-wide key sees every brand')
  })

  t.test('a read-only key may read but not write', async (t) => {
    const tenant = await h.createTenant()
    const ro = await tenant.createKey({ scopes: ['read'] })
    const id = await campaignIn(tenant, 'running')
    t.equal((await h.request('GET', '/campaigns', { key: ro.key })).status, 200)
    t.equal((await h.request('GET', `/campaigns/${id}`, { key: ro.key })).status, 200)
    const writes: [string, string, unknown?][] = [
      ['POST', '/campaigns', { name: 'x', type: 'one_shot', channels: ['email'] }],
      ['PATCH', `/campaigns/${id}`, { status: 'paused' }],
      ['DELETE', `/campaigns/${id}`],
    ]
    for (const [method, path, body] of writes) {
      const res = await h.request(method, path, { key: ro.key, body })
      t.equal(res.status, 403, `${method} ${path}`)
      t.equal(res.body.code, 'FORBIDDEN')
    }
    const ingest = await tenant.createKey({ scopes: ['events:write'] })
    t.equal((await h.request('GET', '/campaigns', { key: ingest.key })).status, 403, 'an ingestion-only key cannot read')
    const got = await h.request('GET', `/campaigns/${id}`, { key: tenant.key })
    t.equal(got.body.data.status, 'running')
  })

  t.test('a missing or wrong key is 401', async (t) => {
    t.equal((await h.request('GET', '/campaigns')).status, 401)
    t.equal((await h.request('POST', '/campaigns', { body: { name: 'x', type: 'one_shot', channels: ['email'] } })).status, 401)
    const res = await h.request('GET', `/campaigns/${UNKNOWN_ID}`, { key: 'rsp_wrongwrongwrongwrongwrongwrongwrong' })
    t.equal(res.status, 401)
    t.equal(res.body.code, 'UNAUTHORIZED')
  })

  t.test('the OpenAPI document lists every campaign route', async (t) => {
    const res = await h.request('GET', '/openapi.json')
    t.equal(res.status, 200)
    const paths = res.body.paths
    t.same(Object.keys(paths['/api/v1/campaigns']).sort(), ['get', 'post'])
    t.same(Object.keys(paths['/api/v1/campaigns/{id}']).sort(), ['delete', 'get', 'patch'])
    t.ok(res.body.components.schemas.Campaign, 'Campaign schema')
    t.equal(paths['/api/v1/campaigns'].post.requestBody.content['application/json'].schema.properties.channels.minItems, 1)
  })
})

// Starting a campaign validates everything its run needs (contract-engines §4), and a segment, template or
// bonus of another tenant is unknown on create, PATCH and start.
t.test('validation', async (t) => {
  const FUTURE = '2099-01-01T00:00:00Z'

  t.test('moving to running or scheduled refuses what the run could not do, naming each field', async (t) => {
    const tenant = await h.createTenant()
    const seg = await segment(h, tenant)
    const inApp = await template(h, tenant, 'in_app')
    const email = await template(h, tenant, 'email')
    const inactive = await template(h, tenant, 'in_app')
    await must(h.request('DELETE', `/notifications/templates/${inactive}`, { key: tenant.key }), 200)

    const cases: [string, Record<string, unknown>, string, string[]][] = [
      ['one_shot without segment', { type: 'one_shot', config: { templates: { in_app: inApp } } }, 'running', ['target_segment_id']],
      ['one_shot without templates', { type: 'one_shot', target_segment_id: seg }, 'running', ['config.templates']],
      ['template of the wrong channel', { type: 'one_shot', target_segment_id: seg, config: { templates: { in_app: email } } }, 'running', ['config.templates.in_app']],
      ['inactive template', { type: 'one_shot', target_segment_id: seg, config: { templates: { in_app: inactive } } }, 'running', ['config.templates.in_app']],
      ['a channel without its template', { type: 'one_shot', channels: ['in_app', 'email'], target_segment_id: seg, config: { templates: { in_app: inApp } } }, 'running', ['config.templates.email']],
      ['scheduled without start_at', { type: 'one_shot', target_segment_id: seg, config: { templates: { in_app: inApp } } }, 'scheduled', ['schedule.start_at']],
      ['scheduled in the past', { type: 'one_shot', target_segment_id: seg, schedule: { start_at: '2001-01-01T00:00:00Z' }, config: { templates: { in_app: inApp } } }, 'scheduled', ['schedule.start_at']],
      ['end_at before start_at', { type: 'one_shot', target_segment_id: seg, schedule: { start_at: FUTURE, end_at: '2098-01-01T00:00:00Z' }, config: { templates: { in_app: inApp } } }, 'scheduled', ['schedule.end_at']],
      ['recurring without cron', { type: 'recurring', target_segment_id: seg, config: { templates: { in_app: inApp } } }, 'running', ['schedule.cron']],
      ['recurring with a bad cron', { type: 'recurring', target_segment_id: seg, schedule: { cron: '61 * * * *' }, config: { templates: { in_app: inApp } } }, 'running', ['schedule.cron']],
      ['recurring with 6 cron fields', { type: 'recurring', target_segment_id: seg, schedule: { cron: '0 0 * * * *' }, config: { templates: { in_app: inApp } } }, 'running', ['schedule.cron']],
      ['recurring with a bad time zone', { type: 'recurring', target_segment_id: seg, schedule: { cron: '0 9 * * *', timezone: 'Mars/Olympus' }, config: { templates: { in_app: inApp } } }, 'running', ['schedule.timezone']],
      ['triggered without trigger', { type: 'triggered', config: { templates: { in_app: inApp } } }, 'running', ['config.trigger']],
      ['trigger with a bad filter', { type: 'triggered', config: { templates: { in_app: inApp }, trigger: { event_type: 'deposit', filters: [{ field: 'colour', op: 'eq', value: 1 }, { field: 'amount', op: 'between', value: 1 }] } } }, 'running', ['config.trigger.filters.0.field', 'config.trigger.filters.1.op']],
      ['control group over 50', { type: 'triggered', config: { templates: { in_app: inApp }, trigger: { event_type: 'deposit' }, control_group_percent: 60 } }, 'running', ['config.control_group_percent']],
      ['bad class and delay', { type: 'triggered', config: { templates: { in_app: inApp }, trigger: { event_type: 'deposit' }, class: 'spam', delay_seconds: -1, max_per_player: 0 } }, 'running', ['config.class', 'config.delay_seconds', 'config.max_per_player']],
      ['journey without steps', { type: 'journey', target_segment_id: seg }, 'running', ['config.steps']],
      ['journey with dangling references', {
        type: 'journey', target_segment_id: seg,
        config: { steps: [
          { id: 'a', type: 'send', channel: 'in_app', template_id: inApp, next: 'nowhere' },
          { id: 'b', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 60, on_event: 'a', on_timeout: 'gone' },
          { id: 'c', type: 'branch', condition: { field: 'country', op: 'eq', value: 'IT' }, then: 'a', else: 'zzz' },
        ] },
      }, 'running', ['config.steps.0.next', 'config.steps.1.on_timeout', 'config.steps.2.else']],
      ['journey with a bad step', {
        type: 'journey', target_segment_id: seg,
        config: { steps: [
          { id: 'a', type: 'send', channel: 'sms', template_id: inApp },
          { id: 'a', type: 'wait' },
          { id: 'c', type: 'branch', condition: { field: 'nope', op: 'eq', value: 1 } },
          { id: 'd', type: 'teleport' },
        ] },
      }, 'running', ['config.steps.0.channel', 'config.steps.1.id', 'config.steps.1.seconds', 'config.steps.2.condition.field', 'config.steps.3.type']],
      ['journey looping without a wait', {
        type: 'journey', target_segment_id: seg,
        config: { steps: [
          { id: 'a', type: 'send', channel: 'in_app', template_id: inApp, next: 'b' },
          { id: 'b', type: 'branch', condition: { field: 'country', op: 'eq', value: 'IT' }, then: 'a', else: null },
        ] },
      }, 'running', ['config.steps']],
    ]
    for (const [label, body, to, fields] of cases) {
      const c = await createCampaign(h, tenant, body)
      const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: to } })
      t.equal(res.status, 400, label)
      t.equal(res.body.code, 'BAD_REQUEST', label)
      for (const f of fields) t.ok(fieldsOf(res.body).includes(f), `${label}: names ${f} (got ${fieldsOf(res.body)})`)
      const got = await must(h.request('GET', `/campaigns/${c.id}`, { key: tenant.key }), 200)
      t.equal(got.data.status, 'draft', `${label}: still a draft`)
    }

    // The same campaigns, complete, start.
    const ok: Record<string, unknown>[] = [
      { type: 'one_shot', target_segment_id: seg, schedule: { start_at: FUTURE }, config: { templates: { in_app: inApp } } },
      { type: 'recurring', target_segment_id: seg, schedule: { start_at: FUTURE, cron: '30 2 * * *', timezone: 'Europe/Rome' }, config: { templates: { in_app: inApp } } },
      { type: 'triggered', schedule: { start_at: FUTURE }, config: { templates: { in_app: inApp }, trigger: { event_type: 'deposit', filters: [{ field: 'amount', op: 'gte', value: 50 }, { field: 'payload.vip', op: 'exists' }] } } },
      { type: 'journey', target_segment_id: seg, schedule: { start_at: FUTURE }, config: { steps: [
        { id: 'hello', type: 'send', channel: 'in_app', template_id: inApp, next: 'wait' },
        { id: 'wait', type: 'wait_for_event', event_type: 'deposit', timeout_seconds: 3600, on_event: null, on_timeout: 'hello-again' },
        { id: 'hello-again', type: 'send', channel: 'in_app', template_id: inApp },
      ] } },
    ]
    for (const body of ok) {
      const c = await createCampaign(h, tenant, body)
      const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'scheduled' } })
      t.equal(res.status, 200, `${body.type} schedules: ${res.text}`)
    }
  })

  t.test('an edit that would break a running campaign is refused; a draft may be incomplete', async (t) => {
    const tenant = await h.createTenant()
    const inApp = await template(h, tenant)
    const c = await createCampaign(h, tenant, { type: 'triggered', config: { templates: { in_app: inApp }, trigger: { event_type: 'deposit' } } })
    await must(h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { status: 'running' } }), 200)
    const broken = await h.request('PATCH', `/campaigns/${c.id}`, { key: tenant.key, body: { config: { templates: { in_app: inApp } } } })
    t.equal(broken.status, 400)
    t.ok(fieldsOf(broken.body).includes('config.trigger'))
    const draft = await createCampaign(h, tenant, { type: 'one_shot' })
    t.equal((await h.request('PATCH', `/campaigns/${draft.id}`, { key: tenant.key, body: { name: 'still a draft' } })).status, 200)
  })

  t.test("another tenant's segment, template or bonus is unknown on create, PATCH and start", async (t) => {
    const mine = await h.createTenant()
    const other = await h.createTenant()
    const theirSegment = await segment(h, other)
    const theirTemplate = await template(h, other)
    const theirBonus = (await must(h.request('POST', '/bonuses', { key: other.key, body: { name: 'b', type: 'reload', value: 10, value_type: 'fixed' } }), 201)).data.id
    const myTemplate = await template(h, mine)
    const mySegment = await segment(h, mine)

    const creates: [Record<string, unknown>, string][] = [
      [{ type: 'one_shot', target_segment_id: theirSegment }, 'target_segment_id'],
      [{ type: 'one_shot', config: { templates: { in_app: theirTemplate } } }, 'config.templates.in_app'],
      [{ type: 'one_shot', config: { bonus_id: theirBonus } }, 'config.bonus_id'],
      [{ type: 'journey', config: { steps: [{ id: 'a', type: 'send', channel: 'in_app', template_id: theirTemplate }] } }, 'config.steps.0.template_id'],
    ]
    for (const [body, field] of creates) {
      const res = await h.request('POST', '/campaigns', { key: mine.key, body: { name: 'x', channels: ['in_app'], ...body } })
      t.equal(res.status, 400, `create: ${field}`)
      t.same(fieldsOf(res.body), [field])
    }
    const before = await mine.key
    const c = await createCampaign(h, mine, { type: 'one_shot', target_segment_id: mySegment, config: { templates: { in_app: myTemplate } } })
    for (const [body, field] of creates) {
      const { type: _type, ...patch } = body
      const res = await h.request('PATCH', `/campaigns/${c.id}`, { key: before, body: patch })
      t.equal(res.status, 400, `PATCH: ${field}`)
      t.same(fieldsOf(res.body), [field])
    }
    // A reference that became another tenant's (written behind the API's back) fails the start too.
    await h.app.ctx.sql`update campaigns set target_segment_id = ${theirSegment} where id = ${c.id}`
    const start = await h.request('PATCH', `/campaigns/${c.id}`, { key: mine.key, body: { status: 'running' } })
    t.equal(start.status, 400)
    t.ok(fieldsOf(start.body).includes('target_segment_id'))
    // Another brand of the same tenant: its segment targets other players, so it is unknown too.
    const second = await mine.createBrand('second')
    const secondSegment = (await must(h.request('POST', '/segments', { key: mine.key, body: { name: 's', type: 'dynamic', rules: {}, brand: second.slug } }), 201)).data.id
    const cross = await h.request('PATCH', `/campaigns/${c.id}`, { key: mine.key, body: { target_segment_id: secondSegment } })
    t.equal(cross.status, 400)
    t.same(fieldsOf(cross.body), ['target_segment_id'])
    // The second brand's template and bonus too, and through a key pinned to the first brand: a campaign
    // reaches only its own brand's resources (its messages and grants are for that brand's players).
    const secondTemplate = await template(h, mine, 'in_app', { brand: second.slug })
    const secondBonus = (await must(h.request('POST', '/bonuses', { key: mine.key, body: { name: 'b2', type: 'reload', value: 10, value_type: 'fixed', brand: second.slug } }), 201)).data.id
    const pinned = await mine.createKey({ name: 'main only', brand: mine.brand.slug })
    for (const [body, field] of [
      [{ config: { templates: { in_app: secondTemplate } } }, 'config.templates.in_app'],
      [{ config: { bonus_id: secondBonus } }, 'config.bonus_id'],
    ] as const) {
      for (const key of [mine.key, pinned.key]) {
        const res = await h.request('POST', '/campaigns', { key, body: { name: 'x', channels: ['in_app'], type: 'one_shot', ...body } })
        t.equal(res.status, 400, `another brand's ${field}`)
        t.same(fieldsOf(res.body), [field])
      }
    }
  })
})
