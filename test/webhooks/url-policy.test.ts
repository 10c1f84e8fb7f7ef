// The URL policy through the API, with the policy on (no WEBHOOK_ALLOW_PRIVATE): refused at create and
// PATCH with a 400 naming the field, and checked again at every attempt.
import t from 'tap'
import { cachingResolver } from '../../src/webhooks/dispatcher.ts'
import { startHarness } from '../helpers/harness.ts'
import { sleep, startReceiver, waitFor } from './helpers.ts'

t.test('URL policy at create, PATCH and every attempt', async (t) => {
  const h = await startHarness(t, { env: { WEBHOOK_TIMEOUT_MS: '1000' } })
  const tenant = await h.createTenant()
  const rx = await startReceiver(t)
  const refused = [
    `http://8.8.8.8/hook`,
    `https://127.0.0.1:${rx.port}/hook`,
    'https://localhost/hook',
    'https://[::1]/hook',
    'https://2130706433/hook',
    'https://0x7f.0.0.1/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://[::ffff:10.0.0.1]/hook',
    'https://[64:ff9b::a9fe:a9fe]/hook',
    'https://100.64.1.1/hook',
    'https://[fd00::1]/hook',
    'https://user:pass@8.8.8.8/hook',
  ]
  for (const url of refused) {
    const res = await h.request('POST', '/webhooks', { key: tenant.key, body: { url, events: ['player.created'] } })
    t.equal(res.status, 400, url)
    t.equal(res.body.code, 'BAD_REQUEST')
    t.equal(res.body.details?.errors?.[0]?.field, 'url', `${url}: ${res.body.details?.errors?.[0]?.message}`)
  }
  // A public literal passes without any DNS.
  const ok = await h.request('POST', '/webhooks', { key: tenant.key, body: { url: 'https://8.8.8.8/hook', events: ['player.created'] } })
  t.equal(ok.status, 201)
  const id = ok.body.data.id as string
  const patched = await h.request('PATCH', `/webhooks/${id}`, { key: tenant.key, body: { url: 'https://10.0.0.1/hook' } })
  t.equal(patched.status, 400)
  t.equal(patched.body.details.errors[0].field, 'url')
  t.equal((await h.request('GET', `/webhooks/${id}`, { key: tenant.key })).body.data.url, 'https://8.8.8.8/hook', 'unchanged')

  // A stored URL that no longer passes (as after a DNS change) is refused at the attempt: nothing is sent.
  await h.app.ctx.sql`update webhook_endpoints set url = ${`https://127.0.0.1:${rx.port}/hook`} where id = ${id}`
  await sleep(1100) // the dispatcher's endpoint cache
  await h.request('POST', `/webhooks/${id}/ping`, { key: tenant.key })
  const log = await waitFor('attempt logged', async () => {
    const d = (await h.request('GET', `/webhooks/${id}/deliveries`, { key: tenant.key })).body.data[0]
    return d?.attempt_count >= 1 && d
  })
  t.match(log.attempts[0], { n: 1, response_code: null, error: /^url policy: .*loopback/ })
  t.equal(log.status, 'pending', 'retried later like any failed attempt')
  t.equal(rx.received.length, 0, 'nothing reached the private address')
})

t.test('the dispatcher resolves a host once while a lookup is in flight, and keeps a failure briefly', async (t) => {
  let calls = 0
  let fail = false
  const resolve = cachingResolver(async () => {
    calls++
    await new Promise((r) => setTimeout(r, 50))
    if (fail) throw new Error('ENOTFOUND')
    return [{ address: '93.184.216.34', family: 4 as const }]
  })
  const answers = await Promise.all(Array.from({ length: 20 }, () => resolve('hooks.example.com')))
  t.equal(calls, 1, 'twenty attempts at once, one lookup')
  t.same(answers[19], [{ address: '93.184.216.34', family: 4 }])
  fail = true
  const results = await Promise.allSettled(Array.from({ length: 20 }, () => resolve('gone.example.com')))
  t.ok(results.every((r) => r.status === 'rejected'))
  t.equal(calls, 2, 'a failing name: one lookup for the burst')
  await t.rejects(resolve('gone.example.com'))
  t.equal(calls, 2, 'and its failure is reused right after')
})
