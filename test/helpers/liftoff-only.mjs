// Preloaded (`--import`) by processes a test starts on embedded PostgreSQL: PGlite's WebAssembly on V8's
// baseline compiler only, as harness.ts sets it in the test's own process (see there). A flag set here,
// not on node's command line: worker threads inherit the command line's flags and refuse V8's.
import v8 from 'node:v8'

v8.setFlagsFromString('--liftoff-only')
