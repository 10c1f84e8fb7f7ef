// Waiting in tests: for a condition that background work makes true.
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Polls until fn returns a truthy value (returned), or throws after timeoutMs. */
export async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await fn()
    if (value) return value as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/**
 * Polls until ok(value), then returns that value; once timeoutMs is up, returns the last one instead of
 * throwing, so the caller's assertion on it shows what the value actually was.
 */
export async function pollUntil<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 5000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await fn()
    if (ok(value) || Date.now() > deadline) return value
    await sleep(everyMs)
  }
}
