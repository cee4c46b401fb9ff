"""The Python `openai` client against openclaw-host: streaming and not."""
import json
import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("OPENCLAW_BASE_URL", "http://localhost:8000/v1"),
    api_key=os.environ.get("OPENCLAW_API_KEY", "local"),
)
model = os.environ.get("OPENCLAW_MODEL", "default")
out = {}

r = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Name three fruits."}],
    max_tokens=10,
    seed=7,
)
out["plain"] = {
    "content": r.choices[0].message.content,
    "finish_reason": r.choices[0].finish_reason,
    "completion_tokens": r.usage.completion_tokens,
}

text = ""
n = 0
for chunk in client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Explain gravity."}],
    max_tokens=10,
    stream=True,
):
    n += 1
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
out["stream"] = {"text": text, "chunks": n}
out["models"] = [m.id for m in client.models.list().data]

# A header-less conversation continued by echoing the reply, as stock agent clients do.
history = [{"role": "user", "content": "Describe the owl."}]
r1 = client.chat.completions.create(model=model, messages=history, max_tokens=6)
history.append({"role": "assistant", "content": r1.choices[0].message.content})
history.append({"role": "user", "content": "Thanks, that helps a lot."})
r2 = client.chat.completions.create(model=model, messages=history, max_tokens=6)
out["continued"] = {"first": r1.id, "second": r2.id}
print(json.dumps(out))
