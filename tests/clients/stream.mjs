// The `openai` npm client exactly as a user writes it (the base URL can be moved by the test).
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.OPENCLAW_BASE_URL ?? "http://localhost:8000/v1",
  apiKey: process.env.OPENCLAW_API_KEY ?? "local",
});
const model = process.env.OPENCLAW_MODEL ?? "default";
const out = {};

// Streaming, reading chunk.choices[0]?.delta?.content.
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Tell me about the shark." }],
  stream: true,
  max_tokens: 12,
});
let text = "";
let chunks = 0;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  chunks += 1;
}
out.stream = { text, chunks };

// A tool-calling round trip: tools offered, the assistant's tool call and the tool's result sent back.
const tools = [{
  type: "function",
  function: { name: "ls", description: "List files", parameters: { type: "object", properties: { path: { type: "string" } } } },
}];
const messages = [
  { role: "system", content: "You are an agent with tools." },
  { role: "user", content: [{ type: "text", text: "List the files here." }] },
];
// An explicit session id, as patched agent clients send it, ties the two calls together.
const session = { headers: { "X-Session-Id": "tools-1" } };
const first = await client.chat.completions.create({
  model, messages, tools, tool_choice: "auto", max_completion_tokens: 8,
  stream: true, stream_options: { include_usage: true },
}, session);
let firstText = "";
let usage = null;
for await (const chunk of first) {
  firstText += chunk.choices[0]?.delta?.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
out.first = { text: firstText, usage };
messages.push({
  role: "assistant", content: null,
  tool_calls: [{ id: "call_1", type: "function", function: { name: "ls", arguments: JSON.stringify({ path: "." }) } }],
});
messages.push({ role: "tool", tool_call_id: "call_1", content: "a.txt b.txt" });
const second = await client.chat.completions.create({ model, messages, tools, max_tokens: 8 }, session);
out.second = { finish_reason: second.choices[0].finish_reason, content: second.choices[0].message.content, usage: second.usage };

// An error comes back as an APIError with OpenAI's shape.
try {
  await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] });
  out.error = "none";
} catch (e) {
  out.error = { status: e.status, code: e.code };
}
console.log(JSON.stringify(out));
