// The chat widget: the user's message goes to /api/chat (the REST shop agent); while it answers, "typing" shows;
// the answer is written word by word, like a streamed reply, then "typing" hides.
const log = document.getElementById("chat-log");
const input = document.getElementById("chat-input");
const typing = document.getElementById("typing");
const session = "web-" + Math.random().toString(36).slice(2);
// the widget starts closed, behind its launcher, as most shop widgets do
document.getElementById("launcher").addEventListener("click", (event) => {
  document.getElementById("chat").hidden = false;
  event.target.hidden = true;
  input.focus();
});
function bubble(kind, text) {
  const div = document.createElement("div");
  div.className = "msg " + kind;
  div.textContent = text;
  log.append(div);
  return div;
}
document.getElementById("chat-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const message = input.value.trim();
  if (!message) return;
  input.value = "";
  bubble("user", message);
  typing.hidden = false;
  let reply;
  try {
    const response = await fetch("/api/chat", {method: "POST", headers: {"Content-Type": "application/json"},
                                               body: JSON.stringify({message, session_id: session})});
    const data = await response.json();
    reply = data.reply || data.error || "(no answer)";
  } catch (error) {
    reply = "The assistant is unavailable.";
  }
  const div = bubble("agent", "");
  const words = reply.split(" ");
  for (let i = 0; i < words.length; i++) {
    div.textContent += (i ? " " : "") + words[i];
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
  typing.hidden = true;
});
