// Starting a campaign validates everything its run needs (contract-engines §4), and a segment, template or
// bonus of another tenant is unknown on create, PATCH and start.
import t from 'tap'
import { startHarness } from '../helpers/harness.ts'
import { createCampaign, fieldsOf, must, segment, template } from './helpers.ts'

const h = await startHarness(t)
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
