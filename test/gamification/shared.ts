// Checks every definition resource (levels, missions, badges, currencies, bonuses, tournaments) shares:
// the create → get → patch → delete life cycle, tenant isolation, brand-pinned keys and scopes.
import type { Test } from 'tap'
import type { Harness } from '../helpers/harness.ts'

type T = Test

/** A list body's items: `{ data: [...] }`, whatever else it carries. */
const items = (body: { data: { id: string }[] }): string[] => body.data.map((x) => x.id)

export function sharedResourceTests(
  t: T,
  h: Harness,
  o: { path: string; create: Record<string, unknown>; patch: Record<string, unknown> },
): void {
  const { path } = o

  t.test(`${path}: create 201, get, patch, delete 200 { data: { id } }, then 404 and gone from the list`, async (t) => {
    const tenant = await h.createTenant()
    const created = await h.request('POST', path, { key: tenant.key, body: o.create })
    t.equal(created.status, 201, created.text)
    const id = created.body.data.id as string
    t.match(id, /^[0-9a-f-]{36}$/)
    t.ok(!Number.isNaN(Date.parse(created.body.data.created_at)))

    const got = await h.request('GET', `${path}/${id}`, { key: tenant.key })
    t.equal(got.status, 200)
    t.same(got.body.data, created.body.data)

    const listed = await h.request('GET', path, { key: tenant.key })
    t.equal(listed.status, 200)
    t.same(items(listed.body), [id])

    const patched = await h.request('PATCH', `${path}/${id}`, { key: tenant.key, body: o.patch })
    t.equal(patched.status, 200, patched.text)
    for (const [k, v] of Object.entries(o.patch)) t.same(patched.body.data[k], v, `patched ${k}`)
    t.equal(patched.body.data.created_at, created.body.data.created_at)
    const again = await h.request('GET', `${path}/${id}`, { key: tenant.key })
    t.same(again.body.data, patched.body.data)

    const deleted = await h.request('DELETE', `${path}/${id}`, { key: tenant.key })
    t.equal(deleted.status, 200)
    t.same(deleted.body, { data: { id } })
    t.equal((await h.request('GET', `${path}/${id}`, { key: tenant.key })).body.code, 'NOT_FOUND')
    t.equal((await h.request('GET', `${path}/${id}`, { key: tenant.key })).status, 404)
    t.same(items((await h.request('GET', path, { key: tenant.key })).body), [])
    const twice = await h.request('DELETE', `${path}/${id}`, { key: tenant.key })
    t.equal(twice.status, 404)
    t.equal((await h.request('PATCH', `${path}/${id}`, { key: tenant.key, body: o.patch })).status, 404)
  })

  t.test(`${path}: unknown ids are 404, malformed ids 400, and an empty patch 200 with the resource unchanged`, async (t) => {
    const tenant = await h.createTenant()
    const missing = '00000000-0000-4000-8000-000000000000'
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const res = await h.request(method, `${path}/${missing}`, { key: tenant.key, body: method === 'PATCH' ? o.patch : undefined })
      t.equal(res.status, 404, `${method} unknown id`)
      t.equal(res.body.code, 'NOT_FOUND')
    }
    t.equal((await h.request('GET', `${path}/not-a-uuid`, { key: tenant.key })).status, 404)
    const created = await h.request('POST', path, { key: tenant.key, body: o.create })
    // "Patch accepts any subset of the create fields": the empty subset too (it was a 400).
    const empty = await h.request('PATCH', `${path}/${created.body.data.id}`, { key: tenant.key, body: {} })
    t.equal(empty.status, 200, empty.text)
    t.same(empty.body.data, created.body.data)
    const second = await tenant.createBrand('second')
    const onlyBrand = await h.request('PATCH', `${path}/${created.body.data.id}`, { key: tenant.key, body: { brand: second.slug } })
    t.equal(onlyBrand.status, 200, 'brand is not a patchable field: ignored')
    t.same(onlyBrand.body.data, created.body.data)
    t.equal((await h.request('GET', path, { key: tenant.key })).body.data.length, 1, 'still in its brand')
    t.equal((await h.request('PATCH', `${path}/${missing}`, { key: tenant.key, body: {} })).status, 404, 'empty patch of an unknown id')
  })

  t.test(`${path}: another tenant's key gets 404 and an empty list`, async (t) => {
    const owner = await h.createTenant()
    const other = await h.createTenant()
    const created = await h.request('POST', path, { key: owner.key, body: o.create })
    const id = created.body.data.id as string
    for (const [method, body] of [['GET'], ['PATCH', o.patch], ['DELETE']] as const) {
      const res = await h.request(method, `${path}/${id}`, { key: other.key, body })
      t.equal(res.status, 404, `${method} from another tenant`)
      t.equal(res.body.code, 'NOT_FOUND')
    }
    t.same(items((await h.request('GET', path, { key: other.key })).body), [])
    // Still there for its owner, unchanged.
    const still = await h.request('GET', `${path}/${id}`, { key: owner.key })
    t.same(still.body.data, created.body.data)
    // The other tenant cannot name the owner's brand either.
    const hinted = await h.request('GET', path, { key: other.key, headers: { 'x-brand': owner.brand.id } })
    t.equal(hinted.status, 400)
  })

  t.test(`${path}: brands: create and list act on the resolved brand; a pinned key sees only its brand`, async (t) => {
    const tenant = await h.createTenant()
    const second = await tenant.createBrand('second')
    const inMain = await h.request('POST', path, { key: tenant.key, body: o.create })
    const inSecond = await h.request('POST', path, { key: tenant.key, body: { ...o.create, brand: 'second' } })
    t.equal(inSecond.status, 201)
    const viaHeader = await h.request('POST', path, { key: tenant.key, body: o.create, headers: { 'x-brand': second.id } })
    t.equal(viaHeader.status, 201)
    t.same(items((await h.request('GET', path, { key: tenant.key })).body), [inMain.body.data.id])
    t.same(
      items((await h.request('GET', path, { key: tenant.key, query: { brand: 'second' } })).body).sort(),
      [inSecond.body.data.id, viaHeader.body.data.id].sort(),
    )
    // A tenant-wide key reads by id across the tenant's brands.
    t.equal((await h.request('GET', `${path}/${inSecond.body.data.id}`, { key: tenant.key })).status, 200)

    const pinned = await tenant.createKey({ brand: 'second' })
    t.equal((await h.request('GET', `${path}/${inMain.body.data.id}`, { key: pinned.key })).status, 404)
    t.equal((await h.request('PATCH', `${path}/${inMain.body.data.id}`, { key: pinned.key, body: o.patch })).status, 404)
    t.equal((await h.request('DELETE', `${path}/${inMain.body.data.id}`, { key: pinned.key })).status, 404)
    t.equal((await h.request('GET', `${path}/${inSecond.body.data.id}`, { key: pinned.key })).status, 200)
    // A pinned key ignores brand hints: it lists and writes its own brand only.
    const pinnedList = await h.request('GET', path, { key: pinned.key, headers: { 'x-brand': 'main' } })
    t.equal(items(pinnedList.body).length, 2)
    const pinnedCreate = await h.request('POST', path, { key: pinned.key, body: { ...o.create, brand: 'main' } })
    t.equal(pinnedCreate.status, 201)
    t.same(items((await h.request('GET', path, { key: tenant.key })).body), [inMain.body.data.id])
    t.equal(items((await h.request('GET', path, { key: tenant.key, query: { brand: 'second' } })).body).length, 3)

    const unknown = await h.request('GET', path, { key: tenant.key, query: { brand: 'nope' } })
    t.equal(unknown.status, 400)
  })

  t.test(`${path}: a read-only key may read but not write; no key is 401`, async (t) => {
    const tenant = await h.createTenant()
    const created = await h.request('POST', path, { key: tenant.key, body: o.create })
    const reader = await tenant.createKey({ scopes: ['read'] })
    t.equal((await h.request('GET', path, { key: reader.key })).status, 200)
    t.equal((await h.request('GET', `${path}/${created.body.data.id}`, { key: reader.key })).status, 200)
    const post = await h.request('POST', path, { key: reader.key, body: o.create })
    t.equal(post.status, 403)
    t.equal(post.body.code, 'FORBIDDEN')
    t.equal((await h.request('PATCH', `${path}/${created.body.data.id}`, { key: reader.key, body: o.patch })).status, 403)
    t.equal((await h.request('DELETE', `${path}/${created.body.data.id}`, { key: reader.key })).status, 403)
    const ingest = await tenant.createKey({ scopes: ['events:write'] })
    t.equal((await h.request('GET', path, { key: ingest.key })).status, 403)
    const none = await h.request('GET', path)
    t.equal(none.status, 401)
    t.equal(none.body.code, 'UNAUTHORIZED')
  })
}

/** POSTs `body` and expects 400 BAD_REQUEST naming `field` in details.errors. */
export async function expect400(
  t: T,
  h: Harness,
  key: string,
  method: string,
  path: string,
  body: unknown,
  field: string,
): Promise<void> {
  const res = await h.request(method, path, { key, body })
  t.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)} → 400`)
  t.equal(res.body.code, 'BAD_REQUEST')
  const fields = ((res.body.details?.errors ?? []) as { field: string }[]).map((e) => e.field)
  t.ok(fields.includes(field), `names ${field} (got ${fields.join(', ')})`)
}
