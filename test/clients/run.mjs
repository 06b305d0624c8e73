// run.mjs drives three FHIR client libraries nobody here wrote (fhirclient, @medplum/core,
// fhir-kit-client; pinned in package-lock.json) against a running ferrofed gateway, each
// through its own API, and writes what each one saw. clients_test.go starts the gateway
// and its members, runs this, and checks the files
// (docs/data-plane.md, "Third-party FHIR clients").
//
// Environment:
//   FERROFED_BASE   the gateway's base URL, without /fhir (http://127.0.0.1:PORT/gw)
//   FERROFED_TOKEN  a bearer token the data plane accepts
//   FERROFED_OUT    the folder to write into (made if missing)
//   FERROFED_TYPES  the resource types to search (default "Patient,Observation")
//   FERROFED_COUNT  the _count of each search (default 2)
//   FERROFED_MEMBER a member's id, for the 404 of the routed door (default "a")
//
// It writes, per library, into FERROFED_OUT/<library>/:
//   capability.json          the CapabilityStatement the library returned
//   bundle-<Type>-<n>.json   each searchset page the library's paging API returned
//   read-<n>.json            each resource read through an entry's fullUrl
//   outcome-<probe>.json     the OperationOutcome a library's error carried, if any
// and FERROFED_OUT/summary.json: per library its pages, entries, ids (as fullUrl and
// as Type/id), the requests it sent, its errors' status and outcome, what its
// reference resolution did and the Type/id collisions it met, and "unexpected": every
// exception it was not meant to throw. It exits 1 when any library has one.

import http from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { MedplumClient, OperationOutcomeError } from '@medplum/core';
import { Client as FhirKitClient } from 'fhir-kit-client';
import smart from 'fhirclient';

const base = (process.env.FERROFED_BASE || '').replace(/\/+$/, '');
const token = process.env.FERROFED_TOKEN || '';
const out = process.env.FERROFED_OUT || '';
const types = (process.env.FERROFED_TYPES || 'Patient,Observation').split(',').filter(Boolean);
const count = Number(process.env.FERROFED_COUNT || '2');
const member = process.env.FERROFED_MEMBER || 'a';
if (!base.startsWith('http') || !token || !out) {
  console.error('run.mjs: set FERROFED_BASE, FERROFED_TOKEN and FERROFED_OUT');
  process.exit(2);
}
const fhirBase = base + '/fhir';

// ---------------------------------------------------------------------------
// The wire: every request a library sends, with the status it got. Medplum and
// fhir-kit-client use the global fetch; fhirclient uses cross-fetch (node-fetch over
// node:http), so both are watched.

let current = null; // the summary of the library running now

function record(method, url, status) {
  if (current) current.requests.push({ method, url, status });
}

const nativeFetch = globalThis.fetch;
async function recordingFetch(input, init) {
  const url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
  const method = (init && init.method) || (typeof input === 'object' && input.method) || 'GET';
  try {
    const res = await nativeFetch(input, init);
    record(method, url, res.status);
    return res;
  } catch (err) {
    record(method, url, 0);
    throw err;
  }
}
globalThis.fetch = recordingFetch;

const nativeRequest = http.request;
http.request = function (...args) {
  const req = nativeRequest.apply(this, args);
  const opts = typeof args[0] === 'object' && !(args[0] instanceof URL) ? args[0] : {};
  const url = args[0] instanceof URL || typeof args[0] === 'string'
    ? String(args[0])
    : `${opts.protocol || 'http:'}//${opts.hostname || opts.host}${opts.port ? ':' + opts.port : ''}${opts.path || '/'}`;
  const entry = { method: opts.method || 'GET', url, status: 0 };
  if (current) current.requests.push(entry);
  req.on('response', (res) => { entry.status = res.statusCode; });
  return req;
};

// ---------------------------------------------------------------------------
// What a library saw.

function newSummary(library) {
  const pkg = JSON.parse(readFileSync(new URL(`./node_modules/${library}/package.json`, import.meta.url), 'utf8'));
  return {
    library,
    version: pkg.version,
    capability: null,
    searches: {},
    reads: [],
    errors: {},
    identity: {},
    requests: [],
    unexpected: [],
  };
}

function dirOf(s) {
  const d = path.join(out, s.library.replace(/[@/]/g, (c) => (c === '@' ? '' : '-')));
  mkdirSync(d, { recursive: true });
  return d;
}

function save(s, name, value) {
  writeFileSync(path.join(dirOf(s), name), JSON.stringify(value, null, 2));
}

function describe(err) {
  return String((err && err.stack) || err).split('\n').slice(0, 6).join('\n');
}

// expectSuccess runs step; an exception is unexpected.
async function expectSuccess(s, what, step) {
  try {
    return await step();
  } catch (err) {
    s.unexpected.push(`${what}: ${describe(err)}`);
    return undefined;
  }
}

// A search as the library returned its pages: every Bundle saved, its entries counted.
function newSearch() {
  return { pages: 0, entries: 0, matches: 0, outcomes: 0, pageMatches: [], totals: [], fullUrls: [], typeIds: [], links: [], lastHasNext: null };
}

function onPage(s, type, search, bundle, resources) {
  search.pages++;
  save(s, `bundle-${type}-${search.pages}.json`, bundle);
  search.totals.push(bundle.total ?? null);
  for (const l of bundle.link || []) search.links.push({ relation: l.relation, url: l.url });
  search.lastHasNext = (bundle.link || []).some((l) => l.relation === 'next');
  search.pageMatches.push((bundle.entry || []).filter((e) => !(e.search && e.search.mode === 'outcome')).length);
  for (const e of bundle.entry || []) {
    search.entries++;
    if (e.search && e.search.mode === 'outcome') {
      search.outcomes++;
      continue;
    }
    search.matches++;
    search.fullUrls.push(e.fullUrl);
    search.typeIds.push(`${e.resource.resourceType}/${e.resource.id}`);
    resources.push({ fullUrl: e.fullUrl, resource: e.resource });
  }
}

function routedRead(s, n, fullUrl, resource, got) {
  const r = { fullUrl, resourceType: got && got.resourceType, id: got && got.id };
  r.same = !!got && got.resourceType === resource.resourceType && got.id === resource.id;
  s.reads.push(r);
  save(s, `read-${n}.json`, got);
}

// collisions are the Type/ids the library met under more than one fullUrl.
function collisions(resources) {
  const byKey = new Map();
  for (const { fullUrl, resource } of resources) {
    const key = `${resource.resourceType}/${resource.id}`;
    if (!byKey.has(key)) byKey.set(key, new Set());
    byKey.get(key).add(fullUrl);
  }
  return [...byKey].filter(([, urls]) => urls.size > 1).map(([key, urls]) => ({ key, fullUrls: [...urls] }));
}

// memberOf is the member a gateway URL or reference names: a routed URL's
// /nodes/{member}, else a federated id's {member} (up to its first dot), "" for none
// (docs/data-plane.md, "One identity space").
function memberOf(ref) {
  const routed = /\/nodes\/([^/]+)\/fhir\//.exec(ref || '');
  if (routed) return routed[1];
  const id = /([^/]+)(\/_history\/[^/]+)?$/.exec(ref || '');
  return id && id[1].includes('.') ? id[1].split('.')[0] : '';
}

// An error probe: the request must fail; what the library made of it is recorded.
async function expectError(s, probe, url, step, view) {
  const e = { url, threw: false };
  try {
    await step();
    s.unexpected.push(`${probe}: ${url} did not fail`);
  } catch (err) {
    e.threw = true;
    e.errorType = err && err.constructor && err.constructor.name;
    Object.assign(e, view(err));
    if (e.outcome) save(s, `outcome-${probe}.json`, e.outcome);
    e.issueCodes = e.outcome ? (e.outcome.issue || []).map((i) => i.code) : [];
    if (!e.expected) s.unexpected.push(`${probe}: ${url}: ${describe(err)}`);
  }
  const last = s.requests.filter((r) => r.url === url).pop();
  e.wireStatus = last ? last.status : null;
  s.errors[probe] = e;
}

// outcomeInText finds an OperationOutcome written into an error's message (fhirclient
// appends the body's JSON, and may append a sentence after it).
function outcomeInText(text) {
  const t = String(text);
  const i = t.indexOf('{');
  for (let j = t.lastIndexOf('}'); i >= 0 && j > i; j = t.lastIndexOf('}', j - 1)) {
    try {
      const v = JSON.parse(t.slice(i, j + 1));
      return v && v.resourceType === 'OperationOutcome' ? v : null;
    } catch {
      // not yet the end of the JSON
    }
  }
  return null;
}

// The probes every library runs: a 404 the gateway answers itself (a path under /fhir
// that no route takes), a read by a federated id that names no member (404), a 404 a
// member answers through the routed door (a resource type it does not serve) and a
// request without a token (401).
function probes() {
  return [
    ['notFoundGateway', `${fhirBase}/Patient/x/y/z`],
    ['notFoundFederated', `${fhirBase}/Patient/no-such-member.1`],
    ['notFoundRouted', `${base}/nodes/${member}/fhir/Basic/no-such-id`],
  ];
}

// ---------------------------------------------------------------------------
// fhirclient (SMART's JS client): its Node entry's client(state), Client.request with
// pageLimit 0 and onPage, which follows each Bundle's next link as given.

async function runFhirclient() {
  const s = (current = newSummary('fhirclient'));
  const api = smart(undefined, undefined, new Map());
  const client = api.client({ serverUrl: fhirBase, tokenResponse: { access_token: token } });
  s.capability = await expectSuccess(s, 'metadata', async () => {
    const cs = await client.request('metadata');
    save(s, 'capability.json', cs);
    return { resourceType: cs.resourceType, fhirVersion: cs.fhirVersion, url: cs.implementation && cs.implementation.url };
  });
  const seen = [];
  for (const type of types) {
    const search = (s.searches[type] = newSearch());
    const resources = [];
    await expectSuccess(s, `search ${type}`, () =>
      client.request(`${type}?_count=${count}`, { pageLimit: 0, onPage: (b) => onPage(s, type, search, b, resources) }),
    );
    seen.push(...resources);
  }
  let n = 0;
  for (const { fullUrl, resource } of seen) {
    await expectSuccess(s, `read ${fullUrl}`, async () => routedRead(s, ++n, fullUrl, resource, await client.request(fullUrl)));
  }
  const view = (err) => ({ status: err.status, expected: err.name === 'HttpError', message: String(err.message).split('\n')[0], outcome: outcomeInText(err.message) });
  for (const [probe, url] of probes()) {
    await expectError(s, probe, url, () => client.request(url), view);
  }
  const anonymous = api.client({ serverUrl: fhirBase });
  await expectError(s, 'unauthorized', `${fhirBase}/Patient?_count=${count}`, () => anonymous.request(`Patient?_count=${count}`), view);

  // FEDERATED IDENTITY: resolveReferences on every Observation's subject, page by page.
  // fhirclient asks each reference (Patient/{member}.{id}) under {base}/fhir, and keeps
  // what it got by the reference's text (docs/data-plane.md, "One identity space").
  const res = (s.identity.resolveReferences = { paths: ['subject'], pages: 0, resolved: 0, ok: false, wrong: [] });
  const before = s.requests.length;
  try {
    await client.request(`Observation?_count=${count}`, {
      pageLimit: 0,
      graph: false,
      resolveReferences: ['subject'],
      onPage: async (bundle, refs) => {
        res.pages++;
        for (const e of bundle.entry || []) {
          const ref = e.resource && e.resource.subject && e.resource.subject.reference;
          if (!ref) continue;
          const got = await refs[ref];
          res.resolved++;
          // The subject must be that reference's resource, held by the Observation's member.
          if (!got || `${got.resourceType}/${got.id}` !== ref || memberOf(ref) !== memberOf(e.fullUrl)) {
            res.wrong.push({ from: e.fullUrl, reference: ref, got: got ? `${got.resourceType}/${got.id}` : null });
          }
        }
      },
    });
    res.ok = true;
  } catch (err) {
    res.error = { status: err.status, message: String(err.message).split('\n')[0], outcome: outcomeInText(err.message) };
  }
  res.requests = s.requests.slice(before).map((r) => `${r.status} ${r.url}`);
  s.identity.collisions = collisions(seen);
  return s;
}

// ---------------------------------------------------------------------------
// @medplum/core: MedplumClient with the gateway's base, fhirUrlPath "fhir", its
// searchResourcePages async generator (which rebuilds each next request from the next
// link's query under its own FHIR base, adding _count=1000 when the link has none).

async function runMedplum() {
  const s = (current = newSummary('@medplum/core'));
  // cacheTime: the browser default (60 s); in Node the default is 0, no cache at all,
  // and the cache is what keeps (or confuses) resources by Type/id.
  const options = { baseUrl: base + '/', fhirUrlPath: 'fhir', fetch: recordingFetch, cacheTime: 60000 };
  const medplum = new MedplumClient(options);
  medplum.setAccessToken(token);
  s.capability = await expectSuccess(s, 'metadata', async () => {
    const cs = await medplum.get(medplum.fhirUrl('metadata'));
    save(s, 'capability.json', cs);
    return { resourceType: cs.resourceType, fhirVersion: cs.fhirVersion, url: cs.implementation && cs.implementation.url };
  });
  const seen = [];
  for (const type of types) {
    const search = (s.searches[type] = newSearch());
    const resources = [];
    await expectSuccess(s, `search ${type}`, async () => {
      for await (const page of medplum.searchResourcePages(type, { _count: String(count) })) {
        onPage(s, type, search, page.bundle, resources);
      }
    });
    seen.push(...resources);
  }
  let n = 0;
  for (const { fullUrl, resource } of seen) {
    await expectSuccess(s, `read ${fullUrl}`, async () => routedRead(s, ++n, fullUrl, resource, await medplum.get(fullUrl, { cache: 'no-cache' })));
  }
  const view = (err) => ({ status: null, expected: err instanceof OperationOutcomeError, message: err.message, outcome: err.outcome || null });
  for (const [probe, url] of probes()) {
    await expectError(s, probe, url, () => medplum.get(url, { cache: 'no-cache' }), view);
  }
  const anonymous = new MedplumClient({ ...options, cacheTime: 0 });
  await expectError(s, 'unauthorized', `${fhirBase}/Patient?_count=${count}`, () => anonymous.get(`${fhirBase}/Patient?_count=${count}`), view);

  // FEDERATED IDENTITY: MedplumClient caches what it searched by {fhir base}/{Type}/{id};
  // two resources of one Type/id would be one cache entry. For each collision, which
  // fullUrl's resource the cache holds; and readReference of each Observation's subject,
  // from the cache and from the server.
  s.identity.collisions = collisions(seen).map((c) => {
    const [type, id] = c.key.split('/');
    const cached = medplum.getCached(type, id);
    const held = seen.find((r) => r.resource === cached || JSON.stringify(r.resource) === JSON.stringify(cached));
    return { ...c, cacheHolds: held ? held.fullUrl : null };
  });
  const refs = (s.identity.readReference = []);
  for (const { fullUrl, resource } of seen.filter((r) => r.resource.subject && r.resource.subject.reference)) {
    const ref = { from: fullUrl, reference: resource.subject.reference };
    const cached = medplum.getCachedReference(resource.subject);
    ref.cachedId = cached ? cached.id : null;
    const held = cached && seen.find((r) => JSON.stringify(r.resource) === JSON.stringify(cached));
    ref.cachedFrom = held ? held.fullUrl : null;
    ref.cachedSameMember = cached ? memberOf(held ? held.fullUrl : `${cached.resourceType}/${cached.id}`) === memberOf(fullUrl) : null;
    try {
      const got = await medplum.readReference(resource.subject, { cache: 'no-cache' });
      ref.server = { ok: true, id: got.id, sameMember: memberOf(`${got.resourceType}/${got.id}`) === memberOf(fullUrl) };
    } catch (err) {
      ref.server = { ok: false, message: err.message, issueCodes: ((err.outcome && err.outcome.issue) || []).map((i) => i.code) };
    }
    refs.push(ref);
  }
  return s;
}

// ---------------------------------------------------------------------------
// fhir-kit-client: Client({baseUrl, customHeaders}), search, then nextPage({bundle})
// until it returns undefined; it GETs each next link as given.

async function runFhirKit() {
  const s = (current = newSummary('fhir-kit-client'));
  const headers = { Authorization: `Bearer ${token}` };
  const client = new FhirKitClient({ baseUrl: fhirBase, customHeaders: headers });
  s.capability = await expectSuccess(s, 'metadata', async () => {
    const cs = await client.capabilityStatement();
    save(s, 'capability.json', cs);
    return { resourceType: cs.resourceType, fhirVersion: cs.fhirVersion, url: cs.implementation && cs.implementation.url };
  });
  const seen = [];
  const bundles = [];
  for (const type of types) {
    const search = (s.searches[type] = newSearch());
    const resources = [];
    await expectSuccess(s, `search ${type}`, async () => {
      let bundle = await client.search({ resourceType: type, searchParams: { _count: count } });
      while (bundle) {
        onPage(s, type, search, bundle, resources);
        bundles.push(bundle);
        bundle = await client.nextPage({ bundle });
      }
    });
    seen.push(...resources);
  }
  let n = 0;
  for (const { fullUrl, resource } of seen) {
    await expectSuccess(s, `read ${fullUrl}`, async () => routedRead(s, ++n, fullUrl, resource, await client.request(fullUrl)));
  }
  const view = (err) => ({
    status: err.response ? err.response.status : null,
    expected: !!err.response,
    message: err.message,
    outcome: err.response && err.response.data && err.response.data.resourceType === 'OperationOutcome' ? err.response.data : null,
  });
  for (const [probe, url] of probes()) {
    await expectError(s, probe, url, () => client.request(url), view);
  }
  const anonymous = new FhirKitClient({ baseUrl: fhirBase });
  await expectError(s, 'unauthorized', `${fhirBase}/Patient?_count=${count}`, () => anonymous.search({ resourceType: 'Patient', searchParams: { _count: count } }), view);

  // FEDERATED IDENTITY: resolve() of each Observation's subject, with the page it came
  // in as context (fhir-kit-client looks the reference up among the page's fullUrls by
  // suffix, then asks the server), and of one fullUrl as an absolute reference (a base
  // other than the client's is another server to it: it reads it with a new Client,
  // without this one's headers).
  const refs = (s.identity.resolve = []);
  for (const bundle of bundles) {
    for (const e of bundle.entry || []) {
      const ref = e.resource && e.resource.subject && e.resource.subject.reference;
      if (!ref) continue;
      const r = { from: e.fullUrl, reference: ref };
      try {
        const got = await client.resolve({ reference: ref, context: bundle });
        const inPage = (bundle.entry || []).find((x) => x.resource === got);
        r.ok = true;
        r.resolvedTo = inPage ? inPage.fullUrl : `${got.resourceType}/${got.id} (asked)`;
        r.same = `${got.resourceType}/${got.id}` === ref && memberOf(ref) === memberOf(e.fullUrl);
      } catch (err) {
        r.ok = false;
        r.status = err.response ? err.response.status : null;
        r.issueCodes = ((err.response && err.response.data && err.response.data.issue) || []).map((i) => i.code);
      }
      refs.push(r);
    }
  }
  if (seen[0]) {
    const abs = (s.identity.resolveAbsolute = { reference: seen[0].fullUrl });
    try {
      const got = await client.resolve({ reference: seen[0].fullUrl });
      abs.ok = true;
      abs.id = got.id;
    } catch (err) {
      abs.ok = false;
      abs.status = err.response ? err.response.status : null;
    }
  }
  s.identity.collisions = collisions(seen);
  return s;
}

// ---------------------------------------------------------------------------

const summary = { base, fhirBase, types, count, libraries: [] };
for (const run of [runFhirclient, runMedplum, runFhirKit]) {
  let s;
  try {
    s = await run();
  } catch (err) {
    s = current || { library: run.name, unexpected: [] };
    s.unexpected.push(`uncaught: ${describe(err)}`);
  }
  summary.libraries.push(s);
  current = null;
}
mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, 'summary.json'), JSON.stringify(summary, null, 2));
let failed = false;
for (const s of summary.libraries) {
  const line = Object.entries(s.searches || {}).map(([t, x]) => `${t}: ${x.pages} pages, ${x.matches} matches`).join('; ');
  console.log(`${s.library}@${s.version}: ${line}; ${s.reads ? s.reads.length : 0} reads; ${s.unexpected.length} unexpected`);
  for (const u of s.unexpected) {
    console.error(`  unexpected: ${u}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
