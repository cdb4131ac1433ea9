// The after-pull-request loop on the task page: why each follow-up opened (review
// comments with their file and line, a base that moved, conflicts), what its own
// steps did (the update onto the base, the owner's conflict resolution, the replies
// posted) and how following ended. The model (`transcript.js`) keeps the journal's
// `follow_up_opened` events as items; these render them and those steps.
import { html, Fold, Prose, Text, DiffLines, time } from "./lib.js";

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
const short = (sha) => html`<code>${String(sha || "").slice(0, 8)}</code>`;

/** Step labels of the follow-up steps (`kind/n`), for `stepLabel`. */
export const FOLLOW_UP_STEPS = (n) => ({
  "follow-up-approval": `One more review round? (follow-up ${n})`,
  "push-approval": `Push approval, follow-up ${n}`,
  reply: `Replies, follow-up ${n}`,
  sync: `Update onto the base, ${n}`,
  resolve: `Conflict resolution, round ${n}`,
});

/** Where a review comment points: `path:line` in the code, or the conversation. */
const where = (c) => c.path
  ? html`<code class="path">${c.path}${c.line ? ":" + c.line : ""}</code>`
  : html`<span class="muted">the conversation</span>`;

function Comment({ c }) {
  const hunk = typeof c.diff_hunk === "string" && c.diff_hunk.trim() ? c.diff_hunk.replace(/\n$/, "").split("\n") : null;
  return html`<li class="fu-comment">
    <div>${where(c)} <strong>${c.author}</strong>${c.url ? html` <a class="muted small" href=${c.url} target="_blank" rel="noopener">on the forge</a>` : null}</div>
    <${Prose} text=${c.body} />
    ${hunk ? html`<${Fold} summary="The diff there">${() => html`<${DiffLines} lines=${hunk} />`}</${Fold}>` : null}
  </li>`;
}

/** Why follow-up `f` opened, in words: its heading and what it is about. */
function why(f) {
  const d = f.detail || {};
  if (f.kind === "review_comments") {
    const comments = Array.isArray(d.comments) ? d.comments : [];
    const pr = d.pull_request ? html` on pull request ${d.url ? html`<a href=${d.url} target="_blank" rel="noopener">#${d.pull_request}</a>` : "#" + d.pull_request}` : "";
    return {
      title: html`${plural(comments.length || f.keys.length, "review comment", "review comments")}${pr}`,
      body: comments.length ? html`<ul class="fu-comments">${comments.map((c) => html`<${Comment} key=${c.key} c=${c} />`)}</ul>` : null,
    };
  }
  if (f.kind === "merge_conflict") {
    const base = d.base ? html`<code>${d.base}</code>` : "its base";
    const how = d.mergeable === "behind"
      ? "the pull request must be up to date with it before it can merge"
      : "the pull request no longer merges: it conflicts with it";
    return {
      title: html`The base ${base} moved`,
      body: html`<p>${how}${d.head_sha ? html` (at ${short(d.head_sha)})` : ""}. The branch is brought onto it, the checks run again and it is pushed after the ship approval rules.</p>`,
    };
  }
  return { title: html`<code>${f.kind}</code>`, body: null };
}

/** A follow-up as it opened on the done task: why, and what it answers. */
export function FollowUpCard({ f }) {
  const { title, body } = why(f);
  return html`<section class="follow-up" data-follow-up=${f.n} aria-label=${"Follow-up " + f.n}>
    <div class="fu-head"><span class="icon" aria-hidden="true">↻</span>
      <strong>Follow-up ${f.n}</strong> <span>${title}</span> <span class="muted small">${time(f.at)}</span></div>
    ${body}
  </section>`;
}

/** `sync/n`: what bringing the branch onto its moved base did. */
export function syncText(s) {
  const r = s.receipt || {};
  const base = r.base ? html`<code>${r.base}</code>` : "the base";
  const verb = r.strategy === "merge" ? "Merging" : "Rebasing onto";
  const files = (r.files || []).map((f) => html` <code>${f}</code>`);
  switch (r.outcome) {
    case "updated":
      return html`${r.strategy === "merge" ? html`Merged ${base}` : html`Rebased onto ${base}`} ${short(r.base_sha)} without conflicts: the branch is at ${short(r.head)}`;
    case "conflicted":
      return html`${verb} ${base} ${short(r.base_sha)} stopped on conflicts in${files}`;
    case "up_to_date":
      return html`The branch already holds ${base} ${short(r.base_sha)}: nothing to push`;
    default:
      return s.state === "failed" ? "Updating the branch onto its base failed" : "Fetching the base and updating the branch";
  }
}

/** `reply/n`: the replies posted under the review comments. */
export function replyText(s) {
  const replies = s.receipt?.replies || [];
  if (!s.receipt) return "Replying to the review comments";
  const found = replies.filter((r) => r.found).length;
  return html`Replied to ${plural(replies.length, "review comment", "review comments")}${found ? ` (${found} already answered before a restart)` : ""}:
    ${replies.map((r, i) => html`${i ? ", " : " "}<a href=${r.url} target="_blank" rel="noopener">reply ${i + 1}</a>`)}`;
}

/** What the owner's `resolve/r` left: resolved, stopped again, or markers left. */
export function ResolveResult({ r }) {
  const files = (r.files || []).map((f) => html` <code>${f}</code>`);
  switch (r.outcome) {
    case "updated":
      return html`<div class="result ok"><strong>✓ Conflicts resolved</strong><p>The update went on: the branch is at ${short(r.head)}.</p></div>`;
    case "conflicted":
      return html`<div class="result warn"><strong>Resolved; the update stopped again</strong><p>Conflicts in${files}</p></div>`;
    case "unresolved":
      return html`<div class="result bad"><strong>Conflict markers left</strong><p>In${files}; the owner gets another round.</p></div>`;
    default:
      return null;
  }
}

/** How a round ended, for the note after it: done again, or following ended. */
export const doneAgain = (n) => `Follow-up ${n} answered: done again, and the pull request is still followed`;
export const endedText = (reason) => ["No longer following the pull request: ", html`<${Text} text=${reason} />`];
