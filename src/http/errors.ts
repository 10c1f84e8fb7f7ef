// The one place that turns errors into HTTP: status per code, and the spec's body { error, code, details }.
import { isLostConnection, isRefusedValue, pgErrorCode } from '../db/postgres.ts'
import { AppError, type ErrorCode } from '../errors.ts'

export function statusOf(code: ErrorCode): number {
  switch (code) {
    case 'BAD_REQUEST':
      return 400
    case 'UNAUTHORIZED':
      return 401
    case 'FORBIDDEN':
      return 403
    case 'NOT_FOUND':
      return 404
    case 'PAYLOAD_TOO_LARGE':
      return 413
    case 'RATE_LIMITED':
      return 429
    case 'SERVICE_UNAVAILABLE':
      return 503
    case 'INTERNAL_ERROR':
      return 500
    case 'REQUEST_TIMEOUT':
      return 408
    case 'HEADERS_TOO_LARGE':
      return 431
  }
}

export interface ErrorReply {
  status: number
  body: { error: string; code: ErrorCode; details?: Record<string, unknown>; request_id: string }
  headers: Record<string, string>
}

/**
 * A value PostgreSQL refuses is a 400 (details.reason VALUE_REJECTED). Other unknown errors become a generic
 * 500: nothing internal (messages, stacks, SQL) reaches the client.
 */
export function renderError(err: unknown, requestId: string): ErrorReply {
  if (err instanceof AppError) {
    const body: ErrorReply['body'] = { error: err.message, code: err.code, request_id: requestId }
    if (err.details) body.details = err.details
    return { status: statusOf(err.code), body, headers: err.headers ?? {} }
  }
  if (isRefusedValue(err)) {
    return {
      status: 400,
      body: {
        error: 'a value in the request cannot be stored or compared by the database (for example a NUL character or a date out of range)',
        code: 'BAD_REQUEST',
        details: { reason: 'VALUE_REJECTED' },
        request_id: requestId,
      },
      headers: {},
    }
  }
  const pgCode = pgErrorCode(err)
  // A row the request names was deleted between its check and its write (a ping racing the endpoint's
  // delete, a credit racing the player's erasure): the resource is gone, as a 404 says.
  if (pgCode === FOREIGN_KEY_VIOLATION) {
    return {
      status: 404,
      body: { error: 'a resource this request names was deleted meanwhile', code: 'NOT_FOUND', details: { reason: 'DELETED_MEANWHILE' }, request_id: requestId },
      headers: {},
    }
  }
  // Concurrent writes of the same rows, one chosen to give way (its transaction rolled back, nothing
  // written): the request may simply be sent again.
  if (pgCode === DEADLOCK_DETECTED || pgCode === SERIALIZATION_FAILURE) {
    return {
      status: 503,
      body: { error: 'a concurrent change held the same rows; nothing was written: try again', code: 'SERVICE_UNAVAILABLE', details: { reason: 'CONCURRENT_CHANGE' }, request_id: requestId },
      headers: { 'retry-after': '1' },
    }
  }
  // The database went away under the request (a dropped connection, a terminated session): nothing about
  // the request itself, and a retry after a moment is the answer.
  if (isLostConnection(err)) {
    return {
      status: 503,
      body: { error: 'the database connection was lost; try again', code: 'SERVICE_UNAVAILABLE', details: { reason: 'DATABASE_UNAVAILABLE' }, request_id: requestId },
      headers: { 'retry-after': '1' },
    }
  }
  return {
    status: 500,
    body: { error: 'internal error', code: 'INTERNAL_ERROR', request_id: requestId },
    headers: {},
  }
}

const FOREIGN_KEY_VIOLATION = '23503'
const DEADLOCK_DETECTED = '40P01'
const SERIALIZATION_FAILURE = '40001'

export const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  202: '202 Accepted',
  204: '204 No Content',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  408: '408 Request Timeout',
  413: '413 Payload Too Large',
  429: '429 Too Many Requests',
  431: '431 Request Header Fields Too Large',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
}
