import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { KEY_FILE, openSecretBox } from '../../src/lib/secret-box.ts'

t.test('seals and opens; every seal differs; tampering and another key are refused', async (t) => {
  const box = openSecretBox({ secretKey: 'k'.repeat(40), dataDir: '/nonexistent' })
  const a = box.seal('whsec_abc')
  const b = box.seal('whsec_abc')
  t.not(a, b, 'random IV')
  t.notMatch(a, /whsec/)
  t.equal(box.open(a), 'whsec_abc')
  const [v, id, data] = a.split('.') as [string, string, string]
  const flipped = Buffer.from(data, 'base64url')
  flipped[flipped.length - 1]! ^= 1
  t.throws(() => box.open(`${v}.${id}.${flipped.toString('base64url')}`), /failed authentication/)
  const other = openSecretBox({ secretKey: 'x'.repeat(40), dataDir: '/nonexistent' })
  t.throws(() => other.open(a), /configured key/)
  t.throws(() => box.open('plain text'), /not a sealed secret/)
})

t.test('without SECRET_KEY a key file is created once under DATA_DIR, mode 0600, and reused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'respin-box-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const first = openSecretBox({ dataDir: dir })
  const sealed = first.seal('s3cret')
  const file = join(dir, KEY_FILE)
  t.equal(statSync(file).mode & 0o777, 0o600)
  t.ok(readFileSync(file, 'utf8').trim().length >= 32)
  const second = openSecretBox({ dataDir: dir })
  t.equal(second.keyId, first.keyId)
  t.equal(second.open(sealed), 's3cret')
})
