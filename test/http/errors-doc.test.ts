import { readFileSync } from 'node:fs'
import t from 'tap'
import { ERROR_CODES } from '../../src/errors.ts'
import { statusOf } from '../../src/http/errors.ts'

t.test('docs/errors.md documents every error code with its status', async (t) => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
  for (const code of ERROR_CODES) t.match(doc, new RegExp(`\\| \`${code}\` \\| ${statusOf(code)} \\|`), code)
})
