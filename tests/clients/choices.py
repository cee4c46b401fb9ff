"""The Python `openai` client asking for several choices (`n`), whole and streamed, and going
on from one of them."""
import json
import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("OPENCLAW_BASE_URL", "http://localhost:8000/v1"),
    api_key=os.environ.get("OPENCLAW_API_KEY", "local"),
)
model = os.environ.get("OPENCLAW_MODEL", "default")
out = {}

question = [{"role": "user", "content": "Describe the owl."}]
r = client.chat.completions.create(
    model=model,
    messages=question,
    n=3,
    max_tokens=8,
    seed=11,
    extra_headers={"X-Session-Id": "choices"},
)
out["whole"] = {
    "id": r.id,
    "indices": [c.index for c in r.choices],
    "texts": [c.message.content for c in r.choices],
    "completion_tokens": r.usage.completion_tokens,
}

# The conversation goes on from the second choice.
follow = question + [
    {"role": "assistant", "content": r.choices[1].message.content},
    {"role": "user", "content": "Thanks, that helps a lot."},
]
client.chat.completions.create(
    model=model,
    messages=follow,
    max_tokens=4,
    extra_headers={"X-Session-Id": "choices"},
)

texts, finishes, usage = {}, {}, None
for chunk in client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "List three fruits."}],
    n=2,
    max_tokens=8,
    stream=True,
    stream_options={"include_usage": True},
    extra_headers={"X-Session-Id": "streamed-choices"},
):
    if chunk.usage:
        usage = chunk.usage.completion_tokens
    for c in chunk.choices:
        texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
        if c.finish_reason:
            finishes[c.index] = c.finish_reason
out["stream"] = {
    "texts": [texts[i] for i in sorted(texts)],
    "finishes": [finishes.get(i) for i in sorted(texts)],
    "completion_tokens": usage,
}
print(json.dumps(out))
