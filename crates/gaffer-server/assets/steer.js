// Steering a running task from the page: a message to its agent (into the running
// turn, or as its next turn) and an interrupt of the turn that keeps the task.
// What was sent shows in the conversation from the task's event stream, with
// whether the agent got it; this form only sends and says what the server answered.
import { html, api, errorText, FINAL, useState } from "./lib.js";
import { ROLE } from "./transcript.js";

/** The message box under the conversation of an unfinished task. It stays in place
 *  (disabled, saying why) while no agent runs, so nothing jumps as sessions come and go. */
export function Steer({ t, live }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState("");
  const [said, setSaid] = useState(null); // {ok, text}: the server's answer to the last action
  if (FINAL.has(t.stage)) return null;
  const path = `/api/tasks/${encodeURIComponent(t.id)}`;
  const who = live ? (ROLE[live.role] || live.role).toLowerCase() : "agent";
  const send = async (e) => {
    e.preventDefault();
    const body = text.trim();
    if (!body || busy) return;
    setBusy("send");
    const r = await api("POST", `${path}/messages`, { text: body });
    setBusy("");
    if (r.status === 201) {
      setText("");
      setSaid({ ok: true, text: `Sent to the ${who}. It shows in the conversation, and says when the agent got it.` });
    } else setSaid({ ok: false, text: errorText(r) });
  };
  const interrupt = async () => {
    setBusy("interrupt");
    const r = await api("POST", `${path}/interrupt`);
    setBusy("");
    setSaid(r.status === 200
      ? { ok: true, text: `The ${who} stopped its turn and waits: your next message starts its next turn.` }
      : { ok: false, text: errorText(r) });
  };
  // Ctrl+Enter (⌘+Enter) sends, as in chat apps; Enter alone is a new line.
  const keys = (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) send(e); };
  const hint = !live
    ? "No agent is running right now. When the next one starts, you can write to it here."
    : live.interrupted
      ? `The ${who} (${live.agent}) stopped its turn and waits for your message.`
      : `The ${who} (${live.agent}) gets it in its running turn where it can, otherwise as its next turn.`;
  return html`<form class="steer" id="steer" onSubmit=${send} aria-labelledby="steer-h">
    <h2 id="steer-h">Message the ${who}</h2>
    <p class="small muted" id="steer-hint">${hint}</p>
    <label class="sr-only" for="steer-text">Your message</label>
    <textarea id="steer-text" rows="2" maxlength="8000" disabled=${!live} value=${text}
      placeholder=${live ? "Use the existing helper in src/util.rs instead" : "No agent is running"}
      onInput=${(e) => setText(e.target.value)} onKeyDown=${keys}></textarea>
    <div class="actions">
      <button type="submit" class="primary" id="steer-send" disabled=${!live || !!busy || !text.trim()}>${busy === "send" ? "Sending…" : "Send"}</button>
      <button type="button" class="secondary" id="steer-interrupt" disabled=${!live || live.interrupted || !!busy}
        title="Stop the agent's turn; the task goes on" onClick=${interrupt}>${busy === "interrupt" ? "Stopping…" : "Interrupt turn"}</button>
    </div>
    <p class=${"small steer-said" + (said && !said.ok ? " err" : "")} role="status">${said ? said.text : ""}</p>
  </form>`;
}
