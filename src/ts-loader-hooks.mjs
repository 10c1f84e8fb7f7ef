// Module hooks for ts-loader.mjs: every import in this codebase names the .ts file it means, so only
// `load` is needed. The stripped code is cached on disk by the source's hash (node_modules/.cache, which
// `rm -rf` empties; an edited file adds an entry): each process and worker thread otherwise paid esbuild
// for every file again, ~0.4 s of each start, ~6 % of the test suite's time on 2 cores (session 17).
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { transform, version as esbuildVersion } from 'esbuild'

const cacheDir = fileURLToPath(new URL('../node_modules/.cache/respin-ts/', import.meta.url))
let cacheUsable = true
try {
  mkdirSync(cacheDir, { recursive: true })
} catch {
  cacheUsable = false // a read-only install: strip every time
}

// The options are in the cache key with the versions: changing any of them strips every file again.
const OPTIONS = { loader: 'ts', format: 'esm', target: `node${process.versions.node}`, sourcemap: 'inline' }
const KEY_PREFIX = `${esbuildVersion}\0${JSON.stringify(OPTIONS)}\0`

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context)
  const path = fileURLToPath(url)
  const source = await readFile(path, 'utf8')
  // The path is in the key: the inline source map names it.
  const key = createHash('sha256').update(`${KEY_PREFIX}${path}\0`).update(source).digest('hex')
  const cached = cacheUsable ? readCached(key) : undefined
  if (cached !== undefined) return { format: 'module', source: cached, shortCircuit: true }
  const { code } = await transform(source, { ...OPTIONS, sourcefile: path })
  if (cacheUsable) writeCached(key, code)
  return { format: 'module', source: code, shortCircuit: true }
}

function readCached(key) {
  try {
    return readFileSync(cacheDir + key, 'utf8')
  } catch {
    return undefined
  }
}

// Written under a name of its own, then renamed: a process reading it never sees half a file.
function writeCached(key, code) {
  try {
    const tmp = `${cacheDir}${key}.${process.pid}.${Math.random().toString(36).slice(2)}`
    writeFileSync(tmp, code)
    renameSync(tmp, cacheDir + key)
  } catch {
    cacheUsable = false
  }
}
