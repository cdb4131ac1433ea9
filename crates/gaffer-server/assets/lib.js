// Shared pieces of the page: the view library, API calls, formatting.
// Every string from the server is rendered as text (Preact escapes it); nothing
// goes through innerHTML.
import { h, render, Component, Fragment } from "./vendor/preact.mjs";
import { useState, useEffect, useRef, useMemo, useCallback } from "./vendor/hooks.mjs";
import htm from "./vendor/htm.mjs";

export const html = htm.bind(h);
export { h, render, Component, Fragment, useState, useEffect, useRef, useMemo, useCallback };

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content || "";
export const CSRF = meta("csrf-token");
// What each approval kind is called and what its answers do, watchdog triggers and
// spending caps in words: `gaffer_protocol::words`, the one source every surface uses.
export const WORDS = JSON.parse(meta("approval-words") || "{}");
// Every journal event type: an EventSource hears a named event only with a
// listener for that name.
export const EVENT_KINDS = meta("event-kinds").split(" ").filter(Boolean);

/** `{status, data}` of an API call; a 401 sends the page to the login form. */
export async function api(method, path, body) {
  const opts = { method, headers: { "X-CSRF-Token": CSRF } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, opts);
  } catch (e) {
    return { status: 0, data: { error: { message: "the server cannot be reached; check the connection" } } };
  }
  if (r.status === 401) {
    location.href = "/login";
    return { status: 401, data: null };
  }
  const data = r.headers.get("content-type")?.includes("json") ? await r.json() : null;
  return { status: r.status, data };
}

export const errorText = (r) => r?.data?.error?.message || `the server answered ${r?.status}`;

/** Money as people read it: the same rule as `gaffer_core::format_cost` (CLI, Discord);
 * `null` is a cost the server does not know (tokens spent on a model with no price). */
export function money(usd) {
  if (usd === null) return "cost unknown";
  const x = Number(usd) || 0;
  if (x === 0) return "$0.00";
  return "$" + x.toFixed(x >= 0.99995 ? 2 : 4);
}

export function tokens(n) {
  n = Number(n) || 0;
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1000).toFixed(n < 1e4 ? 1 : 0) + "k";
  return (n / 1e6).toFixed(1) + "M";
}

export function ago(ms, now = Date.now()) {
  const s = Math.max(0, Math.floor((now - ms) / 1000));
  if (s < 45) return "just now";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  if (s < 86400) return Math.floor(s / 3600) + "h ago";
  return Math.floor(s / 86400) + "d ago";
}

/** "in 4m 12s" until `ms`, or null once it has passed. */
export function countdown(ms, now = Date.now()) {
  const s = Math.floor((ms - now) / 1000);
  if (s <= 0) return null;
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function duration(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  return `${Math.floor(s / 60)}m ${s % 60}s`;
}

export const time = (ms) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
export const firstLine = (s) => String(s || "").split("\n").find((l) => l.trim()) || "";
export const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

/**
 * The shortest start of each id that none of the others shares, at least eight
 * digits after its `t-`/`ap-` prefix: the CLI's rule for short ids. Ids begin with
 * their creation time, so a fixed cut would show tasks made the same minute alike.
 */
export function shortIds(ids) {
  const sorted = [...new Set(ids)].sort();
  const common = (a, b) => { let n = 0; while (n < a.length && a[n] === b[n]) n++; return n; };
  const out = {};
  sorted.forEach((id, i) => {
    const prefix = id.indexOf("-") + 1;
    const near = Math.max(i > 0 ? common(sorted[i - 1], id) : 0, i + 1 < sorted.length ? common(sorted[i + 1], id) : 0);
    out[id] = id.slice(0, Math.min(id.length, Math.max(near + 1, prefix + 8)));
  });
  return out;
}

export const FINAL = new Set(["done", "failed", "cancelled", "blocked"]);
export const RETRYABLE = new Set(["failed", "cancelled", "blocked"]);
export const stageName = (s) =>
  ({ awaiting_plan_approval: "awaiting approval", queued: "queued" })[s] || String(s).replaceAll("_", " ");

/** A re-render every `ms`, for clocks ("expires in", "2m ago"). */
export function useNow(ms) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

/** Call `f` at most once per `ms`, with the last arguments. */
export function throttle(f, ms) {
  let t = null;
  return () => {
    if (t) return;
    t = setTimeout(() => { t = null; f(); }, ms);
  };
}

/** Where a person acted from, in words (`web:login-link` → "the web page"). */
export function channel(via) {
  const kind = String(via || "").split(":")[0];
  return { web: "the web page", api: "the API", cli: "the CLI", discord: "Discord", local: "this machine" }[kind] || kind;
}

/** Who did something, from `{kind,name,via}`: "ana via the web page", "rule “tests”". */
export function actor(a) {
  if (!a) return "";
  if (a.kind === "policy") return `rule “${a.name}”`;
  if (a.kind === "system") return "gaffer";
  return a.via ? `${a.name} via ${channel(a.via)}` : a.name;
}

export const badge = (stage, label) => html`<span class=${"badge s-" + stage}>${label || stageName(stage)}</span>`;

/**
 * Structured data as text people read: objects as labelled rows, arrays as
 * lists, never JSON syntax.
 */
export function Data({ value, depth = 0 }) {
  if (value === null || value === undefined) return html`<span class="muted">none</span>`;
  if (typeof value !== "object") {
    const s = String(value);
    return s.includes("\n") ? html`<pre class="out">${s}</pre>` : html`<span class="val">${s}</span>`;
  }
  if (Array.isArray(value)) {
    if (!value.length) return html`<span class="muted">none</span>`;
    if (value.every((v) => v === null || typeof v !== "object")) return html`<span class="val">${value.join(", ")}</span>`;
    return html`<ol class="data-list">${value.map((v) => html`<li><${Data} value=${v} depth=${depth + 1} /></li>`)}</ol>`;
  }
  const keys = Object.keys(value);
  if (!keys.length) return html`<span class="muted">none</span>`;
  return html`<dl class="data">${keys.map((k) => html`<dt>${k.replaceAll("_", " ")}</dt><dd><${Data} value=${value[k]} depth=${depth + 1} /></dd>`)}</dl>`;
}

/** A folded block whose body is built only when opened (long outputs stay cheap). */
export function Fold({ summary, cls, open: initial = false, children }) {
  const [open, setOpen] = useState(initial);
  return html`<div class=${"fold " + (cls || "") + (open ? " open" : "")}>
    <button type="button" class="fold-head" aria-expanded=${open} onClick=${() => setOpen(!open)}>
      <span class="chev" aria-hidden="true">›</span>${summary}
    </button>
    ${open ? html`<div class="fold-body">${typeof children === "function" ? children() : children}</div>` : null}
  </div>`;
}

/** Output whose end matters (a failing command says why last): line by line,
 *  scrolled to its end when it is taller than its box. */
export function TailOutput({ text }) {
  const ref = useRef(null);
  useEffect(() => { if (ref.current) ref.current.scrollTop = ref.current.scrollHeight; }, [text]);
  return html`<pre class="out" ref=${ref}>${text}</pre>`;
}

/** An error: its first line, then what follows (a failing setup command's output,
 *  whose last lines say why) in an open fold, lines kept. */
export function ErrorText({ error }) {
  const text = String(error || "").replace(/\s+$/, "");
  const nl = text.indexOf("\n");
  if (nl < 0) return html`<p class="err">${text}</p>`;
  const output = text.slice(nl + 1);
  const n = output.split("\n").length;
  return html`<p class="err">${text.slice(0, nl)}</p>
    <${Fold} open=${true} cls="error" summary=${`Output · ${n} line${n === 1 ? "" : "s"}`}>${() => html`<${TailOutput} text=${output} />`}</${Fold}>`;
}

/** An error's first line, with a word that the rest is shown elsewhere. */
export function headLine(error) {
  const text = String(error || "").replace(/\s+$/, "");
  const nl = text.indexOf("\n");
  return nl < 0 ? text : text.slice(0, nl) + " (the output is shown with the step)";
}

// ---------- text ----------

/** Text with `code` and **bold** marked, as agents and summaries write it. */
export const Text = ({ text }) => inline(String(text ?? ""));

function inline(text) {
  const out = [];
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    out.push(t[0] === "`" ? html`<code>${t.slice(1, -1)}</code>` : html`<strong>${t.slice(2, -2)}</strong>`);
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function parseJson(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" ? v : null;
  } catch {
    return null;
  }
}

/** A structured answer in a message (a plan, a verdict): folded, since the step's
 *  result shows it in words; opened, it is labelled data, never JSON. */
function Answer({ data }) {
  return html`<${Fold} summary="Structured answer" cls="answer">${() => html`<${Data} value=${data} />`}</${Fold}>`;
}

/**
 * An agent's message: paragraphs, lists, fenced code; a JSON answer (plans,
 * verdicts) is folded away as data, never shown as JSON.
 */
export function Prose({ text }) {
  const blocks = [];
  const lines = String(text || "").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !/^\s*```/.test(lines[i])) body.push(lines[i++]);
      i++;
      const code = body.join("\n");
      const data = parseJson(code);
      blocks.push(data ? html`<${Answer} data=${data} />` : html`<pre class="code">${code}</pre>`);
      continue;
    }
    if (/^\s*([-*]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const items = [];
      while (i < lines.length && /^\s*([-*]|\d+[.)])\s+/.test(lines[i])) items.push(lines[i++].replace(/^\s*([-*]|\d+[.)])\s+/, ""));
      blocks.push(ordered ? html`<ol>${items.map((t) => html`<li>${inline(t)}</li>`)}</ol>` : html`<ul>${items.map((t) => html`<li>${inline(t)}</li>`)}</ul>`);
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^\s*```/.test(lines[i]) && !/^\s*([-*]|\d+[.)])\s+/.test(lines[i])) para.push(lines[i++]);
    const joined = para.join("\n");
    const data = parseJson(joined.trim());
    const heading = joined.match(/^#{1,4}\s+(.*)$/);
    blocks.push(data ? html`<${Answer} data=${data} />`
      : heading ? html`<p class="h">${inline(heading[1])}</p>` : html`<p>${inline(joined)}</p>`);
  }
  return html`<div class="prose">${blocks}</div>`;
}

// ---------- diffs ----------

const KEYWORDS = new Set(["fn", "let", "mut", "const", "pub", "struct", "enum", "impl", "use", "mod", "match", "return", "if", "else", "for", "while", "loop", "async", "await", "def", "class", "import", "from", "function", "var", "package", "func", "type", "interface", "true", "false", "null", "None", "self", "Self"]);

function highlight(line) {
  const out = [];
  const re = /("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*)/g;
  let last = 0, m;
  while ((m = re.exec(line)) !== null) {
    if (m.index > last) out.push(line.slice(last, m.index));
    const tok = m[0];
    if (tok[0] === '"' || tok[0] === "'") out.push(html`<span class="str">${tok}</span>`);
    else if (KEYWORDS.has(tok)) out.push(html`<span class="kw">${tok}</span>`);
    else out.push(tok);
    last = m.index + tok.length;
  }
  if (last < line.length) out.push(line.slice(last));
  return out;
}

/** Split a unified diff into files: `[{path, lines, added, removed}]`. */
export function diffFiles(text) {
  const files = [];
  let cur = null;
  for (const line of String(text || "").split("\n")) {
    if (line.startsWith("diff --git ")) {
      const m = line.match(/ b\/(.*)$/);
      cur = { path: m ? m[1] : line.slice(11), lines: [], added: 0, removed: 0 };
      files.push(cur);
      continue;
    }
    if (!cur) {
      if (!line) continue;
      cur = { path: "", lines: [], added: 0, removed: 0 };
      files.push(cur);
    }
    if (line.startsWith("+++ ") || line.startsWith("--- ") || /^(index|new file|deleted file|similarity|rename|old mode|new mode) /.test(line)) {
      if (line.startsWith("+++ b/") && !cur.path) cur.path = line.slice(6);
      continue;
    }
    if (line.startsWith("+")) cur.added++;
    else if (line.startsWith("-")) cur.removed++;
    cur.lines.push(line);
  }
  return files.filter((f) => f.lines.length || f.path);
}

export function DiffLines({ lines }) {
  return html`<pre class="diff">${lines.map((line) => {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    const body = cls === "hunk" ? line : [line.slice(0, 1), ...highlight(line.slice(1))];
    return html`<span class=${cls}>${body}${"\n"}</span>`;
  })}</pre>`;
}

/** A diff, file by file, each folded unless `open`. */
export function Diff({ text, open = false }) {
  const files = diffFiles(text);
  if (!files.length) return html`<p class="muted">No changes.</p>`;
  return html`<div class="diff-files">${files.map((f) => html`<${Fold} key=${f.path} open=${open || files.length === 1} cls="file"
      summary=${html`<span class="path">${f.path || "changes"}</span><span class="stat"><span class="plus">+${f.added}</span> <span class="minus">−${f.removed}</span></span>`}>
      ${() => html`<${DiffLines} lines=${f.lines} />`}
    </${Fold}>`)}</div>`;
}
