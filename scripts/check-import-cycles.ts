// Fails when files under the given folders (default: services/) import each other in a
// circle, type-only imports included: a circle is two modules that cannot be understood,
// tested or moved apart, whatever the runtime makes of it. Prints every circle with the
// imports that close it.
//
//   npx tsx scripts/check-import-cycles.ts [folder ...]
//
// Only relative imports are followed (a package import leaves its package, and the
// packages' own layering is checked by their dependencies).

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"`;]*?from\s+['"](\.[^'"]+)['"]|(?:^|\n)\s*import\s+['"](\.[^'"]+)['"]/g;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'test' || name.startsWith('.')) continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts') && !name.endsWith('.test.ts')) out.push(full);
  }
  return out;
}

function resolveImport(from: string, spec: string): string | null {
  const base = path.resolve(path.dirname(from), spec.replace(/\.js$/, ''));
  for (const candidate of [`${base}.ts`, path.join(base, 'index.ts')]) if (existsSync(candidate)) return candidate;
  return null;
}

/** The imports of each file, as edges between files of the set. */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const targets = new Set<string>();
    for (const m of text.matchAll(IMPORT)) {
      const target = resolveImport(file, m[1] ?? m[2]);
      if (target && known.has(target) && target !== file) targets.add(target);
    }
    graph.set(file, [...targets]);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan), each sorted. */
export function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    indexOf.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indexOf.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indexOf.get(w)!));
    }
    if (low.get(v) === indexOf.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indexOf.has(v)) visit(v);
  return found;
}

function main(): void {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
  const folders = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['services'];
  const files = folders.flatMap((f) => sourceFiles(path.resolve(root, f)));
  const graph = importGraph(files);
  const found = circles(graph);
  const rel = (f: string) => path.relative(root, f);
  for (const [i, c] of found.entries()) {
    console.log(`circle ${i + 1}: ${c.map(rel).join(', ')}`);
    const members = new Set(c);
    for (const f of c) for (const t of graph.get(f) ?? []) if (members.has(t)) console.log(`  ${rel(f)} -> ${rel(t)}`);
  }
  console.log(`${files.length} files under ${folders.join(', ')}: ${found.length} import circle(s)`);
  if (found.length > 0) process.exitCode = 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) main();
