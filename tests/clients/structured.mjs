// The npm `openai` client asking for a reply under a JSON schema (`response_format:
// json_schema`, strict), whole and streamed, and for a forced tool call. Prints what came back.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.OPENCLAW_BASE_URL,
  apiKey: process.env.OPENCLAW_API_KEY ?? "local",
});
const model = process.env.OPENCLAW_MODEL ?? "default";
const schema = {
  type: "object",
  properties: {
    answer: { type: "integer", minimum: 0, maximum: 99 },
    confident: { type: "boolean" },
    color: { enum: ["red", "green", "blue"] },
  },
  required: ["answer", "confident", "color"],
  additionalProperties: false,
};
const response_format = {
  type: "json_schema",
  json_schema: { name: "reply", schema, strict: true },
};
const messages = [{ role: "user", content: "How many fruits are there? Answer in JSON." }];
const out = {};

const whole = await client.chat.completions.create({
  model, messages, response_format, max_tokens: 60, seed: 3,
});
out.whole = {
  content: whole.choices[0].message.content,
  finish_reason: whole.choices[0].finish_reason,
};

let text = "";
let chunks = 0;
const stream = await client.chat.completions.create({
  model, messages, response_format, max_tokens: 60, seed: 4, stream: true,
});
for await (const chunk of stream) {
  chunks += 1;
  text += chunk.choices[0]?.delta?.content ?? "";
}
out.stream = { content: text, chunks };

const tools = [{
  type: "function",
  function: {
    name: "count",
    description: "Count things.",
    parameters: {
      type: "object",
      properties: { what: { enum: ["apples", "owls"] }, n: { type: "integer", minimum: 1, maximum: 9 } },
      required: ["what", "n"],
      additionalProperties: false,
    },
  },
}];
const forced = await client.chat.completions.create({
  model, messages, tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 60, seed: 5,
});
out.required = {
  finish_reason: forced.choices[0].finish_reason,
  tool_calls: (forced.choices[0].message.tool_calls ?? []).map((c) => ({
    name: c.function.name,
    arguments: c.function.arguments,
  })),
};
console.log(JSON.stringify(out));
