// Runs the TypeScript sources directly: `node --import ./src/ts-loader.mjs src/main.ts`.
// Each .ts file is stripped of its types by esbuild. We use this instead of tsx for the service because
// tsx compiles with esbuild's keepNames, which wraps every function expression in a defineProperty call:
// on our hot paths (a few closures per request and per batch) that was ~30% of the router's CPU.
// Worker threads inherit the flag through execArgv, so Piscina workers load .ts files the same way.
import { register } from 'node:module'

register('./ts-loader-hooks.mjs', import.meta.url)
