// Child API processes of a test file die with it.
import type { ChildProcess } from 'node:child_process'

const children = new Set<ChildProcess>()
let reaperInstalled = false

/**
 * Kills `proc` when this test process ends, however it ends: a teardown does not run when tap stops a
 * file on its timeout (SIGTERM), and an API process left running would load the machine for every test
 * after it.
 */
export function reapOnExit(proc: ChildProcess): void {
  if (children.size === 0 && !reaperInstalled) {
    reaperInstalled = true
    const reap = () => {
      for (const c of children) c.kill('SIGKILL')
    }
    process.on('exit', reap)
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        reap()
        process.exit(1)
      })
    }
  }
  children.add(proc)
  proc.once('exit', () => children.delete(proc))
}
