import { startApp } from './app.ts'
import { ConfigError, loadConfig, redactConfig } from './config.ts'
import { createLogger } from './lib/log.ts'

let config
try {
  config = loadConfig()
} catch (err) {
  if (!(err instanceof ConfigError)) throw err
  process.stderr.write(`${err.message}\n`)
  process.exit(78) // EX_CONFIG
}
const log = createLogger(config.logLevel, { redact: config.logRedact })
log.info({ config: redactConfig(config) }, 'starting respin')

const app = await startApp(config, { log }).catch((err: unknown) => {
  log.fatal({ err }, 'respin failed to start')
  process.exit(1)
})

let stopping = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    log.info({ signal }, 'shutting down')
    app.close().then(
      () => {
        log.info('stopped')
        process.exit(0)
      },
      (err: unknown) => {
        log.error({ err }, 'unclean shutdown')
        process.exit(1)
      },
    )
  })
}
