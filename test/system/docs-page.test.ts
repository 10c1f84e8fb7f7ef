// GET /api/v1/docs rendered in a real headless Chromium (Debian's `chromium` package): the page renders,
// lists the operations of our OpenAPI document, and asks nothing of any other host (no CDN, no fonts).
// Skipped, saying so, where /usr/bin/chromium is not installed (`apt-get install -y chromium`).
import { existsSync } from 'node:fs'
import { chromium } from 'playwright-core'
import t from 'tap'
import { embeddedRunOnly } from '../helpers/embedded-run-only.ts'
import { startHarness } from '../helpers/harness.ts'

const CHROMIUM = '/usr/bin/chromium'

// The document and page are the HTTP layer's: the same whatever stores run.
const h = embeddedRunOnly.skip ? (undefined as never) : await startHarness(t)

t.test('the page and its script are public and served from this server', embeddedRunOnly, async (t) => {
  const page = await fetch(`${h.origin}/api/v1/docs`)
  t.equal(page.status, 200)
  t.match(page.headers.get('content-type'), /^text\/html/)
  const html = await page.text()
  t.match(html, /<script src="\/api\/v1\/docs\/scalar\.js"><\/script>/)
  t.notMatch(html, /https?:\/\//, 'no absolute URL: nothing from a CDN')
  const script = await fetch(`${h.origin}/api/v1/docs/scalar.js`)
  t.equal(script.status, 200)
  t.match(script.headers.get('content-type'), /javascript/)
  t.ok((await script.arrayBuffer()).byteLength > 1_000_000, "Scalar's standalone bundle")
})

t.test('headless Chromium renders the reference and lists the operations', { skip: embeddedRunOnly.skip ?? (existsSync(CHROMIUM) ? false : `${CHROMIUM} not installed (apt-get install -y chromium)`) }, async (t) => {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const foreign: string[] = []
  const pageErrors: string[] = []
  // Anything not from our origin is recorded and refused, so a CDN dependency fails here, offline or not.
  await page.route('**/*', (route) => {
    const url = route.request().url()
    if (url.startsWith(h.origin) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue()
    foreign.push(url)
    return route.abort()
  })
  page.on('pageerror', (err) => pageErrors.push(err.message))
  await page.goto(`${h.origin}/api/v1/docs`, { waitUntil: 'load' })
  // Scalar fetches the document, then renders one section per operation, titled by its summary.
  await page.getByText('Service health and dependency checks').first().waitFor({ timeout: 60_000 })
  // The sidebar comes first; the main column (the document's title, then each section) a moment later.
  await page.getByRole('heading', { name: /Respin API/ }).first().waitFor({ timeout: 60_000 })
  const text = await page.locator('body').innerText()
  const doc = (await h.request('GET', '/openapi.json')).body
  const summaries = Object.values(doc.paths as Record<string, Record<string, { summary: string }>>).flatMap((ops) => Object.values(ops).map((op) => op.summary))
  const shown = summaries.filter((s) => text.includes(s))
  t.ok(summaries.length > 20, `${summaries.length} operations in the document`)
  t.ok(shown.length / summaries.length > 0.9, `the page lists ${shown.length} of ${summaries.length} operations`)
  t.match(text, /Respin API/, "the document's title")
  t.same(foreign, [], 'no request left our origin')
  t.same(pageErrors, [], 'no script error')
})
