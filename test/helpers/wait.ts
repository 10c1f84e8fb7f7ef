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
