// Messages between the main thread and the ingest workers. Bodies travel as bytes (transferred, not
// cloned: structured-cloning parsed objects costs ~3x the parse, see perf-notes); only small metadata and
// the per-player columns come back as plain arrays.
import Type, { type Static } from 'typebox'
import { type TransformResult, TransformTask } from '../events/transform.ts'

/** Shape check of a task, run once per message at the worker boundary (cheap: no per-event work). */
export const IngestTaskSchema = Type.Object({ kind: Type.Literal('transform'), ...TransformTask.properties })
export type IngestTask = Static<typeof IngestTaskSchema>
/** rowsDeflated: `rows` raw-deflated for the spool, off the main thread (when large enough to be worth it). */
export type IngestTaskResult = TransformResult & { rowsDeflated?: Uint8Array }
