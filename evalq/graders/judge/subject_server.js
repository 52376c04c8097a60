'use strict';
// The Node subject: requires and calls the agent's modules for the judge, answers as data.
// Same wire format as subject_server.py (codec.py): JSON lines, tagged values, handles.
// Usage: node subject_server.js CHANNEL WORKSPACE (CHANNEL: fd:N or unix:PATH)
const net = require('node:net');
const path = require('node:path');
const childProcess = require('node:child_process');
const { createRequire } = require('node:module');

const [spec, workspace] = [process.argv[2], process.argv[3]];
const objects = new Map();
const requireFromWorkspace = createRequire(path.join(workspace, 'package.json'));
process.chdir(workspace);

function handle(obj) {
  objects.set(objects.size + 1, obj);
  return objects.size;
}

function isPlain(value) {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function encode(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : { $num: String(value) };
  if (Array.isArray(value)) return value.map(encode);
  if (Buffer.isBuffer(value)) return { $b: value.toString('base64') };
  if (typeof value === 'object' && isPlain(value)) {
    return { $d: Object.entries(value).map(([k, v]) => [k, encode(v)]) };
  }
  return { $h: handle(value), type: (value && value.constructor && value.constructor.name) || typeof value };
}

function decode(data) {
  if (Array.isArray(data)) return data.map(decode);
  if (data === null || typeof data !== 'object') return data;
  if ('$h' in data) return objects.get(data.$h);
  const [[tag, body]] = Object.entries(data);
  if (tag === '$t' || tag === '$s') return body.map(decode);
  if (tag === '$d') return Object.fromEntries(body.map(([k, v]) => [decode(k), decode(v)]));
  if (tag === '$b') return Buffer.from(body, 'base64');
  if (tag === '$p') return body;
  if (tag === '$dt' || tag === '$date') return new Date(body);
  throw new Error(`unknown tag ${tag}`);
}

const BUILTINS = {
  len: (o) => (o.length !== undefined ? o.length : o.size),
  list: (o) => Array.from(o),
  iter_list: (o) => Array.from(o),
  str: (o) => String(o),
  repr: (o) => String(o),
  bool: (o) => Boolean(o),
  type_name: (o) => (o && o.constructor ? o.constructor.name : typeof o),
};

class HandleOnly {
  constructor(obj) { this.obj = obj; }
}

function run(request) {
  const done = childProcess.spawnSync(request.argv[0], request.argv.slice(1), {
    input: request.stdin == null ? undefined : request.stdin,
    timeout: request.timeout ? request.timeout * 1000 : undefined,
    cwd: request.cwd || undefined, encoding: 'utf8',
  });
  if (done.error && done.error.code === 'ETIMEDOUT') {
    throw Object.assign(new Error(`${request.argv[0]} ran over ${request.timeout}s`), { name: 'TimeoutError' });
  }
  if (done.error) throw done.error;
  return { exit_code: done.status, stdout: done.stdout, stderr: done.stderr };
}

function perform(request) {
  const op = request.op;
  if (op === 'import') {
    const name = request.module;
    return new HandleOnly(requireFromWorkspace(name));  // a module is used, never copied
  }
  if (op === 'run') return run(request);
  const target = objects.get(request.target);
  if (op === 'getattr') {
    const value = target[request.name];
    return typeof value === 'function' ? value.bind(target) : value;
  }
  if (op === 'ref') return new HandleOnly(target[request.name]);
  if (op === 'setattr') { target[request.name] = decode(request.value); return null; }
  const args = decode(request.args || []);
  const kwargs = Object.entries(request.kwargs || {});
  if (kwargs.length) args.push(Object.fromEntries(kwargs.map(([k, v]) => [k, decode(v)])));
  if (op === 'call') return target(...args);
  if (op === 'callattr') return target[request.name](...args);
  if (op === 'builtin') return BUILTINS[request.name](target);
  throw new Error(`unknown operation ${op}`);
}

function errorNames(err) {
  const names = [];
  for (let proto = Object.getPrototypeOf(err); proto && proto.constructor; proto = Object.getPrototypeOf(proto)) {
    names.push(proto.constructor.name);
    if (proto.constructor === Object) break;
  }
  return names;
}

const channel = spec.startsWith('fd:')
  ? new net.Socket({ fd: Number(spec.slice(3)), readable: true, writable: true })
  : net.connect(spec.slice('unix:'.length));
let buffer = '';

function answer(line) {
  const request = JSON.parse(line);
  let out = '';
  let err = '';
  const saved = [process.stdout.write, process.stderr.write];
  process.stdout.write = (chunk) => { out += String(chunk); return true; };
  process.stderr.write = (chunk) => { err += String(chunk); return true; };
  let reply;
  try {
    const result = perform(request);
    reply = result instanceof HandleOnly
      ? { ok: { $h: handle(result.obj), type: typeof result.obj } } : { ok: encode(result) };
  } catch (e) {
    const isError = e instanceof Error;
    reply = { error: { type: isError ? e.name : typeof e, message: isError ? e.message : String(e),
                       mro: isError ? [e.name, ...errorNames(e)] : ['Error'] } };
  } finally {
    [process.stdout.write, process.stderr.write] = saved;
  }
  Object.assign(reply, { id: request.id, out, err });
  channel.write(JSON.stringify(reply) + '\n');
}

channel.setEncoding('utf8');
channel.on('data', (chunk) => {
  buffer += chunk;
  let at;
  while ((at = buffer.indexOf('\n')) >= 0) {
    const line = buffer.slice(0, at);
    buffer = buffer.slice(at + 1);
    answer(line);
  }
});
channel.on('end', () => process.exit(0));
channel.on('error', () => process.exit(1));
channel.write(JSON.stringify({ hello: 'evalq-subject/1', pid: process.pid }) + '\n');
