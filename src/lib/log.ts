import { pino, type DestinationStream, type Logger } from 'pino'

export type { Logger }

/**
 * Paths pino replaces with "[redacted]": key material, and the personal data we might attach to a log
 * object, at the top level and one level down (`*.email` covers `{ player: { email } }`). LOG_REDACT adds
 * more paths (config.logRedact). The request line itself (router.ts) carries ids, route, status and time,
 * never a header, body or query string.
 */
export const DEFAULT_REDACT = [
  'apiKey',
  'api_key',
  'key',
  'secret',
  'token',
  'password',
  'authorization',
  'headers["x-api-key"]',
  'headers.authorization',
  'headers.cookie',
  'email',
  'phone',
  'name',
  'ip',
  'metadata',
  '*.apiKey',
  '*.api_key',
  '*.key',
  '*.secret',
  '*.token',
  '*.password',
  '*.email',
  '*.phone',
  '*.ip',
  // Channel credentials and webhook secrets, should an object holding them ever be logged.
  'smtpUrl',
  'smtp_url',
  'botToken',
  'bot_token',
  'vapidPrivateKey',
  'vapid_private_key',
  'previousSecret',
  '*.smtpUrl',
  '*.smtp_url',
  '*.botToken',
  '*.bot_token',
  '*.vapidPrivateKey',
  '*.vapid_private_key',
  '*.previousSecret',
  // A request's headers one level down (`{ req: { headers } }`).
  '*.headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers.cookie',
]

export function createLogger(level: string, opts: { redact?: string[]; destination?: DestinationStream } = {}): Logger {
  const options = { level, base: { service: 'respin' }, redact: { paths: [...DEFAULT_REDACT, ...(opts.redact ?? [])], censor: '[redacted]' } }
  return opts.destination ? pino(options, opts.destination) : pino(options)
}
