// The console's loop: ask the manager the same queries the CLI asks, render, wait, again.
// No reload: each round replaces the data and lit-html updates only what changed, so an
// open cluster stays open and the page keeps its scroll position.

import { render } from 'lit-html';
import { EmitRefused, query } from './api.js';
import { readFragment } from './format.js';
import { consoleView, loginView } from './views.js';

const TOKEN_KEY = 'kcm.console.token';
const JOBS_LISTED = 30;
const root = document.getElementById('console');
root.replaceChildren(); // the static "Loading" line: lit-html renders after what it did not put there

const fragment = readFragment(location.hash);
if (fragment.token) {
  sessionStorage.setItem(TOKEN_KEY, fragment.token);
  // Out of the address bar and the history at once: a token must not be bookmarked or shared.
  history.replaceState(null, '', `${location.pathname}${location.search}${fragment.rest ? `#${fragment.rest}` : ''}`);
}

const empty = () => ({ value: null, error: '' });
const model = {
  refreshMs: fragment.refreshMs,
  refreshes: 0,
  refreshedAt: null,
  tookMs: 0,
  notice: '',
  group: empty(),
  machines: empty(),
  clusters: empty(),
  jobs: empty(),
  /** get_cluster_detail of each open cluster, by cluster id: { value, error }. */
  details: new Map(),
  /** Cluster ids whose detail is shown (and queried each round). */
  open: new Set(),
};
let round = 0; // a sign-out or a new token starts a new series of rounds; the old one stops

const actions = {
  signOut: () => signOut(''),
  toggleCluster(clusterId, isOpen) {
    if (isOpen === model.open.has(clusterId)) return;
    if (isOpen) model.open.add(clusterId);
    else model.open.delete(clusterId);
    show();
    if (isOpen) void refreshDetail(clusterId, sessionStorage.getItem(TOKEN_KEY) ?? '').then(show);
  },
};

function show() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  render(token ? consoleView(model, actions) : loginView(model.notice, signIn), root);
}

function signIn(token) {
  const trimmed = String(token ?? '').trim();
  if (!trimmed) return;
  sessionStorage.setItem(TOKEN_KEY, trimmed);
  model.notice = '';
  start();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  round += 1;
  Object.assign(model, { notice: message, group: empty(), machines: empty(), clusters: empty(), jobs: empty(), refreshedAt: null });
  model.details.clear();
  show();
}

/** Stores a query's answer or its failure in a panel; a 401 ends the session visibly. */
async function fill(panel, jobType, paras, token) {
  try {
    panel.value = await query(jobType, paras, token);
    panel.error = '';
  } catch (err) {
    if (err instanceof EmitRefused && err.httpStatus === 401) throw err;
    // The last good answer stays on screen beside the reason it could not be refreshed.
    panel.error = err instanceof EmitRefused ? err.message : `${jobType}: the manager did not answer (${err.message})`;
  }
}

async function refreshDetail(clusterId, token) {
  const panel = model.details.get(clusterId) ?? empty();
  model.details.set(clusterId, panel);
  await fill(panel, 'get_cluster_detail', { cluster_id: clusterId }, token);
}

async function refresh(token) {
  const started = performance.now();
  await Promise.all([
    fill(model.group, 'get_meta_mode', {}, token),
    fill(model.machines, 'get_machine_summary', {}, token),
    fill(model.clusters, 'get_cluster_summary', {}, token),
    fill(model.jobs, 'list_jobs', { limit: String(JOBS_LISTED) }, token),
  ]);
  const present = new Set((model.clusters.value?.list_cluster ?? []).map((c) => c.cluster_id));
  for (const id of [...model.details.keys()]) if (!present.has(id)) model.details.delete(id);
  await Promise.all([...model.open].filter((id) => present.has(id)).map((id) => refreshDetail(id, token)));
  model.tookMs = Math.round(performance.now() - started);
  model.refreshedAt = new Date();
  model.refreshes += 1;
}

async function start() {
  const mine = ++round;
  show();
  while (mine === round) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) return;
    try {
      await refresh(token);
    } catch (err) {
      if (mine === round) signOut(err.message);
      return;
    }
    if (mine !== round) return;
    show();
    await new Promise((resolve) => setTimeout(resolve, model.refreshMs));
  }
}

if (sessionStorage.getItem(TOKEN_KEY)) void start();
else show();
