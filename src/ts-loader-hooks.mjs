// Module hooks for ts-loader.mjs. `load` strips the types of .ts files (every import in this codebase
// names the .ts file it means, so our own files need no resolving). The stripped code is cached on disk by
// the source's hash (node_modules/.cache, which `rm -rf` empties; an edited file adds an entry): each
// process and worker thread otherwise paid esbuild for every file again, ~0.4 s of each start, ~6 % of
// the test suite's time on 2 cores (session 17). `resolve` is only for TypeBox (below).
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

// esbuild itself is loaded only when a file is not in the cache: loading it was ~100 of the ~200 ms of CPU
// that registering these hooks cost every process and worker thread. Its version, for the cache keys, comes
// from its package.json (the string its own `version` export holds), or from the module where that file
// cannot be resolved.
const require = createRequire(import.meta.url)
let esbuildModule
const esbuild = () => (esbuildModule ??= require('esbuild'))
const esbuildVersion = (() => {
  try {
    return JSON.parse(readFileSync(require.resolve('esbuild/package.json'), 'utf8')).version
  } catch {
    return esbuild().version
  }
})()

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
  const { code } = await esbuild().transform(source, { ...OPTIONS, sourcefile: path })
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

// `resolve` sends `typebox` and its subpaths to one bundle of the package (a few chunks, built once per
// TypeBox and esbuild version into the same cache). TypeBox ships 683 small ES modules; with hooks
// registered, Node hands every module's load to the hooks thread and back, and importing them took
// ~1.3 s of each process's start (0.8 s without hooks), more than the rest of the app together. The
// bundle has one entry per export of the package and shares its code between them (splitting), so every
// subpath sees the same classes and symbols, as with the package's own files.
const typebox = cacheUsable ? bundleTypebox() : undefined

export async function resolve(specifier, context, nextResolve) {
  if (typebox && (specifier === 'typebox' || specifier.startsWith('typebox/'))) {
    const url = typebox.get(specifier)
    if (url) return { url, format: 'module', shortCircuit: true }
  }
  return nextResolve(specifier, context)
}

/** Specifier → the bundle's entry file URL; undefined (the package's own files) if it cannot be built. */
function bundleTypebox() {
  try {
    const pkgDir = fileURLToPath(new URL('../node_modules/typebox/', import.meta.url))
    const pkg = JSON.parse(readFileSync(`${pkgDir}package.json`, 'utf8'))
    const entries = {}
    for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
      const file = typeof target === 'string' ? target : target.import ?? target.default
      if (typeof file !== 'string') continue
      entries[subpath === '.' ? 'typebox' : `typebox/${subpath.slice(2)}`] = pkgDir + file
    }
    const names = Object.keys(entries)
    const entryName = (specifier) => specifier.replace('/', '__')
    const options = { bundle: true, splitting: true, format: 'esm', platform: 'node', target: OPTIONS.target }
    const key = createHash('sha256').update(`${esbuildVersion}\0${pkg.version}\0${JSON.stringify(options)}\0${JSON.stringify(entries)}`).digest('hex').slice(0, 16)
    const dir = `${cacheDir}typebox-${key}/`
    if (!existsSync(dir)) {
      // Built under a name of its own, then renamed: a concurrent process uses either bundle, whole.
      const tmp = `${cacheDir}typebox-${key}.${process.pid}.${Math.random().toString(36).slice(2)}`
      esbuild().buildSync({ ...options, entryPoints: Object.fromEntries(names.map((n) => [entryName(n), entries[n]])), outdir: tmp, outExtension: { '.js': '.mjs' }, logLevel: 'silent' })
      try {
        renameSync(tmp, dir)
      } catch {
        rmSync(tmp, { recursive: true, force: true })
      }
    }
    return new Map(names.map((n) => [n, new URL(`file://${dir}${entryName(n)}.mjs`).href]))
  } catch {
    return undefined
  }
}
