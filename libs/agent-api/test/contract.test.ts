// The TypeScript shapes in src/contract/ against the agent .proto files, as proto-loader
// reads them: every exported interface named like a message must have exactly the
// message's fields, each of the same kind (string, number, boolean, bytes, repeated, map,
// or a message checked the same way, inline or by name). A field added, removed, renamed or
// retyped on one side only fails here.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { AGENT_PROTO_FILES, AGENT_PROTO_OPTIONS, agentProtoPath } from '@kcm/agent-api';

interface FieldDescriptor {
  name: string;
  label: string;
  type: string;
  typeName: string;
}
interface MessageDescriptor {
  name: string;
  field: FieldDescriptor[];
  nestedType: MessageDescriptor[];
  options: { mapEntry?: boolean } | null;
}

const SCALAR_KIND = new Map<string, string>([
  ['TYPE_STRING', 'string'],
  ['TYPE_BOOL', 'boolean'],
  ['TYPE_BYTES', 'bytes'],
  ['TYPE_ENUM', 'string'], // enums: String
  ...['INT32', 'UINT32', 'SINT32', 'INT64', 'UINT64', 'SINT64', 'FIXED32', 'FIXED64', 'SFIXED32', 'SFIXED64', 'DOUBLE', 'FLOAT'].map((t): [string, string] => [`TYPE_${t}`, 'number']), // longs: Number
]);

/** Every message of the agent protos, by full name without the leading dot. */
function protoMessages(): Map<string, MessageDescriptor> {
  const messages = new Map<string, MessageDescriptor>();
  for (const file of AGENT_PROTO_FILES) {
    const definition = protoLoader.loadSync(agentProtoPath(file), AGENT_PROTO_OPTIONS);
    for (const [name, entry] of Object.entries(definition)) {
      if ('format' in entry && entry.format === 'Protocol Buffer 3 DescriptorProto') messages.set(name, entry.type as MessageDescriptor);
    }
  }
  return messages;
}

/** A field's kind as a string both sides can produce, e.g. `repeated message<kcm.agent.DirSpace>`. */
type Shape = string | { message: string; fields: Map<string, Shape> };

function protoShape(messages: Map<string, MessageDescriptor>, msg: MessageDescriptor, fullName: string): Map<string, Shape> {
  const fields = new Map<string, Shape>();
  for (const f of msg.field) {
    // proto-loader names a field's message relative to the field's scope: nested first, then the package.
    const inner = f.type === 'TYPE_MESSAGE' ? msg.nestedType.find((n) => n.name === f.typeName) : undefined;
    const nestedName = inner ? `${fullName}.${f.typeName}` : `${fullName.slice(0, fullName.lastIndexOf('.'))}.${f.typeName.replace(/^\./, '')}`;
    const nested = f.type === 'TYPE_MESSAGE' ? (inner ?? messages.get(nestedName)) : undefined;
    if (f.type === 'TYPE_MESSAGE' && !nested) throw new Error(`field ${f.name}: message ${f.typeName} not found`);
    let shape: Shape;
    if (nested?.options?.mapEntry) shape = `map<${kindOfField(nested.field[0])},${kindOfField(nested.field[1])}>`;
    else if (nested) shape = { message: nestedName, fields: protoShape(messages, nested, nestedName) };
    else shape = kindOfField(f);
    fields.set(f.name, f.label === 'LABEL_REPEATED' && !nested?.options?.mapEntry ? repeated(shape) : shape);
  }
  return fields;
}

function kindOfField(f: FieldDescriptor): string {
  const kind = SCALAR_KIND.get(f.type);
  if (!kind) throw new Error(`field ${f.name}: no kind for ${f.type}`);
  return kind;
}

const repeated = (shape: Shape): Shape => (typeof shape === 'string' ? `repeated ${shape}` : { message: `repeated ${shape.message}`, fields: shape.fields });

const contractDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '../src/contract');
const contractFiles = ['agent.ts', 'mariadb.ts', 'postgres.ts', 'cgroup.ts', 'mariadb-ha.ts', 'storage.ts', 'mariadb-restore.ts', 'mariadb-logical.ts', 'mariadb-tables.ts', 'table-move.ts', 'shard-data.ts', 'passwords.ts', 'host-probe.ts', 'shard-routing.ts'].map((f) => path.join(contractDir, f));

/** The exported interfaces of src/contract/, by name, with the checker that reads them. */
function contractInterfaces() {
  const program = ts.createProgram(contractFiles, { strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, types: ['node'] });
  const checker = program.getTypeChecker();
  const interfaces = new Map<string, ts.Type>();
  for (const file of contractFiles) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`cannot read ${file}`);
    ts.forEachChild(source, (node) => {
      if (ts.isInterfaceDeclaration(node)) interfaces.set(node.name.text, checker.getTypeAtLocation(node));
    });
  }
  return { checker, interfaces };
}

function tsShape(checker: ts.TypeChecker, type: ts.Type, protoName: (iface: string) => string): Shape {
  const t = checker.getNonNullableType(type);
  if (t.flags & ts.TypeFlags.StringLike || (t.isUnion() && t.types.every((u) => u.flags & ts.TypeFlags.StringLike))) return 'string';
  if (t.flags & ts.TypeFlags.NumberLike) return 'number';
  if (t.flags & ts.TypeFlags.BooleanLike) return 'boolean';
  if (t.getSymbol()?.name === 'Buffer' || t.getSymbol()?.name === 'Uint8Array') return 'bytes';
  if (checker.isArrayType(t)) return repeated(tsShape(checker, checker.getTypeArguments(t as ts.TypeReference)[0], protoName));
  const index = checker.getIndexInfoOfType(t, ts.IndexKind.String);
  if (index && t.getProperties().length === 0) return `map<string,${tsShape(checker, index.type, protoName)}>`;
  const symbol = t.getSymbol() ?? t.aliasSymbol;
  const named = symbol && symbol.name !== '__type' && symbol.name !== '__object' ? protoName(symbol.name) : '';
  return { message: named, fields: tsFields(checker, t, protoName) };
}

function tsFields(checker: ts.TypeChecker, type: ts.Type, protoName: (iface: string) => string): Map<string, Shape> {
  const fields = new Map<string, Shape>();
  for (const p of type.getProperties()) fields.set(p.name, tsShape(checker, checker.getTypeOfSymbol(p), protoName));
  return fields;
}

describe('the TypeScript contract against the agent protos', () => {
  const messages = protoMessages();
  const { checker, interfaces } = contractInterfaces();
  const fullNameOf = (iface: string) => `kcm.agent.${iface}`;
  const checked = [...interfaces.keys()].filter((name) => messages.has(fullNameOf(name)));

  it('states most messages of the protos as TypeScript interfaces', () => {
    // Every request and reply of a service, and the messages they carry by name.
    expect(checked.length).toBeGreaterThanOrEqual(30);
    expect(checked).toEqual(expect.arrayContaining(['MariaDbInstallRequest', 'MariaDbProbeReply', 'SyncCatalogReply', 'CpuLimitReply', 'HostFactsReply']));
  });

  it.each([...interfaces.keys()].filter((name) => messages.has(`kcm.agent.${name}`)))('%s has the fields of its message, each of the same kind', (name) => {
    const proto = protoShape(messages, messages.get(fullNameOf(name))!, fullNameOf(name));
    const typed = tsFields(checker, interfaces.get(name)!, (iface) => (messages.has(fullNameOf(iface)) ? fullNameOf(iface) : iface));
    // Nested messages are compared field by field; a named TS interface must also name the same message.
    const strip = (fields: Map<string, Shape>): unknown => Object.fromEntries([...fields].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, typeof v === 'string' ? v : { repeated: v.message.startsWith('repeated '), fields: strip(v.fields) }]));
    expect(strip(typed)).toEqual(strip(proto));
    for (const [field, shape] of typed) {
      if (typeof shape === 'string' || !shape.message.replace('repeated ', '')) continue; // an inline object literal
      const protoField = proto.get(field);
      expect(typeof protoField === 'object' ? protoField.message.replace('repeated ', '') : protoField, `${name}.${field}`).toBe(shape.message.replace('repeated ', ''));
    }
  });

  it('fails on drift: a field missing from a TS shape is seen', () => {
    const proto = protoShape(messages, messages.get('kcm.agent.HealthReply')!, 'kcm.agent.HealthReply');
    const typed = tsFields(checker, interfaces.get('HealthReply')!, fullNameOf);
    typed.delete('pid');
    expect([...typed.keys()].sort()).not.toEqual([...proto.keys()].sort());
  });
});
