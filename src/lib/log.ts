import { pino, type Logger } from 'pino'

export type { Logger }

/** Paths pino replaces with "[redacted]": keys, and the PII we might attach to a log object. */
const REDACT = [
  'apiKey',
  'key',
  'secret',
  'headers["x-api-key"]',
  'headers.authorization',
  'email',
  'phone',
  '*.email',
  '*.phone',
  'ip',
]

export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'respin' }, redact: { paths: REDACT, censor: '[redacted]' } })
}
