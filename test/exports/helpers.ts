// Shared helpers of the export tests: a client of GET /export/{dataset} and POST /events.
import type { Harness } from '../helpers/harness.ts'

export type Row = Record<string, unknown>
export type Page = { data: Row[]; next_cursor: string | null }

export function exportClient(h: Harness) {
  /** One page of a dataset; throws unless 200, naming the dataset and query. */
  async function page(key: string, dataset: string, query: Record<string, string | number> = {}, headers: Record<string, string> = {}): Promise<Page> {
    const res = await h.request('GET', `/export/${dataset}`, { key, query, headers })
    if (res.status !== 200) throw new Error(`${dataset} ${JSON.stringify(query)}: ${res.status} ${res.text}`)
    return res.body
  }
  /**
   * Every row from `cursor` on, page by page until next_cursor is null; returns the rows, the last non-null
   * cursor (or the one passed in) and each page's row count, so callers can check the page sizes.
   */
  async function drain(key: string, dataset: string, opts: { limit: number; cursor?: string; headers?: Record<string, string> }) {
    const rows: Row[] = []
    const sizes: number[] = []
    let cursor = opts.cursor
    for (;;) {
      const p = await page(key, dataset, { limit: opts.limit, ...(cursor ? { cursor } : {}) }, opts.headers)
      rows.push(...p.data)
      sizes.push(p.data.length)
      if (p.next_cursor === null) return { rows, cursor, sizes }
      cursor = p.next_cursor
    }
  }
  /** POST /events; throws the response text unless 200. */
  async function ingest(key: string, events: unknown[], headers: Record<string, string> = {}) {
    const res = await h.request('POST', '/events', { key, body: { events }, headers })
    if (res.status !== 200) throw new Error(res.text)
    return res.body
  }
  return { page, drain, ingest }
}
