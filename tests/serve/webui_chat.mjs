// serve:webui_chat - the chat page's own script (tools/serve/webui/index.html, as the server sends it at GET /) run by
// Node against a running `specula serve`: a user types two messages and presses Enter; each reply must stream into
// the page and be the text the server gives the same conversation without streaming (greedy), with the stats line of
// its timings. The page's elements are a minimal stand-in for the browser's DOM (what the script touches: values,
// text, class names, children, listeners); fetch, streams, TextDecoder and AbortController are Node's own.
// Usage: node webui_chat.mjs http://127.0.0.1:PORT
const base = process.argv[2];
const fail = (why) => { console.error("FAIL: " + why); process.exit(1); };

const page = await fetch(base + "/");
if (page.status !== 200) fail("GET / answered " + page.status);
const html = await page.text();
const script = html.slice(html.indexOf("<script>") + "<script>".length, html.indexOf("</script>"));
if (!script.includes("/v1/chat/completions")) fail("the page's script does not talk to /v1/chat/completions");

class Element {
  constructor(id) {
    this.id = id; this.value = ""; this.className = ""; this.children = []; this.listeners = {};
    this.scrollTop = 0; this.scrollHeight = 0; this._text = "";
  }
  get textContent() { return this._text; }
  set textContent(t) { this._text = String(t); if (t === "") this.children = []; }
  appendChild(child) { this.children.push(child); return child; }
  addEventListener(type, fn) { this.listeners[type] = fn; }
  requestSubmit() { this.listeners.submit({ preventDefault() {} }); }
}
const elements = {};
globalThis.document = {
  getElementById: (id) => (elements[id] ??= new Element(id)),
  createElement: () => new Element(""),
};
const nodeFetch = globalThis.fetch;
globalThis.fetch = (url, options) => nodeFetch(new URL(url, base), options);  // the page's URLs are relative

new Function(script)();  // the page's script, as the browser runs it

const $ = (id) => document.getElementById(id);
const idle = async () => {  // until the reply is done: the Stop button is Send again and the stats line is there
  for (let i = 0; i < 600; ++i) {
    await new Promise((r) => setTimeout(r, 100));
    const last = $("log").children.at(-1);
    if ($("send").textContent === "Send" && last && last.className === "stats") return;
  }
  fail("no reply within 60 s");
};

$("temperature").value = "0";
$("max_tokens").value = "24";
$("system").value = "You tell stories.";
const conversation = [{ role: "system", content: "You tell stories." }];
for (const text of ["Once upon a time", "What happened next?"]) {
  $("input").value = text;
  $("input").listeners.keydown({ key: "Enter", shiftKey: false, preventDefault() {} });
  if ($("input").value !== "") fail("Enter did not send the message");
  await idle();
  const log = $("log").children;
  const reply = log.at(-2), stats = log.at(-1);
  if (reply.className !== "msg assistant") fail("the reply's element is '" + reply.className + "': " + reply.textContent);
  conversation.push({ role: "user", content: text });
  const direct = await nodeFetch(base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: conversation, temperature: 0, max_tokens: 24 }),
  }).then((r) => r.json());
  const want = direct.choices[0].message.content;
  if (reply.textContent !== want) fail("the page shows '" + reply.textContent + "', the server's reply is '" + want + "'");
  if (!/\d+ tokens, [\d.]+ tokens\/s/.test(stats.textContent)) fail("no stats line: '" + stats.textContent + "'");
  conversation.push({ role: "assistant", content: want });
  console.log("turn " + (conversation.length - 1) / 2 + ": " + JSON.stringify(want) + " (" + stats.textContent + ")");
}
if ($("log").children.length !== 6) fail("the log has " + $("log").children.length + " entries, not 2 x (user, reply, stats)");
$("clear").listeners.click();
if ($("log").children.length !== 0) fail("New chat did not clear the log");
console.log("OK");
