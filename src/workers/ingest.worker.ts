// Piscina worker entry for ingestion: pure CPU work on a group of requests (see events/transform.ts).
// No store is opened here: chDB must stay on the main thread (it crashes the process at exit when loaded
// in a worker) and PGlite's WASM engine lives on the main thread too; see docs/ingestion.md.
import { Compile } from 'typebox/compile'
import { transformGroup } from '../events/transform.ts'
import { IngestTaskSchema, type IngestTask, type IngestTaskResult } from './protocol.ts'

const checkTask = Compile(IngestTaskSchema)

export default function run(task: IngestTask): IngestTaskResult {
  if (!checkTask.Check(task) || !(task.bodies instanceof Uint8Array) || !(task.keep instanceof Uint8Array)) {
    throw new Error('malformed ingest task')
  }
  return transformGroup(task)
}
