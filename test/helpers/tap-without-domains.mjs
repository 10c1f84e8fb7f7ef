// Loaded into every test process (package.json, tap.node-arg) before tap: tap's async-hook-domain is
// given a hook that does nothing. It tracks every async resource with an init and a destroy hook to pin
// a stray error on the subtest it came from, and a destroy hook makes V8 track each promise's lifetime:
// awaits ran ~15x slower (300k awaits: 1,259 ms, 81 ms without), and the app under test is promise-heavy
// (the driver, the HTTP server, the engines). A stray error still fails the run: the process ends with
// it and tap reports the test unfinished, with the error's stack on stderr; only the subtest it is pinned
// on is lost.
import asyncHooks from 'node:async_hooks'
import { syncBuiltinESMExports } from 'node:module'

const createHook = asyncHooks.createHook
const inert = { enable() { return this }, disable() { return this } }
asyncHooks.createHook = function (callbacks) {
  if (new Error().stack?.includes('async-hook-domain')) return inert
  return createHook.call(this, callbacks)
}
// async-hook-domain imports createHook by name: named exports of builtins follow the object only after this.
syncBuiltinESMExports()
