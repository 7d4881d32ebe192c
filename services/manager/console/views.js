// The console's templates. lit-html puts every interpolated value into the page as text
// (or as an attribute value), never as markup: a cluster named `<img onerror=...>` shows
// those characters. Nothing here builds HTML from strings.

import { html, nothing } from 'lit-html';
import { buildText, formatElapsed, jobFraction, jobProgressText, statusTone } from './format.js';

const badge = (status) => html`<span class="badge ${statusTone(status)}" data-status=${status}>${status}</span>`;
const failure = (text) => (text ? html`<p class="error" role="alert">${text}</p>` : nothing);

export function loginView(message, onSubmit) {
  const submit = (event) => {
    event.preventDefault();
    onSubmit(new FormData(event.target).get('token'));
  };
  return html`
    <section class="login">
      <h1>kcm console</h1>
      ${failure(message)}
      <form @submit=${submit}>
        <label for="token">Emit token (a viewer token is enough)</label>
        <input id="token" name="token" type="password" autocomplete="off" required>
        <button type="submit">Open</button>
      </form>
      <p class="muted">The token stays in this tab (sessionStorage) and is sent only as an Authorization header.
        <code>kcm local up</code> prints a link that carries it in the URL fragment.</p>
    </section>`;
}

export function consoleView(model, actions) {
  return html`
    <header>
      <h1>kcm console</h1>
      <span class="muted" data-refreshed=${model.refreshes}>${refreshLine(model)}</span>
      <button @click=${actions.signOut}>Sign out</button>
    </header>
    ${failure(model.notice)}
    <div class="grid">
      ${groupView(model.group)}
      ${machinesView(model.machines)}
    </div>
    ${clustersView(model.clusters, model.details, model.open, actions.toggleCluster)}
    ${jobsView(model.jobs)}
    ${footerView(model.group.value)}`;
}

/** The build of the member that answers this console (a rolling upgrade shows each member's in the group table). */
function footerView(group) {
  if (!group) return nothing;
  const answering = (group.list_member ?? []).find((m) => m.member === group.answered_by);
  return html`<footer class="muted">served by ${group.answered_by ?? 'this member'} · <span data-build>${buildText(answering)}</span></footer>`;
}

function refreshLine(model) {
  if (model.refreshedAt === null) return 'loading…';
  return `refreshed ${model.refreshedAt.toLocaleTimeString()} in ${model.tookMs} ms, every ${model.refreshMs / 1000} s`;
}

/** A panel's data is { value, error }: the last answer, or why the last query failed. */
function groupView({ value, error }) {
  return html`
    <section id="group">
      <h2>Manager group</h2>
      ${failure(error)}
      ${value
        ? html`
            <p>mode <b>${value.mode}</b> · term <b data-term>${value.term ?? ''}</b> · leader <b data-leader>${value.leader ?? 'none'}</b>
              <span class="muted">(as seen by ${value.answered_by ?? 'this member'})</span></p>
            <table>
              <thead><tr><th>member</th><th>role</th><th>log match</th><th>replication</th><th>build</th></tr></thead>
              <tbody>
                ${(value.list_member ?? []).map(
                  (m) => html`<tr data-member=${m.member}><td>${m.member}</td><td>${badge(m.role)}</td><td>${m.match}</td><td>${m.replication ? badge(m.replication) : ''}</td><td>${buildText(m)}</td></tr>`,
                )}
              </tbody>
            </table>`
        : nothing}
    </section>`;
}

function machinesView({ value, error }) {
  const machines = value?.list_machine ?? [];
  return html`
    <section id="machines">
      <h2>Machines <span class="muted">${machines.length}</span></h2>
      ${failure(error)}
      <table>
        <thead><tr><th>host</th><th>status</th><th>agent</th><th>in service</th><th>types</th></tr></thead>
        <tbody>
          ${machines.map(
            (m) => html`<tr data-machine=${m.hostaddr}>
              <td>${m.hostaddr}</td><td>${badge(m.status)}</td><td>${badge(m.agent)}</td><td>${m.node_stats}</td><td>${(m.machine_types ?? []).join(', ')}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </section>`;
}

function clustersView({ value, error }, details, open, toggle) {
  const clusters = value?.list_cluster ?? [];
  return html`
    <section id="clusters">
      <h2>Clusters <span class="muted">${clusters.length}</span></h2>
      ${failure(error)}
      ${clusters.length === 0 && !error ? html`<p class="muted">No cluster yet.</p>` : nothing}
      ${clusters.map(
        (c) => html`
          <details class="cluster" data-cluster=${c.cluster_name} ?open=${open.has(c.cluster_id)} @toggle=${(e) => toggle(c.cluster_id, e.target.open)}>
            <summary>
              <b>${c.nick_name}</b> <code>${c.cluster_name}</code> ${badge(c.status)}
              <span class="muted">id ${c.cluster_id} · ${c.shards} shards · ${c.comps} compute · nodes online ${c.nodes_online} · compute online ${c.comps_online}</span>
            </summary>
            ${open.has(c.cluster_id) ? clusterDetailView(details.get(c.cluster_id)) : nothing}
          </details>`,
      )}
    </section>`;
}

function clusterDetailView(detail) {
  if (!detail) return html`<p class="muted">loading…</p>`;
  if (detail.error) return failure(detail.error);
  const d = detail.value;
  return html`
    <div class="detail">
      ${d.list_shard.map(
        (s) => html`
          <h3 data-shard=${s.shard_name}>${s.shard_name} <span class="muted">id ${s.shard_id} · ${s.nodes} nodes${s.noswitch_until ? ` · no automatic failover until ${s.noswitch_until}` : ''}</span></h3>
          <table>
            <thead><tr><th>node</th><th>address</th><th>role</th><th>status</th><th>replicates from</th><th>restarts</th><th>note</th></tr></thead>
            <tbody>
              ${s.list_node.map(
                (n) => html`<tr data-node=${`${n.hostaddr}:${n.port}`}>
                  <td>${n.node_id}</td><td>${n.hostaddr}:${n.port}</td>
                  <td class="role" data-role=${nodeRole(n)}>${nodeRole(n)}</td>
                  <td>${badge(n.status)}</td><td>${n.replica_of}</td><td>${n.restarts}</td><td>${n.fenced ? `fenced: ${n.fenced}` : n.replication_error}</td>
                </tr>`,
              )}
            </tbody>
          </table>`,
      )}
      <h3>Compute nodes</h3>
      <table>
        <thead><tr><th>name</th><th>address</th><th>status</th><th>restarts</th></tr></thead>
        <tbody>
          ${d.list_comp.map(
            (c) => html`<tr data-comp=${`${c.hostaddr}:${c.port}`}><td>${c.comp_name}</td><td>${c.hostaddr}:${c.port}</td><td>${badge(c.status)}</td><td>${c.restarts}</td></tr>`,
          )}
        </tbody>
      </table>
    </div>`;
}

/** The role as measured: master (writable, replicating from no one), standby (replicating, or read-only), or '-' when not answering. */
function nodeRole(n) {
  if (n.master === 'true') return 'master';
  return n.replica_of || n.status === 'online' ? 'standby' : '-';
}

function jobsView({ value, error }) {
  const jobs = value?.list_job ?? [];
  return html`
    <section id="jobs">
      <h2>Jobs <span class="muted">newest ${jobs.length} of ${value?.total_jobs ?? 0}</span></h2>
      ${failure(error)}
      <table>
        <thead><tr><th>id</th><th>type</th><th>cluster</th><th>status</th><th>progress</th><th>elapsed</th><th>by</th><th>error</th></tr></thead>
        <tbody>
          ${jobs.map(
            (j) => html`<tr data-job=${j.job_id} data-job-status=${j.status}>
              <td>${j.job_id}</td><td>${j.job_type}</td><td>${j.cluster_id}</td><td>${badge(j.status)}</td>
              <td class="progress"><progress max="1" value=${jobFraction(j)}></progress> <span data-progress>${jobProgressText(j)}</span></td>
              <td data-elapsed>${formatElapsed(j.elapsed_ms)}</td><td>${j.submitted_by}</td>
              <td class="error-text">${j.status === 'failed' ? `${j.error_code}: ${j.error_info}` : ''}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </section>`;
}
