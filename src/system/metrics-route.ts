// GET /metrics (outside /api/v1, where Prometheus looks by default): the Prometheus text exposition of
// ctx.metrics, behind `Authorization: Bearer <METRICS_TOKEN>`. With METRICS_TOKEN unset the route does not
// exist (404 like any unknown path): metrics name routes and queue sizes, which are not for the internet.
import { safeEqual } from '../auth/keys.ts'
import type { AppContext } from '../context.ts'
import { AppError, unauthorized } from '../errors.ts'
import { renderError, STATUS_TEXT } from '../http/errors.ts'
import { requestIdFrom, type Traffic } from '../http/router.ts'

export const METRICS_PATH = '/metrics'
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

/** The little of a uWS-style app this route uses (uWS's TemplatedApp, or another engine with its API). */
interface MetricsResponse {
  onAborted(handler: () => void): unknown
  cork(cb: () => void): unknown
  writeStatus(status: string): MetricsResponse | unknown
  writeHeader(name: string, value: string): unknown
  end(body?: string): unknown
}
interface MetricsApp {
  get(pattern: string, handler: (res: MetricsResponse, req: { getHeader(name: string): string }) => void): unknown
}

export function registerMetricsRoute(app: MetricsApp, ctx: AppContext, traffic: Traffic): void {
  const token = ctx.config.metricsToken
  const metrics = ctx.metrics
  if (!token || !metrics) return
  app.get(METRICS_PATH, (res, req) => {
    const started = performance.now()
    const authz = req.getHeader('authorization')
    let aborted = false
    traffic.inFlight++
    res.onAborted(() => {
      aborted = true
    })
    // An error answer carries a request id like every other (docs/errors.md): the caller's, else a new one.
    const requestId = requestIdFrom(req.getHeader('x-request-id') || undefined)
    const finish = (status: number, body: string, contentType: string) => {
      traffic.inFlight--
      metrics.observeRequest(METRICS_PATH, 'GET', status, (performance.now() - started) / 1000)
      if (aborted) return
      res.cork(() => {
        res.writeStatus(STATUS_TEXT[status] ?? String(status))
        res.writeHeader('content-type', contentType)
        if (status === 401) res.writeHeader('www-authenticate', 'Bearer realm="metrics"')
        if (status !== 200) res.writeHeader('x-request-id', requestId)
        res.end(body)
      })
    }
    const given = /^bearer /i.test(authz) ? authz.slice(7).trim() : ''
    if (!given || !safeEqual(given, token)) {
      const rendered = renderError(unauthorized('metrics token required (Authorization: Bearer)'), requestId)
      return finish(rendered.status, JSON.stringify(rendered.body), 'application/json')
    }
    metrics.render().then(
      (text) => finish(200, text, CONTENT_TYPE),
      (err: unknown) => {
        ctx.log.error({ err }, 'metrics: render failed')
        const rendered = renderError(new AppError('INTERNAL_ERROR', 'metrics unavailable'), requestId)
        finish(rendered.status, JSON.stringify(rendered.body), 'application/json')
      },
    )
  })
}
