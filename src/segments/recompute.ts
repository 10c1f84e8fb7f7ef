// The periodic segment recompute, started with the app (src/app.ts backgroundServices). Each round
// recomputes the segments not computed during the last interval; rows are locked with SKIP LOCKED, so
// several processes share the rounds safely. Tests call recomputeSegments() (service.ts) directly.
import type { BackgroundService } from '../app.ts'
import type { AppContext } from '../context.ts'
import { recomputeSegments } from './service.ts'

export const DEFAULT_RECOMPUTE_INTERVAL_MS = 60_000

export function startSegmentRecompute(ctx: AppContext, opts: { intervalMs?: number } = {}): BackgroundService {
  const intervalMs = opts.intervalMs ?? DEFAULT_RECOMPUTE_INTERVAL_MS
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined

  const round = async () => {
    const started = Date.now()
    try {
      // A segment computed less than an interval ago (by any process) is left for the next round.
      const staleBefore = new Date(ctx.clock().getTime() - intervalMs + 1000)
      const result = await recomputeSegments(ctx, { staleBefore, shouldStop: () => stopped })
      if (result.computed > 0) ctx.log.debug({ ...result, ms: Date.now() - started }, 'segments recomputed')
    } catch (err) {
      ctx.log.error({ err }, 'segment recompute round failed')
    }
  }

  const schedule = () => {
    if (stopped) return
    timer = setTimeout(() => {
      running = round().finally(() => {
        running = undefined
        schedule()
      })
    }, intervalMs)
    timer.unref()
  }
  schedule()

  return {
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      await running
    },
  }
}
