import { readFileSync } from 'node:fs'
import postgres from 'postgres'
import t from 'tap'
import { ERROR_CODES } from '../../src/errors.ts'
import { renderError, statusOf } from '../../src/http/errors.ts'

t.test('docs/errors.md documents every error code with its status', async (t) => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
  for (const code of ERROR_CODES) t.match(doc, new RegExp(`\\| \`${code}\` \\| ${statusOf(code)} \\|`), code)
})

t.test('a database connection lost under a request is a 503 with a retry-after, never a 500', async (t) => {
  const lost = [
    Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' }),
    Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104 }),
    new postgres.PostgresError({ code: '57P01', message: 'terminating connection due to administrator command' } as never),
    new postgres.PostgresError({ code: '08006', message: 'connection failure' } as never),
  ]
  for (const err of lost) {
    const r = renderError(err, 'req-1')
    t.match(r, { status: 503, body: { code: 'SERVICE_UNAVAILABLE', details: { reason: 'DATABASE_UNAVAILABLE' } }, headers: { 'retry-after': '1' } }, err.message)
  }
  t.equal(renderError(new Error('a bug'), 'req-2').status, 500, 'anything else is still a 500')
  t.equal(renderError(new postgres.PostgresError({ code: '42P01', message: 'relation does not exist' } as never), 'req-3').status, 500, 'a broken query too')
})
