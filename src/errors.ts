// One error type with a closed list of codes. http/errors.ts maps codes to HTTP statuses.
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'PAYLOAD_TOO_LARGE'
  | 'RATE_LIMITED'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_ERROR'
  | 'REQUEST_TIMEOUT'
  | 'HEADERS_TOO_LARGE'

export const ERROR_CODES: readonly ErrorCode[] = [
  'BAD_REQUEST',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
  'INTERNAL_ERROR',
  'REQUEST_TIMEOUT',
  'HEADERS_TOO_LARGE',
]

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Extra response headers, e.g. Retry-After on 429/503. */
    readonly headers?: Record<string, string>,
  ) {
    super(message)
    this.name = 'AppError'
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) =>
  new AppError('BAD_REQUEST', message, details)
export const notFound = (what: string) => new AppError('NOT_FOUND', `${what} not found`)
export const forbidden = (message: string) => new AppError('FORBIDDEN', message)
export const unauthorized = (message = 'missing, invalid or expired API key') =>
  new AppError('UNAUTHORIZED', message)
