// The Vercel AI SDK with a tool against openclaw-host: RUNS conversations of three user turns,
// each turn a tool loop of up to two steps, the whole history sent again every turn (the
// tool's definition with it). A run passes when every request is answered. Prints the tally.
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const provider = createOpenAICompatible({
  name: "openclaw",
  baseURL: process.env.OPENCLAW_BASE_URL,
  apiKey: process.env.OPENCLAW_API_KEY ?? "local",
});
const model = provider.chatModel(process.env.OPENCLAW_MODEL ?? "default");
const tools = {
  get_weather: tool({
    description: "Get the current weather for a city.",
    inputSchema: jsonSchema({
      type: "object",
      properties: {
        city: { type: "string", description: "The city, for example Lisbon." },
        unit: { type: "string", enum: ["celsius", "fahrenheit"], description: "Temperature unit." },
      },
      required: ["city"],
    }),
    execute: async ({ city }) => ({ city, forecast: "sunny", temperature: 21 }),
  }),
};

const runs = Number(process.env.RUNS ?? 12);
let passed = 0;
let toolCalls = 0;
let maxPrompt = 0;
const errors = [];
for (let r = 0; r < runs; r++) {
  const messages = [];
  try {
    for (const q of ["What is the weather in Lisbon?", "And in Paris?", "Which of the two is warmer?"]) {
      messages.push({ role: "user", content: q });
      const res = await generateText({
        model, messages, tools, stopWhen: stepCountIs(2), maxOutputTokens: 64, temperature: 1, seed: r,
      });
      for (const step of res.steps) {
        toolCalls += step.toolCalls.length;
        maxPrompt = Math.max(maxPrompt, step.usage.inputTokens ?? 0);
      }
      messages.push(...res.response.messages);
    }
    passed += 1;
  } catch (e) {
    errors.push(String(e?.message ?? e).slice(0, 400));
  }
}
console.log(JSON.stringify({ runs, passed, toolCalls, maxPrompt, errors }));
