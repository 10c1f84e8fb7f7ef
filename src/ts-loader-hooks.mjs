// Module hooks for ts-loader.mjs: every import in this codebase names the .ts file it means, so only
// `load` is needed.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { transform } from 'esbuild'

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context)
  const path = fileURLToPath(url)
  const source = await readFile(path, 'utf8')
  const { code } = await transform(source, {
    loader: 'ts',
    format: 'esm',
    target: `node${process.versions.node}`,
    sourcemap: 'inline',
    sourcefile: path,
  })
  return { format: 'module', source: code, shortCircuit: true }
}
