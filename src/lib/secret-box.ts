// Encryption of tenant secrets at rest (webhook signing secrets, SMTP passwords, bot tokens, VAPID keys):
// AES-256-GCM under a key that never enters the database, so a database dump alone cannot sign or log in
// anywhere. The key comes from SECRET_KEY, or else from a key file created once under DATA_DIR
// (`secret.key`, mode 0600). Several processes on one host share DATA_DIR and so the file; processes on
// several hosts must all be given the same SECRET_KEY.
//
// Sealed form: `v1.<key id>.<base64url(iv | tag | ciphertext)>`. The key id (8 hex chars of SHA-256 of the
// key) makes a wrong key fail with a clear message instead of an authentication error.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface SecretBox {
  seal(plain: string): string
  open(sealed: string): string
  /** Identifies the key (not secret), e.g. for a health line. */
  readonly keyId: string
}

export class SecretBoxError extends Error {}

export const KEY_FILE = 'secret.key'

/** Builds the box from SECRET_KEY (any string of ≥ 32 characters, hashed to 32 bytes) or the key file. */
export function openSecretBox(opts: { secretKey?: string; dataDir: string }): SecretBox {
  const material = opts.secretKey ?? readOrCreateKeyFile(opts.dataDir)
  return createSecretBox(createHash('sha256').update(material).digest())
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new SecretBoxError('secret box key must be 32 bytes')
  const keyId = createHash('sha256').update(key).digest('hex').slice(0, 8)
  return {
    keyId,
    seal(plain) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key, iv)
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
      return `v1.${keyId}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`
    },
    open(sealed) {
      const [version, id, data] = sealed.split('.')
      if (version !== 'v1' || !id || data === undefined) throw new SecretBoxError('not a sealed secret')
      if (id !== keyId) throw new SecretBoxError(`sealed with key ${id}, but the configured key is ${keyId} (SECRET_KEY or DATA_DIR/${KEY_FILE} changed?)`)
      const raw = Buffer.from(data, 'base64url')
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12))
      decipher.setAuthTag(raw.subarray(12, 28))
      try {
        return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
      } catch {
        throw new SecretBoxError('sealed secret failed authentication')
      }
    },
  }
}

function readOrCreateKeyFile(dataDir: string): string {
  const file = join(dataDir, KEY_FILE)
  try {
    return readKey(file)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  mkdirSync(dataDir, { recursive: true })
  // Written aside, then linked into place: link fails if the name exists, so of two processes starting
  // together one installs its key whole and the other reads that one.
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`
  writeFileSync(temp, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 })
  try {
    linkSync(temp, file)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  } finally {
    unlinkSync(temp)
  }
  return readKey(file)
}

function readKey(file: string): string {
  const text = readFileSync(file, 'utf8').trim()
  if (text.length < 32) throw new SecretBoxError(`${file} holds no key (expected ≥ 32 characters)`)
  return text
}
